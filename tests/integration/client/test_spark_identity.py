"""The Spark data source passes the driver's table identity with every task (issue #27).

Real stack, no Spark session: the driver side (describe, plan) runs against node A's gateway and
the task side (`LakekeeperReader.read`) against node B's, a second gateway that cached the table
before it was dropped and created again through node A, with an identity TTL far beyond the test.
Without the driver's identity node B would hand the task the dropped table's location; with it
the task reads the new table. The worker's client memo (shared by the tasks of a Python worker,
and holding the old table too) is bypassed the same way.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakegate_client import Client
from lakegate_client.spark.connection import client_for, table_credentials
from lakegate_client.spark.options import SourceOptions
from lakegate_client.spark.reader import LakekeeperReader, arrow_schema, spark_schema
from lakegate_client.tables import describe_table, write_table
from tests.gateway_process import running_gateway, stack_env

pytestmark = pytest.mark.integration


def _rows(*ids: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"row-{i}" for i in ids]})


def test_a_task_on_a_stale_node_reads_the_table_its_driver_planned(
    devstack: Any, tmp_path: Path
) -> None:
    info = devstack.info
    ns, name = info.namespace, f"spk_{uuid.uuid4().hex[:10]}"
    wh = info.warehouse.name
    node_a = Client(info.gateway_url, warehouse=wh, memo=False)
    env = stack_env(info) | {"LAKEGATE__CACHE__IDENTITY_TTL_S": "3600"}
    with running_gateway(tmp_path, env, name="stale-node") as gw_b:
        opts_a = SourceOptions.parse({"table": f"{ns}.{name}", "warehouse": wh,
                                      "url": info.gateway_url})
        opts_b = SourceOptions.parse({"table": f"{ns}.{name}", "warehouse": wh,
                                      "url": gw_b.http_url})
        write_table(node_a, ns, name, _rows(1, 2, 3), format="parquet", create=True)
        # An earlier job's task on node B: node B's gateway and the worker's memo hold L1.
        old = table_credentials(opts_b, "read")
        assert client_for(gw_b.http_url).credentials([ns], name, warehouse=wh).outcome == "memo"

        node_a.drop(ns, name, purge=True)
        write_table(node_a, ns, name, _rows(100, 101), format="parquet", create=True)

        # Node B is stale: asked without an identity, its gateway still answers the old table.
        with Client(gw_b.http_url, warehouse=wh, memo=False) as plain_b:
            stale = plain_b.credentials(ns, name)
        assert (stale.location, stale.outcome) == (old.location, "hit")

        # The driver plans against node A; its task runs on node B.
        planned = describe_table(node_a, ns, name, warehouse=wh)
        assert planned.location.rstrip("/") != old.location.rstrip("/")
        schema = spark_schema(arrow_schema(planned, table_credentials(opts_a, "read",
                                                                      planned.location)))
        partitions = LakekeeperReader(opts_a, planned, schema).partitions()
        task = LakekeeperReader(opts_b, planned, schema)
        batches = [b for p in partitions for b in task.read(p)]
        assert sorted(pa.Table.from_batches(batches)["id"].to_pylist()) == [100, 101]
        # The worker memo now holds the new table for the next task of this worker.
        again = client_for(gw_b.http_url).credentials([ns], name, warehouse=wh,
                                                      expected_location=planned.location)
        assert (again.outcome, again.location) == ("memo", planned.location)
