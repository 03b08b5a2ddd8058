"""Caller policy: fnmatch patterns, warehouse names (a UUID only through its name), read/write,
file validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.models import AccessMode, CallerIdentity
from gateway.surfaces.policy import CallerPolicy, PolicyFileError, parse_rules

ALICE = CallerIdentity("alice", True)
BOB = CallerIdentity("bob", True)
DOC = {"callers": {
    "alice": [{"warehouse": "demo", "namespace": "team_a*", "table": "*", "access": ["read"]},
              {"warehouse": "0000-ID", "namespace": "shared", "table": "t?", "access": "write"}],
    "admin": [{"warehouse": "*", "namespace": "*", "table": "*", "access": ["read", "write"]}],
}}


@pytest.fixture
def policy() -> CallerPolicy:
    return CallerPolicy(parse_rules(DOC, "test"))


@pytest.mark.parametrize(
    ("warehouses", "namespace", "table", "access", "allowed"),
    [
        (("demo",), ("team_a",), "x", AccessMode.READ, True),
        (("DEMO",), ("Team_A1", "sub"), "X", AccessMode.READ, True),
        (("demo",), ("team_a",), "x", AccessMode.WRITE, False),
        (("demo",), ("team_b",), "x", AccessMode.READ, False),
        (("other",), ("team_a",), "x", AccessMode.READ, False),
        (("given", "0000-id"), ("shared",), "t1", AccessMode.WRITE, True),
        (("given", "0000-id"), ("shared",), "t10", AccessMode.WRITE, False),
        (("demo",), ("team_a",), None, AccessMode.READ, True),
    ],
)
def test_rules(policy: CallerPolicy, warehouses, namespace, table, access, allowed) -> None:
    assert policy.allows(ALICE, warehouses, namespace, table, access) is allowed


def test_unknown_caller_gets_nothing(policy: CallerPolicy) -> None:
    assert not policy.allows(BOB, ("demo",), ("team_a",), "x", AccessMode.READ)


def test_no_policy_allows_everything() -> None:
    assert CallerPolicy(None).allows(BOB, ("w",), ("n",), "t", AccessMode.WRITE)
    assert CallerPolicy(None).allows_everything(BOB, AccessMode.WRITE)


def test_global_grant_is_needed_to_invalidate_everything(policy: CallerPolicy) -> None:
    assert policy.allows_everything(CallerIdentity("admin", True), AccessMode.WRITE)
    assert not policy.allows_everything(ALICE, AccessMode.WRITE)


def test_resolution_is_skipped_when_the_given_name_decides(policy: CallerPolicy) -> None:
    assert policy.needs_warehouse_names(ALICE, "demo")  # the id rule cannot match "demo"
    assert not CallerPolicy(None).needs_warehouse_names(ALICE, "demo")
    assert not policy.needs_warehouse_names(CallerIdentity("admin", True), "anything")


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"callers": []},
        {"callers": {"a": {"warehouse": "x"}}},
        {"callers": {"a": [{"access": ["admin"]}]}},
        {"callers": {"a": [{"warehouse": "x", "tables": "typo"}]}},
    ],
)
def test_malformed_documents_are_rejected(doc) -> None:
    with pytest.raises(PolicyFileError):
        parse_rules(doc, "test")


def test_from_file_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("callers:\n  alice:\n    - {warehouse: demo, namespace: a, table: '*'}\n")
    policy = CallerPolicy.from_file(path)
    assert policy.allows(ALICE, ("demo",), ("a",), "t", AccessMode.READ)
    with pytest.raises(PolicyFileError):
        CallerPolicy.from_file(tmp_path / "missing.yaml")


def test_read_limited_callers_are_those_with_a_read_only_grant_and_no_global_write() -> None:
    doc = {"callers": {
        "alice": [{"namespace": "a", "access": ["read"]}, {"namespace": "b", "access": "write"}],
        "writer": [{"namespace": "a", "access": ["read", "write"]}],
        "admin": [{"access": ["read"]}, {"access": ["read", "write"]}],
        "system:serviceaccount:team-a:*": [{"namespace": "team_a"}],  # read by default
    }}
    policy = CallerPolicy(parse_rules(doc, "test"))
    assert policy.read_limited_callers() == ["alice", "system:serviceaccount:team-a:*"]
    assert CallerPolicy(None).read_limited_callers() == []
    # A global write grant for every caller ("*") lifts every limit.
    doc["callers"]["*"] = [{"access": ["read", "write"]}]
    assert CallerPolicy(parse_rules(doc, "test")).read_limited_callers() == []


# ---- one comparison form (issue #28, finding 1) ------------------------------------------------

TWIN_DOC = {"callers": {
    "alice": [{"warehouse": "shared", "namespace": "public", "table": "strasse_*"}],
    "bob": [{"warehouse": "shared", "namespace": "ops", "table": "*", "access": "read"}],
}}
SECRET_SPELLINGS = ["straße_secret", "STRASSE_SECRET", "strasse_secret", "Straße_Secret",
                    "STRA\u1e9eE_SECRET"]  # ẞ capital sharp s


@pytest.mark.parametrize("pattern", ["strasse_*", "straße_*", "STRASSE_*", "public_*"])
def test_every_spelling_of_a_table_gets_one_decision(pattern: str) -> None:
    """The issue's leak: `strasse_*` refused `straße_secret` but granted `strasse_secret`,
    which the catalog (and the cache) treat as one table: a refused table is refused under
    every spelling, a granted one granted under every spelling."""
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": "shared", "namespace": "public", "table": pattern}]}}, "test"))
    decisions = {policy.allows(ALICE, ("shared",), ("public",), spelling, AccessMode.READ)
                 for spelling in SECRET_SPELLINGS}
    assert decisions == {not pattern.startswith("public")}


@pytest.mark.parametrize(("table", "allowed"), [
    ("strasse_1", True), ("straße_1", True), ("STRASSE_1", True), ("STRAẞE_1", True),
    ("stra\ufb06e", False),  # "straﬆe" folds to "strastse": not strasse_*
    ("\ufb01le", False),
])
def test_the_policy_decides_on_the_folded_name_as_the_catalog_matches_it(table: str,
                                                                          allowed: bool) -> None:
    policy = CallerPolicy(parse_rules(TWIN_DOC, "test"))
    assert policy.allows(ALICE, ("SHARED",), ("Public",), table, AccessMode.READ) is allowed


@pytest.mark.parametrize(("pattern", "name"), [
    ("straße_*", "STRASSE_x"), ("\ufb01les", "FILES"), ("\u00b5s", "\u039cS"),
    ("\u03c3\u03bf\u03c6\u03bf\u03c2", "\u03a3\u039f\u03a6\u039f\u03a3"),
    ("\ufb06ack", "stack"),
])
def test_patterns_are_folded_like_names(pattern: str, name: str) -> None:
    doc = {"callers": {"alice": [{"warehouse": pattern, "namespace": pattern, "table": pattern}]}}
    policy = CallerPolicy(parse_rules(doc, "test"))
    assert policy.allows(ALICE, (name,), (name,), name, AccessMode.READ)


def test_a_plus_in_a_namespace_is_the_space_the_catalog_reads() -> None:
    doc = {"callers": {"alice": [{"namespace": "team a", "table": "*"}],
                       "bob": [{"namespace": "team+a*", "table": "*"}]}}
    policy = CallerPolicy(parse_rules(doc, "test"))
    assert policy.allows(ALICE, ("w",), ("team+a",), "t", AccessMode.READ)
    assert policy.allows(BOB, ("w",), ("team a",), "t", AccessMode.READ)
    # a caller limited to "team+a*" meant the namespace the catalog calls "team a..."
    assert not policy.allows(BOB, ("w",), ("team_b",), "t", AccessMode.READ)


def test_the_warehouse_given_decides_on_its_folded_form() -> None:
    doc = {"callers": {"alice": [{"warehouse": "straße", "namespace": "*", "table": "*"}]}}
    policy = CallerPolicy(parse_rules(doc, "test"))
    assert not policy.needs_warehouse_names(ALICE, "STRASSE")


# ---- projects (issue #28, finding 2) -----------------------------------------------------------

def test_a_rule_without_project_holds_in_the_default_project_only() -> None:
    policy = CallerPolicy(parse_rules({"callers": {"alice": [{"namespace": "team_a*"}]}}, "t"),
                          "p1")
    args = (ALICE, ("demo",), ("team_a",), "t", AccessMode.READ)
    assert policy.allows(*args)  # no project named: the default
    assert policy.allows(*args, project="p1")
    assert not policy.allows(*args, project="p2")
    assert policy.allows_project(ALICE, None)
    assert not policy.allows_project(ALICE, "p2")


def test_a_rule_names_its_project_with_a_pattern() -> None:
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"project": "team-*", "namespace": "*"}]}}, "t"), "p1")
    args = (ALICE, ("demo",), ("ns",), "t", AccessMode.READ)
    assert policy.allows(*args, project="team-x")
    assert not policy.allows(*args, project="TEAM-x")  # project ids match exactly
    assert not policy.allows(*args)  # not in the default project p1
    assert not policy.allows_project(ALICE, "other")


@pytest.mark.parametrize("project", ["", 7, ["p"]])
def test_a_malformed_project_is_refused(project: object) -> None:
    with pytest.raises(PolicyFileError, match="project"):
        parse_rules({"callers": {"a": [{"project": project}]}}, "t")


PROD_A_ID = "d1f0c2a4-6c1e-7d32-9a51-3f0b2c7e9d10"  # warehouse prod_a: its UUID starts with d


def test_warehouse_patterns_match_names_never_uuids() -> None:
    """Issue #35 finding 5: a rule on `d*` must not admit `prod_a` through its UUID."""
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": "d*", "namespace": "*", "table": "*"}]}}, "t"))
    assert not policy.allows(ALICE, (PROD_A_ID,), ("ns",), "t", AccessMode.READ)
    assert not policy.allows(ALICE, (PROD_A_ID, PROD_A_ID, "prod_a"), ("ns",), "t",
                             AccessMode.READ)
    assert policy.allows(ALICE, (PROD_A_ID, PROD_A_ID, "dev_a"), ("ns",), "t", AccessMode.READ)
    assert policy.needs_warehouse_names(ALICE, PROD_A_ID)  # only its name can decide


def test_a_uuid_whose_name_is_unknown_matches_only_the_any_warehouse_rule() -> None:
    policy = CallerPolicy(parse_rules({"callers": {"alice": [
        {"warehouse": "*", "namespace": "team_a", "table": "*"}]}}, "t"))
    assert policy.allows(ALICE, (PROD_A_ID,), ("team_a",), "t", AccessMode.READ)
    assert not policy.needs_warehouse_names(ALICE, PROD_A_ID)
