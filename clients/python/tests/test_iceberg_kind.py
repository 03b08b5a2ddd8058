"""An Iceberg table's credentials are asked with kind=iceberg on both wire protocols."""

from __future__ import annotations

import pytest

from lakegate_client._errors import ConfigurationError
from lakegate_client._memo import memo_key
from lakegate_client._models import TableRef, check_kind
from lakegate_client._ops import GetCredentials

ICEBERG = TableRef("demo", ("a", "b"), "t", kind="iceberg")
GENERIC = TableRef("demo", ("a", "b"), "t")


def test_http_request_names_the_kind_only_for_iceberg() -> None:
    assert GetCredentials(ICEBERG, "read").http().params == {"access": "read", "kind": "iceberg"}
    assert GetCredentials(GENERIC, "write").http().params == {"access": "write"}
    same_path = GetCredentials(GENERIC, "read").http().path
    assert GetCredentials(ICEBERG, "read").http().path == same_path


def test_grpc_request_names_the_kind_only_for_iceberg() -> None:
    assert GetCredentials(ICEBERG, "read").grpc().kind == "iceberg"
    assert GetCredentials(GENERIC, "read").grpc().kind == ""


def test_memo_keeps_the_kinds_apart() -> None:
    assert memo_key("u", ICEBERG, "read") != memo_key("u", GENERIC, "read")


def test_unknown_kind_is_a_configuration_error() -> None:
    assert check_kind("iceberg") == "iceberg"
    with pytest.raises(ConfigurationError, match="kind"):
        check_kind("delta")
