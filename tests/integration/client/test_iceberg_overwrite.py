"""The Spark data source's Iceberg commit (lakegate_client/spark/iceberg.py) on the real stack:
an overwrite of an empty table issues no delete, so pyiceberg prints no "Delete operation did not
match any records" warning (pytest's filterwarnings=error turns that warning into a failure), and
an overwrite of a table with rows still replaces them."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

from lakegate_client.spark.iceberg import iceberg_writer, load_table
from lakegate_client.spark.options import SourceOptions

pytestmark = pytest.mark.integration


def _overwrite(opts: SourceOptions, table: pa.Table) -> None:
    writer = iceberg_writer(opts, table.schema, overwrite=True)
    message = writer.write(iter(table.to_batches()))
    writer.commit([message])


def test_overwrite_of_an_empty_table_issues_no_delete_and_later_overwrites_replace(
    devstack: Any,
) -> None:
    info = devstack.info
    opts = SourceOptions(
        namespace=(info.namespace,), table=f"ow_{uuid.uuid4().hex[:8]}",
        warehouse=info.warehouse.name, url=info.gateway_url, format="iceberg", create=True,
    )
    first = pa.table({"id": pa.array(range(10), pa.int64())})
    _overwrite(opts, first)  # a new, empty table: the warning would fail this test
    table = load_table(opts)
    assert table.scan().to_arrow().num_rows == 10
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary.get("deleted-data-files") is None  # nothing was deleted

    _overwrite(opts, pa.table({"id": pa.array(range(100, 103), pa.int64())}))
    assert sorted(load_table(opts).scan().to_arrow()["id"].to_pylist()) == [100, 101, 102]
    _overwrite(opts, pa.table({"id": pa.array([], pa.int64())}))  # overwrite with no rows
    assert load_table(opts).scan().to_arrow().num_rows == 0
    _overwrite(opts, first)  # overwrite of a table whose snapshot holds no rows: no warning
    assert load_table(opts).scan().to_arrow().num_rows == 10
    load_table(opts)  # still loadable


def test_a_commit_whose_answer_is_lost_is_resolved_from_the_catalog(
    devstack: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32, finding 5 on the real stack: the catalog applies the commit, the answer becomes
    pyiceberg's CommitStateUnknownException (a 504): the writer finds its write id in the
    snapshot summary the catalog kept, reports success and keeps the files it committed."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import CommitStateUnknownException

    from lakegate_client.spark.iceberg import WRITE_ID_PROPERTY

    info = devstack.info
    opts = SourceOptions(
        namespace=(info.namespace,), table=f"lost_{uuid.uuid4().hex[:8]}",
        warehouse=info.warehouse.name, url=info.gateway_url, format="iceberg", create=True,
    )
    _overwrite(opts, pa.table({"id": pa.array([1, 2], pa.int64())}))
    real, lost = RestCatalog.commit_table, []

    def commit_then_lose(self: Any, *args: Any, **kwargs: Any) -> Any:
        real(self, *args, **kwargs)
        lost.append(True)
        raise CommitStateUnknownException("504 Gateway Timeout")

    monkeypatch.setattr(RestCatalog, "commit_table", commit_then_lose)
    writer = iceberg_writer(opts, pa.schema([("id", pa.int64())]), overwrite=False)
    message = writer.write(iter(pa.table({"id": pa.array([3], pa.int64())}).to_batches()))
    writer.commit([message])
    monkeypatch.undo()
    assert lost == [True]  # one commit call, its answer lost, not redone
    table = load_table(opts)
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]  # its file is there
    assert table.current_snapshot().summary.get(WRITE_ID_PROPERTY) == writer._write_id
