"""Two Delta commits that find no table: both land (the create's loser commits to the winner's)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")
deltalake = pytest.importorskip("deltalake")


def _commit(location: str, name: str, rows: int, barrier: threading.Barrier,
            errors: list[BaseException]) -> None:
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    from lakegate_client.engine.formats.delta import delta_commit

    schema = pa.schema([("id", pa.int64())])
    pq.write_table(pa.table({"id": list(range(rows))}, schema=schema), f"{location}/{name}")
    size = Path(location, name).stat().st_size
    add = AddAction(path=name, size=size, partition_values={}, modification_time=0,
                    data_change=True, stats=f'{{"numRecords": {rows}}}')
    barrier.wait()
    try:
        delta_commit(location, {}, schema, [add], overwrite=False)
    except BaseException as exc:  # noqa: BLE001 - asserted below
        errors.append(exc)


def test_two_jobs_creating_one_delta_table_both_land(tmp_path: Path) -> None:
    """Regression guard: the create's loser used to fail ("SaveMode `append` is not allowed for
    create operation", or a version-0 commit conflict) instead of appending."""
    for round_ in range(10):
        location = tmp_path / f"t{round_}"
        location.mkdir()
        barrier, errors = threading.Barrier(2), []  # type: ignore[var-annotated]
        jobs = [threading.Thread(target=_commit, args=(str(location), f"part-{n}.parquet",
                                                       10 + n, barrier, errors))
                for n in range(2)]
        for job in jobs:
            job.start()
        for job in jobs:
            job.join()
        assert errors == []
        table = deltalake.DeltaTable(str(location))
        assert table.to_pyarrow_table().num_rows == 21, f"round {round_}"
