"""Spark's own Parquet, CSV and Delta over the GCS connector, tokens from the node.

The same job as tests/jvm/test_native_files.py (tests/jvm/native_files_job.py, one Spark session
for the module) on the cloud stack's GCS warehouse: fake-gcs-server behind the stack's token
guard, which checks every request (and every part of the connector's batch requests: a
rename's copies and deletes) against the table-scoped token `LakegateGcsAccessTokenProvider`
got from the gateway. Delta via delta-spark runs on GCS here, which the Python data source
cannot do (deltalake takes no raw access token on GCS).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.launcher import Stack
from lakegate_client import Client
from lakegate_client.spark.hadoop import GCS_PROVIDER, hadoop_table
from tests.jvm.jvm_env import run_job

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

JOB = Path(__file__).with_name("native_files_job.py")
ROWS = 1000


@pytest.fixture(scope="module")
def gcs_tables(cloud_stack: Stack) -> Iterator[list[dict[str, Any]]]:
    info = cloud_stack.info
    assert info.gcs is not None
    warehouse = info.warehouse_for("gcs").name
    with pytest.MonkeyPatch.context() as mp, \
            Client(info.gateway_url, warehouse=warehouse) as client:  # fmt: skip
        mp.setenv("LAKEGATE_GCS_ENDPOINT", info.gcs.endpoint)
        names = [f"native_gcs_{uuid.uuid4().hex[:8]}" for _ in range(2)]
        out = []
        for name in names:
            client.create(info.namespace, name, format="parquet")
            write = hadoop_table(client, info.namespace, name, "write")
            read = hadoop_table(client, info.namespace, name, "read")
            out.append({"name": name, "path": write.path, "write": dict(write.options),
                        "read": dict(read.options)})  # fmt: skip
        yield out
        for name in names:
            client.drop(info.namespace, name)


@pytest.fixture(scope="module")
def gcs_job(gcs_tables: list[dict[str, Any]],
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # fmt: skip
    return run_job(JOB, {"tables": gcs_tables, "repeats": 0},
                   tmp_path_factory.mktemp("jvm-native-gcs"))  # fmt: skip


def test_the_gcs_options_name_the_provider_and_hold_no_secret(
    gcs_tables: list[dict[str, Any]],
) -> None:
    first = gcs_tables[0]
    assert first["path"].startswith("gs://")
    for access in ("read", "write"):
        options = first[access]
        assert options["fs.gs.auth.access.token.provider"] == GCS_PROVIDER
        assert options["fs.gs.create.items.conflict.check.enable"] == "false"
        assert options["fs.lakegate.access"] == access
        assert not any("token" in k and k != "fs.gs.auth.access.token.provider" for k in options)


def test_parquet_csv_and_delta_round_trip_on_gcs(gcs_job: dict[str, Any]) -> None:
    first, second = gcs_job["tables"]
    assert first["parquet"] == [ROWS, sum(range(ROWS))]
    assert first["csv"] == [ROWS, sum(range(ROWS))]
    assert first["delta"] == [ROWS + 10, sum(range(ROWS)) + sum(range(10))]  # overwrite + append
    assert second["parquet"] == [ROWS, sum(range(ROWS))]


def test_the_gcs_guard_refuses_what_the_token_does_not_grant(gcs_job: dict[str, Any]) -> None:
    first = gcs_job["tables"][0]
    assert first["write_with_read_credential"] in ("Forbidden", "403")
    assert first["read_other_table"] in ("Forbidden", "403")
