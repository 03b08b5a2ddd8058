"""The one set of name rules (gateway/names.py), enforced by TableRef on construction.

Accept what Lakekeeper accepts, refuse the rest, with the same limits on every surface.
"""

import pytest

from gateway.errors import InvalidRequestError
from gateway.models import TableRef
from gateway.names import (
    MAX_NAME_LEN,
    MAX_NAMESPACE_DEPTH,
    check_name,
    check_namespace,
    check_warehouse,
    fold,
    fold_level,
    fold_namespace,
    fold_table,
    is_uuid,
)


@pytest.mark.parametrize("name", ["a/b", "dir/sub dir/t", "with space", "x%2Fy", "ünïcode"])
def test_generic_table_names_with_slash_or_space_are_accepted(name: str) -> None:
    assert check_name(name, "table") == name
    assert TableRef("demo", ("ns", "sub ns"), name).name == name


@pytest.mark.parametrize("name", ["", "a\x00b", "x" * 1025, "x" * (MAX_NAME_LEN + 1), ".", "..",
                                  "tab\there", "del\x7f", 7, None])
def test_empty_control_dot_overlong_or_non_string_table_names_are_rejected(name: object) -> None:
    with pytest.raises(InvalidRequestError):
        check_name(name, "table")
    with pytest.raises(InvalidRequestError):
        TableRef("demo", ("ns",), name)  # type: ignore[arg-type]


def test_the_longest_allowed_name_is_accepted() -> None:
    longest = "x" * MAX_NAME_LEN
    assert TableRef(longest, (longest,), longest).name == longest


@pytest.mark.parametrize("warehouse", ["", "a/b", "a\x00b", "..", "w" * (MAX_NAME_LEN + 1)])
def test_warehouse_names_with_slash_are_rejected(warehouse: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_warehouse(warehouse)
    with pytest.raises(InvalidRequestError):
        TableRef(warehouse, ("ns",), "t")


@pytest.mark.parametrize(
    "namespace",
    [(), ("",), ("a\x1fb",), ("a.b",), (".",), ("ok", ".."),
     tuple(f"l{i}" for i in range(MAX_NAMESPACE_DEPTH + 1)), ("x" * (MAX_NAME_LEN + 1),)],
)
def test_namespaces_follow_lakekeepers_rules(namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidRequestError):
        check_namespace(namespace)
    with pytest.raises(InvalidRequestError):
        TableRef("demo", namespace, "t")


def test_a_namespace_list_becomes_a_tuple_and_the_deepest_allowed_is_accepted() -> None:
    deepest = [f"level {i}" for i in range(MAX_NAMESPACE_DEPTH)]
    ref = TableRef("demo", deepest, "t")  # type: ignore[arg-type]
    assert ref.namespace == tuple(deepest)
    assert hash(ref) == hash(TableRef("demo", tuple(deepest), "t"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0198f2a4-6c1e-7d32-9a51-3f0b2c7e9d10", True), ("0198F2A4-6C1E-7D32-9A51-3F0B2C7E9D10", True),
     ("0198f2a46c1e7d329a513f0b2c7e9d10", False), ("demo", False), ("", False)],
)
def test_only_canonical_uuids_are_warehouse_ids(value: str, expected: bool) -> None:
    assert is_uuid(value) is expected


# ---- comparison form (issue #28, finding 1) ----------------------------------------------------

# Twins under Lakekeeper's case-insensitive matching that `str.lower()` tells apart.
TWINS = [
    ("straße_secret", "strasse_secret"),
    ("STRASSE_SECRET", "straße_secret"),
    ("\ufb01le", "file"),  # ﬁ ligature
    ("\ufb06ack", "stack"),  # ﬆ ligature
    ("\u03c3\u03bf\u03c6\u03bf\u03c2", "\u03a3\u039f\u03a6\u039f\u03a3"),  # final sigma
    ("\u00b5s", "\u03bcs"),  # micro sign / mu
    ("\uff34\uff41\uff42\uff4c\uff45", "table"),  # full-width letters
]


@pytest.mark.parametrize(("a", "b"), TWINS)
def test_twins_under_the_catalogs_matching_have_one_comparison_form(a: str, b: str) -> None:
    assert fold(a) == fold(b)
    assert fold_namespace((a,)) == fold_namespace((b,))
    assert fold_table(a, plus_is_space=False) == fold_table(b, plus_is_space=False)


def test_accents_stay_distinct() -> None:
    assert fold("café") != fold("cafe")
    assert fold("cafe\u0301") == fold("café")  # canonically equivalent spellings are one name


def test_plus_is_a_space_in_namespace_levels_and_iceberg_table_names_only() -> None:
    assert fold_level("a+b") == fold_level("a b") == "a b"
    assert fold_table("T+1", plus_is_space=True) == "t 1"
    assert fold_table("T+1", plus_is_space=False) == "t+1"


@pytest.mark.parametrize("name", [
    "a\x85b",  # C1 (NEL)
    "a\x9bb",  # C1 (CSI)
    "evil\u202etxt",  # right-to-left override
    "a\u2066b",  # left-to-right isolate
    "line\u2028break",
    "para\u2029break",
    "zero\u200bwidth",
    "soft\u00adhyphen",
    "variation\ufe0f",
    "\ufeffbom",
])
def test_c1_bidi_separator_and_invisible_characters_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequestError, match="control characters"):
        check_name(name, "table")
    with pytest.raises(InvalidRequestError):
        TableRef("demo", (name,), "t")
    with pytest.raises(InvalidRequestError):
        TableRef(name, ("ns",), "t")


@pytest.mark.parametrize("name", ["\uff0e\uff0e", "\uff0e", "\u2025"])
def test_names_that_fold_to_dot_segments_are_refused(name: str) -> None:
    with pytest.raises(InvalidRequestError, match=r"'\.' or '\.\.'"):
        check_name(name, "table")


def test_a_level_with_a_dot_or_a_warehouse_with_a_slash_after_folding_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match=r"'\.'"):
        check_namespace(["a\uff0eb"])
    with pytest.raises(InvalidRequestError, match="'/'"):
        check_warehouse("a\uff0fb")


@pytest.mark.parametrize("name", ["orders#_public", "#", "a?b", "?", "x\uff03y", "q\uff1f"])
def test_url_delimiters_are_refused_in_every_name_also_after_folding(name: str) -> None:
    """A URL reads `#` as a fragment and `?` as a query: a name holding one would be decided on
    as itself and could reach the catalog as another object (issue #35)."""
    with pytest.raises(InvalidRequestError, match="'#' or '\\?'"):
        check_name(name, "table")
    with pytest.raises(InvalidRequestError):
        TableRef("demo", (name,), "t")
    with pytest.raises(InvalidRequestError):
        TableRef(name, ("ns",), "t")
    with pytest.raises(InvalidRequestError):
        TableRef("demo", ("ns",), name)
