"""Iceberg's own Spark runtime (SparkCatalog, type=rest) through the gateway, unchanged.

One Spark job per module (tests/jvm/iceberg_sql_job.py in .venv-jvm, ~50 s): Spark SQL
creates, appends to, reads, updates, deletes from, merges into and drops two Iceberg tables on
S3 (SeaweedFS) with the gateway as the REST catalog (`uri=<gateway>/catalog`, vended
credentials). The catalog emulator's exact counters, read by the job between phases, show what
reached the catalog: one credential call per table for the whole job (every load and every
credential refresh of S3FileIO's VendedCredentialsProvider is answered by the node), and
Iceberg Java's `If-None-Match` revalidations turned into 304s.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from devstack.stack_info import StackInfo
from tests.jvm.jvm_env import run_job

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("iceberg_sql_job.py")
PHASES = ("start", "written", "read", "mutated", "dropped")


@pytest.fixture(scope="module")
def job(devstack: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    info: StackInfo = devstack.info
    assert info.gateway is not None
    tables = [f"jvm_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    spec = {"gateway_url": info.gateway_url, "catalog_url": info.catalog.url,
            "warehouse": info.warehouse.name, "namespace": info.namespace, "tables": tables}
    return run_job(JOB, spec, tmp_path_factory.mktemp("jvm-iceberg"))


def _delta(table: dict[str, Any], counter: str, since: str, until: str) -> int:
    stats = table["stats"]
    return int(stats[until].get(counter, 0)) - int(stats[since].get(counter, 0))


def test_spark_sql_round_trips_an_iceberg_table_through_the_gateway(
    job: dict[str, Any],
) -> None:
    assert job["spark"].startswith("4.1.")
    for table in job["tables"]:
        assert table["count"] == 100
        assert table["sum"] == sum(range(100))
        labels = dict(map(tuple, table["labels"]))
        assert labels["updated"] == 10  # UPDATE ... WHERE id < 10
        assert labels["merged"] == 10  # MERGE: 85..89 matched, 90..94 (deleted) inserted
        assert sum(labels.values()) == 95
        assert table["ids"] == [0, 94, 95]  # DELETE WHERE id >= 90, then MERGE re-inserted 90..94
        assert table["snapshots"] == 4  # append, update, delete, merge
        assert table["exists_after_drop"] is False


def test_the_catalog_vends_once_per_table_for_the_whole_job(job: dict[str, Any]) -> None:
    for table in job["tables"]:
        # Create (the catalog vends for its first write), append, 4 reads, UPDATE, DELETE,
        # MERGE, their scans and the tasks' credential refreshes: one STS call in all.
        assert _delta(table, "load_table_credentials", "start", "dropped") == 1
        assert _delta(table, "sts_assume_role", "start", "dropped") == 1
        assert _delta(table, "load_table_vended", "start", "dropped") == 0
        assert _delta(table, "create_table", "start", "written") == 1
        assert _delta(table, "commit_table", "start", "dropped") == 4
        assert _delta(table, "drop_table", "mutated", "dropped") == 1


def test_iceberg_java_revalidates_its_cached_tables_with_304s(job: dict[str, Any]) -> None:
    for table in job["tables"]:
        loads = _delta(table, "load_table", "written", "read")
        not_modified = _delta(table, "load_table_not_modified", "written", "read")
        assert loads >= 3  # the SELECTs load the table (Spark's own table cache is off)
        assert not_modified >= 1  # the gateway's ETag came back as If-None-Match -> 304
        assert _delta(table, "load_table_credentials", "written", "read") == 0
