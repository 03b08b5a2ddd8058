"""Name checks in gateway/service/validation.py: accept what Lakekeeper accepts, refuse the rest."""

import pytest

from gateway.errors import InvalidRequestError
from gateway.models import TableRef
from gateway.service.validation import check_name, check_warehouse, validate_ref


@pytest.mark.parametrize("name", ["a/b", "dir/sub dir/t", "with space", "x%2Fy", "ünïcode"])
def test_generic_table_names_with_slash_or_space_are_accepted(name: str) -> None:
    check_name("table", name)
    validate_ref(TableRef("demo", ("ns", "sub ns"), name))


@pytest.mark.parametrize("name", ["", "a\x00b", "x" * 1025])
def test_empty_nul_or_overlong_table_names_are_rejected(name: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_name("table", name)
    with pytest.raises(InvalidRequestError):
        validate_ref(TableRef("demo", ("ns",), name))


@pytest.mark.parametrize("warehouse", ["", "a/b", "a\x00b"])
def test_warehouse_names_with_slash_are_rejected(warehouse: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_warehouse(warehouse)
    with pytest.raises(InvalidRequestError):
        validate_ref(TableRef(warehouse, ("ns",), "t"))
