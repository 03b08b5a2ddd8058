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
