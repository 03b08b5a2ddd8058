import pytest

from devstack.emulator.errors import ApiError
from devstack.emulator.names import (
    decode_namespace_segment,
    fold,
    namespace_key,
    validate_format,
    validate_namespace,
    validate_table_name,
)


def test_namespace_segment_splits_on_unit_separator_only():
    assert decode_namespace_segment("a\x1fb.c") == ["a", "b.c"]


def test_plus_in_namespace_segment_becomes_space():
    assert decode_namespace_segment("my+ns\x1fx") == ["my ns", "x"]


@pytest.mark.parametrize(
    ("parts", "error_type"),
    [
        ([], "NamespaceEmpty"),
        (["a", ""], "NamespacePartEmpty"),
        (["a.b"], "NamespacePartContainsDot"),
        (["a", "b", "c", "d", "e", "f"], "NamespaceDepthExceeded"),
    ],
)
def test_invalid_namespaces_are_400(parts, error_type):
    with pytest.raises(ApiError) as info:
        validate_namespace(parts)
    assert (info.value.status, info.value.error_type) == (400, error_type)


@pytest.mark.parametrize(
    ("parts", "error_type"),
    [(["System"], "ReservedNamespace"), (["a+b"], "InvalidNamespace")],
)
def test_creation_refuses_reserved_and_plus(parts, error_type):
    validate_namespace(parts)  # fine for lookups
    with pytest.raises(ApiError) as info:
        validate_namespace(parts, creating=True)
    assert info.value.error_type == error_type


def test_five_levels_are_allowed():
    validate_namespace(["a", "b", "c", "d", "e"], creating=True)


@pytest.mark.parametrize("name", ["", "a+b"])
def test_bad_table_names_are_invalid_name(name):
    with pytest.raises(ApiError) as info:
        validate_table_name(name)
    assert (info.value.status, info.value.error_type) == (400, "InvalidName")


@pytest.mark.parametrize("fmt", ["Lance", "1abc", "a b", "x" * 65, "lance!"])
def test_bad_formats_are_invalid_format(fmt):
    with pytest.raises(ApiError) as info:
        validate_format(fmt)
    assert info.value.error_type == "InvalidFormat"


def test_format_is_trimmed():
    assert validate_format("  lance ") == "lance"


def test_names_fold_case_insensitively():
    assert fold("Users") == fold("USERS")
    assert namespace_key(["A", "b"]) == namespace_key(["a", "B"])
    assert namespace_key(["a", "b"]) != namespace_key(["ab"])


def test_compatibility_forms_are_one_name_as_in_lakekeeper() -> None:
    """ICU level 2 equates case and compatibility forms (what the gateway sends: names.fold)."""
    assert fold("\uff54\uff41\uff42\uff4c\uff45") == fold("TABLE") == fold("table")
    assert fold("Straße") == fold("STRASSE")
    assert fold("\ufb01le") == fold("file")
    assert fold("café") != fold("cafe")
