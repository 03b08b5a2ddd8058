"""Spark's own Parquet, CSV and Delta over S3A, credentials from the node through lakegate-hadoop.

One Spark job per module (tests/jvm/native_files_job.py in .venv-jvm): two generic tables created
through the gateway, their options from `lakegate_client.spark.hadoop.hadoop_table` (the
driver's one gateway call per table and mode), every executor S3A request signed with the
credential `LakegateS3CredentialsProvider` got from the gateway. The store enforces the scope:
the read credential cannot write, one table's credential cannot read the other's files. The
catalog emulator's counters show the JVM's credential calls never reached the catalog.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.hooks import EmulatorHooks
from devstack.stack_info import StackInfo
from lakegate_client import Client
from lakegate_client.spark.hadoop import S3_PROVIDER, hadoop_table
from tests.jvm.jvm_env import run_job

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("native_files_job.py")
ROWS = 1000


@pytest.fixture(scope="module")
def tables(devstack: Any) -> Iterator[list[dict[str, Any]]]:
    info: StackInfo = devstack.info
    with Client(info.gateway_url, warehouse=info.warehouse.name) as client:
        names = [f"native_{uuid.uuid4().hex[:8]}" for _ in range(2)]
        out = []
        for name in names:
            client.create(info.namespace, name, format="parquet")
            write = hadoop_table(client, info.namespace, name, "write")
            read = hadoop_table(client, info.namespace, name, "read")
            out.append({"name": name, "path": write.path, "write": dict(write.options),
                        "read": dict(read.options)})
        yield out
        for name in names:
            client.drop(info.namespace, name)


@pytest.fixture(scope="module")
def job(devstack: Any, tables: list[dict[str, Any]],
        tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    hooks = EmulatorHooks(devstack.info.catalog.url)
    before = hooks.stats()
    result = run_job(JOB, {"tables": tables, "repeats": 3}, tmp_path_factory.mktemp("jvm-native"))
    after = hooks.stats()
    result["catalog"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return result


def test_the_options_name_the_table_and_hold_no_secret(tables: list[dict[str, Any]]) -> None:
    first = tables[0]
    assert first["path"].startswith("s3a://")
    for access in ("read", "write"):
        options = first[access]
        assert options["fs.s3a.aws.credentials.provider"] == S3_PROVIDER
        assert options["fs.lakegate.table"] == first["name"]
        assert options["fs.lakegate.access"] == access
        assert options["fs.s3a.impl.disable.cache"] == "true"
        assert not any("secret" in k or "session" in k for k in options)


def test_parquet_csv_and_delta_round_trip_through_the_providers(job: dict[str, Any]) -> None:
    first, second = job["tables"]
    assert first["parquet"] == [ROWS, sum(range(ROWS))]
    assert first["csv"] == [ROWS, sum(range(ROWS))]
    assert first["delta"] == [ROWS + 10, sum(range(ROWS)) + sum(range(10))]  # overwrite + append
    assert second["parquet"] == [ROWS, sum(range(ROWS))]


def test_the_store_refuses_what_the_credential_does_not_grant(job: dict[str, Any]) -> None:
    first = job["tables"][0]
    assert first["write_with_read_credential"] == "AccessDenied"
    assert first["read_other_table"] == "AccessDenied"


def test_the_executor_jvms_credential_calls_never_reach_the_catalog(job: dict[str, Any]) -> None:
    # hadoop_table already warmed the gateway (read and write of each table): every provider's
    # fetch in the job is answered by the node.
    assert job["catalog"]["load_generic_table_credentials"] == 0
    assert job["catalog"]["sts_assume_role"] == 0
