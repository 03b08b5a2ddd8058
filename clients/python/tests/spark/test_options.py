"""Options of the ``lakekeeper`` data source (pure parsing, no Spark session)."""

from __future__ import annotations

import pickle

import pytest

from lakegate_client.spark.options import OptionsError, SourceOptions
from lakegate_client.tables import TableFormatError


def test_a_dotted_table_name_splits_into_namespace_and_table() -> None:
    opts = SourceOptions.parse({"TABLE": "a.b.orders", "Warehouse": "demo", "create": "TRUE"})
    assert (opts.namespace, opts.table, opts.warehouse, opts.create) == (
        ("a", "b"), "orders", "demo", True
    )
    assert opts.url is None  # each task then uses its own node's LAKEGATE_URL
    assert pickle.loads(pickle.dumps(opts)) == opts  # noqa: S301 - our own bytes


def test_namespace_and_table_may_be_given_separately() -> None:
    opts = SourceOptions.parse({"namespace": "a.b", "table": "orders", "format": "Delta"})
    assert (opts.namespace, opts.table, opts.format) == (("a", "b"), "orders", "delta")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"table": "orders"},
        {"table": "a..b"},
        {"namespace": "a", "table": "b.c"},
        {"table": "a.b", "create": "maybe"},
        {"table": "a.b", "s3.secret-access-key": "x"},
        {"table": "a.b", "token": "x"},
    ],
)
def test_bad_or_secret_options_are_refused(options: dict[str, str]) -> None:
    with pytest.raises(OptionsError):
        SourceOptions.parse(options)


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(TableFormatError, match="unsupported table format"):
        SourceOptions.parse({"table": "a.b", "format": "orc"})


def test_iceberg_format_and_catalog_url_are_accepted() -> None:
    opts = SourceOptions.parse({"table": "ns.t", "format": "Iceberg",
                                "catalog_url": "http://127.0.0.1:1"})
    assert opts.iceberg
    assert opts.catalog_url == "http://127.0.0.1:1"
    assert not SourceOptions.parse({"table": "ns.t", "format": "parquet"}).iceberg


def test_iceberg_needs_an_http_gateway_address_on_the_driver(monkeypatch) -> None:
    from lakegate_client.spark.iceberg import catalog_uri

    monkeypatch.delenv("LAKEGATE_CATALOG_URL", raising=False)
    monkeypatch.setenv("LAKEGATE_URL", "grpc+unix:/run/g.sock")
    opts = SourceOptions.parse({"table": "ns.t", "format": "iceberg"})
    with pytest.raises(OptionsError, match="catalog_url"):
        catalog_uri(opts)
    monkeypatch.setenv("LAKEGATE_CATALOG_URL", "http://gw:8765/")
    assert catalog_uri(opts) == "http://gw:8765/catalog"
    explicit = SourceOptions.parse({"table": "ns.t", "format": "iceberg",
                                    "catalog_url": "http://x:1/catalog"})
    assert catalog_uri(explicit) == "http://x:1/catalog"


def test_a_local_storage_endpoint_is_an_option() -> None:
    opts = SourceOptions.parse(
        {"table": "ns.t", "storage_endpoint": "http://127.0.0.1:10000/devstoreaccount1"}
    )
    assert opts.storage_endpoint == "http://127.0.0.1:10000/devstoreaccount1"
    assert SourceOptions.parse({"table": "ns.t"}).storage_endpoint is None
