import json

import pytest

from devstack.emulator.errors import ApiError
from devstack.emulator.policy import (
    Permission,
    session_policy,
    session_policy_json,
    split_s3_location,
)


def _actions(policy):
    return policy["Statement"][0]["Action"]


def test_read_policy_allows_only_get_actions_on_the_table_prefix():
    policy = session_policy("s3://bkt/a/t1", Permission.READ)
    assert _actions(policy) == ["s3:GetObject", "s3:GetObjectVersion"]
    assert policy["Statement"][0]["Resource"] == ["arn:aws:s3:::bkt/a/t1/*"]


def test_write_policy_adds_put_delete_and_multipart():
    actions = _actions(session_policy("s3://bkt/a/t1/", Permission.READ_WRITE_DELETE))
    for action in ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
        assert action in actions


def test_listing_is_conditioned_on_the_table_prefix():
    stmt = session_policy("s3://bkt/a/t1", Permission.READ)["Statement"][1]
    assert stmt["Action"] == ["s3:ListBucket"]
    assert stmt["Resource"] == ["arn:aws:s3:::bkt"]
    assert "a/t1/*" in stmt["Condition"]["StringLike"]["s3:prefix"]


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
