"""Encode and decode one data file of a directory table (parquet, csv, json lines)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from lakegate_client.tables.catalog import TableFormatError
from lakegate_client.tables.directory import ensure_parent

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

__all__ = ["read_file", "write_file", "write_parquet_batches"]


def read_file(fs: pafs.FileSystem, path: str, fmt: str) -> pa.Table:
    """Decode one data file of a directory table."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, filesystem=fs)
    with fs.open_input_stream(path) as stream:
        if fmt == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(stream)
        if fmt == "json":
            import pyarrow.json as pjson

            return pjson.read_json(stream)
    raise TableFormatError(f"{fmt!r} is not a directory format")


def write_parquet_batches(
    fs: pafs.FileSystem, path: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> int:
    """Stream batches into one Parquet file (memory stays at one batch); returns its size."""
    import pyarrow.parquet as pq

    ensure_parent(fs, path)
    with _removed_on_error(fs, path):
        with fs.open_output_stream(path) as out, pq.ParquetWriter(out, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    return int(fs.get_file_info(path).size)


@contextlib.contextmanager
def _removed_on_error(fs: pafs.FileSystem, path: str) -> Iterator[None]:
    """Delete ``path`` if the block fails.

    Why: a pyarrow output stream closed by an exception still completes its upload, so a failed
    write would otherwise leave a truncated (or footer-closed, partial) file in the table.
    """
    try:
        yield
    except BaseException:
        try:
            fs.delete_file(path)
        except OSError:
            pass  # never written, or already gone; the original error is what matters
        raise


def write_file(fs: pafs.FileSystem, path: str, data: pa.Table, fmt: str) -> int:
    """Encode one data file of a directory table; returns its size in bytes."""
    if fmt not in ("parquet", "csv", "json"):
        raise TableFormatError(f"{fmt!r} is not a directory format")
    ensure_parent(fs, path)
    with _removed_on_error(fs, path):
        _encode(fs, path, data, fmt)
    return int(fs.get_file_info(path).size)


def _encode(fs: pafs.FileSystem, path: str, data: pa.Table, fmt: str) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, path, filesystem=fs)
    else:
        with fs.open_output_stream(path) as out:
            if fmt == "csv":
                import pyarrow.csv as pcsv

                pcsv.write_csv(data, out)
            else:
                for row in data.to_pylist():
                    out.write(json.dumps(row, default=str).encode() + b"\n")
