"""The directory-table layout of ``lakegate_client.tables`` (local filesystem, no servers)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lakegate_client.tables.catalog import split_table_name
from lakegate_client.tables.directory import (
    commit_files,
    current_snapshot,
    fs_path,
    is_visible,
    new_data_file,
)
from lakegate_client.tables.files import read_file, write_file, write_parquet_batches

DATA = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})


@pytest.fixture
def root(tmp_path: Path) -> str:
    return str(tmp_path / "table")


@pytest.fixture
def fs() -> pafs.FileSystem:
    return pafs.LocalFileSystem()


def _land(fs: pafs.FileSystem, root: str, relative: str) -> None:
    fs.create_dir(f"{root}/{relative}".rsplit("/", 1)[0], recursive=True)
    write_file(fs, f"{root}/{relative}", DATA, "parquet")


def test_a_table_without_log_is_every_visible_file_of_its_format(
    fs: pafs.FileSystem, root: str
) -> None:
    for rel in ("a.parquet", "day=1/b.parquet", "_tmp/c.parquet", ".hidden.parquet", "d.csv"):
        _land(fs, root, rel)
    assert current_snapshot(fs, root, "parquet").files == ("a.parquet", "day=1/b.parquet")
    assert current_snapshot(fs, root, "parquet").version == 0


def test_uncommitted_files_are_invisible_and_a_commit_publishes_them(
    fs: pafs.FileSystem, root: str
) -> None:
    _land(fs, root, "landed.parquet")
    staged = new_data_file("w1", 0, "parquet")
    _land(fs, root, staged)
    assert current_snapshot(fs, root, "parquet").files == ("landed.parquet",)

    snapshot = commit_files(fs, root, "parquet", [staged], overwrite=False, write_id="w1")

    assert snapshot.version == 1
    assert current_snapshot(fs, root, "parquet") == snapshot
    assert snapshot.files == ("landed.parquet", staged)


def test_overwrite_keeps_only_the_new_files_and_later_versions_win(
    fs: pafs.FileSystem, root: str
) -> None:
    first, second = new_data_file("w1", 0, "parquet"), new_data_file("w2", 0, "parquet")
    _land(fs, root, first)
    commit_files(fs, root, "parquet", [first], overwrite=False, write_id="w1")
    _land(fs, root, second)
    commit_files(fs, root, "parquet", [second], overwrite=True, write_id="w2")
    assert current_snapshot(fs, root, "parquet").files == (second,)
    assert current_snapshot(fs, root, "parquet").version == 2


@pytest.mark.parametrize("fmt", ["parquet", "csv", "json"])
def test_each_directory_format_round_trips_one_file(
    fs: pafs.FileSystem, root: str, fmt: str
) -> None:
    path = f"{root}/{new_data_file('w', 3, fmt)}"
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    assert write_file(fs, path, DATA, fmt) > 0
    assert read_file(fs, path, fmt).to_pylist() == DATA.to_pylist()


def test_streamed_batches_land_in_one_parquet_file(fs: pafs.FileSystem, root: str) -> None:
    path = f"{root}/{new_data_file('w', 0, 'parquet')}"
    batches = DATA.to_batches(max_chunksize=1)
    assert len(batches) == 3
    assert write_parquet_batches(fs, path, DATA.schema, iter(batches)) > 0
    assert read_file(fs, path, "parquet").to_pylist() == DATA.to_pylist()


def test_paths_and_names_are_parsed_the_catalog_way() -> None:
    assert fs_path("s3://warehouse/a/b") == "warehouse/a/b"
    assert fs_path("file:///tmp/x/") == "/tmp/x"  # noqa: S108 - a path string, no file
    assert split_table_name("a.b.t") == (("a", "b"), "t")
    assert not is_visible("_data/w/part.parquet")
    assert is_visible("year=2026/part.parquet")
    with pytest.raises(ValueError, match=r"namespace\.table"):
        split_table_name("justatable")
