"""Parquet tables written through Lakegate are plain files any engine lists correctly (issue 11).

Real stack: the table is written with ``lakegate_client.tables.write_table`` (credentials vended
through the gateway) and read back by a *plain* ``pyarrow.dataset.dataset(location)`` with the
storage owner's keys, as another engine with its own access would; and by the documented recipes
with the vended read credential, whose session policy allows ``<key>/*`` only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from lakegate_client import Client
from lakegate_client.tables import arrow_dataset, read_table, write_table
from lakegate_client.tables.directory import fs_path
from tests.integration.client.plain_storage import owner_filesystem, plain_listing_ids

pytestmark = pytest.mark.integration


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({"id": ids, "name": [f"row-{i}" for i in ids]})


class PlainTable:
    """A fresh parquet table plus the two ways to see its storage."""

    def __init__(self, devstack: Any) -> None:
        info = devstack.info
        self.ns = info.namespace
        self.name = f"plain_{uuid.uuid4().hex[:8]}"
        self.client = Client(info.gateway_url, warehouse=info.warehouse.name)
        self.owner_fs = owner_filesystem(info)  # the storage owner's keys: no session policy

    @property
    def root(self) -> str:
        creds = self.client.credentials(self.ns, self.name, access="read")
        return fs_path(creds.location)

    def plain_ids(self) -> list[int]:
        """What a default pyarrow.dataset listing of the location reads."""
        location = self.client.credentials(self.ns, self.name, access="read").location
        return plain_listing_ids(self.owner_fs, location)

    def objects(self) -> list[str]:
        """Every object under the location (relative keys)."""
        root = self.root
        listing = self.owner_fs.get_file_info(pafs.FileSelector(root, recursive=True))
        return sorted(i.path[len(root) + 1 :] for i in listing if i.is_file)

    def close(self) -> None:
        self.client.drop(self.ns, self.name, purge=True)
        self.client.close()


@pytest.fixture
def table(devstack: Any) -> Iterator[PlainTable]:
    t = PlainTable(devstack)
    yield t
    t.close()


def test_append_and_overwrite_leave_exactly_the_tables_rows_for_a_plain_listing(
    table: PlainTable,
) -> None:
    first = [_rows(0, 30), _rows(30, 20)]  # two files in one write
    write_table(table.client, table.ns, table.name, first, format="parquet", create=True)
    write_table(table.client, table.ns, table.name, _rows(50, 10), mode="append")

    assert table.plain_ids() == list(range(60))
    before = table.objects()
    assert len(before) == 3
    assert all(not part.startswith(("_", ".")) for key in before for part in key.split("/"))

    write_table(table.client, table.ns, table.name, _rows(100, 5), mode="overwrite")

    assert table.plain_ids() == list(range(100, 105))
    after = table.objects()
    assert len(after) == 1
    assert not set(before) & set(after)  # every old file is gone
    got = read_table(table.client, table.ns, table.name).column("id").to_pylist()
    assert sorted(got) == list(range(100, 105))


def test_vended_read_credential_cannot_head_the_bare_prefix_yet_recipes_work(
    table: PlainTable,
) -> None:
    write_table(table.client, table.ns, table.name, _rows(0, 7), format="parquet", create=True)
    creds = table.client.credentials(table.ns, table.name, access="read")
    fs, root = creds.pyarrow_filesystem(), fs_path(creds.location)

    # The session policy covers <key>/* only: HEAD of the bare location is refused.
    with pytest.raises(OSError, match="ACCESS_DENIED"):
        fs.get_file_info(root)

    # Lakegate's own reader, and the two documented pyarrow recipes, list <key>/ instead.
    assert sorted(arrow_dataset(creds, "parquet").to_table().column("id").to_pylist()) == list(
        range(7)
    )
    factory = pads.FileSystemDatasetFactory(
        fs,
        pafs.FileSelector(root, recursive=True),
        pads.ParquetFileFormat(),
        pads.FileSystemFactoryOptions(selector_ignore_prefixes=[".", "_"]),
    )
    assert factory.finish().to_table().num_rows == 7
    selector = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    files = [i.path for i in selector if i.is_file and i.path.endswith(".parquet")]
    assert pads.dataset(files, filesystem=fs, format="parquet").to_table().num_rows == 7


def test_a_table_in_the_old_layout_reads_the_same_and_becomes_plain_on_the_next_write(
    table: PlainTable,
) -> None:
    table.client.create(table.ns, table.name, format="parquet")
    fs, root = table.owner_fs, table.root
    pq.write_table(_rows(0, 4), f"{root}/_data/w1/part-00000-aaaaaaaaaaaa.parquet", filesystem=fs)
    pq.write_table(_rows(90, 3), f"{root}/stale.parquet", filesystem=fs)  # not in the log
    entry = {"version": 1, "files": ["_data/w1/part-00000-aaaaaaaaaaaa.parquet"]}
    with fs.open_output_stream(f"{root}/_lakegate_log/{1:020d}.json") as out:
        out.write(json.dumps(entry).encode())

    got = read_table(table.client, table.ns, table.name).column("id").to_pylist()
    assert sorted(got) == list(range(4))  # the log still defines the table

    write_table(table.client, table.ns, table.name, _rows(4, 2), mode="append")

    assert table.plain_ids() == list(range(6))
    assert all(not key.startswith("_") for key in table.objects())
