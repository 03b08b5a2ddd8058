import json

import pytest

from devstack.emulator.errors import ApiError
from devstack.emulator.policy import (
    Permission,
    escape_iam_glob,
    session_policy,
    session_policy_json,
    split_s3_location,
)


def _actions(policy):
    return policy["Statement"][0]["Action"]


def test_read_policy_allows_only_get_actions_on_the_table_prefix():
    policy = session_policy("s3://bkt/a/t1", Permission.READ)
    assert _actions(policy) == ["s3:GetObject", "s3:GetObjectVersion"]
    assert policy["Statement"][0]["Resource"] == "arn:aws:s3:::bkt/a/t1/*"


def test_write_policy_adds_put_delete_and_multipart():
    actions = _actions(session_policy("s3://bkt/a/t1/", Permission.READ_WRITE_DELETE))
    for action in ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
        assert action in actions


def test_listing_is_conditioned_on_the_table_prefix_only():
    # Lakekeeper grants ListBucket for `<key>/*` only: the bare `<key>` would also admit
    # listing with prefix `a/t1` and so reveal the sibling `a/t10/`.
    stmt = session_policy("s3://bkt/a/t1", Permission.READ)["Statement"][1]
    assert stmt["Action"] == "s3:ListBucket"
    assert stmt["Resource"] == "arn:aws:s3:::bkt"
    assert stmt["Condition"]["StringLike"]["s3:prefix"] == "a/t1/*"


def test_read_policy_has_no_write_action():
    actions = _actions(session_policy("s3://bkt/a/t1", Permission.READ))
    assert not [a for a in actions if "Put" in a or "Delete" in a or "Multipart" in a]


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [("a*b", "a${*}b"), ("a?b", "a${?}b"), ("a$b", "a${$}b"), ("plain/x", "plain/x")],
)
def test_iam_glob_characters_are_escaped(raw, escaped):
    assert escape_iam_glob(raw) == escaped


def test_policy_escapes_glob_characters_in_the_key():
    policy = session_policy("s3://bkt/a/t*$", Permission.READ)
    assert policy["Statement"][0]["Resource"] == "arn:aws:s3:::bkt/a/t${*}${$}/*"
    assert policy["Statement"][1]["Condition"]["StringLike"]["s3:prefix"] == "a/t${*}${$}/*"


def test_policy_json_is_compact_and_parseable():
    text = session_policy_json("s3://bkt/x", Permission.READ)
    assert " " not in text
    assert json.loads(text)["Version"] == "2012-10-17"


def test_split_location_strips_slashes():
    assert split_s3_location("s3://bkt/a/b/") == ("bkt", "a/b")


@pytest.mark.parametrize("location", ["file:///tmp/x", "abfss://c@a/x", "s3:///nobucket"])
def test_non_s3_locations_are_refused(location):
    with pytest.raises(ApiError):
        split_s3_location(location)
