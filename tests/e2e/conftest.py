"""End-to-end fixtures: one SparkSession for the whole e2e run, its tasks wired to the gateway.

Why session-scoped: a SparkSession costs ~5-10 s to start on these machines, and every test here
uses the same local stack (the session ``devstack`` fixture of tests/stack_fixtures.py).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

import httpx
import pytest

from devstack.stack_info import StackInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakegate_client import Client


@pytest.fixture(scope="session")
def stack_info(devstack: Any) -> StackInfo:
    """The running stack's stack.json."""
    return devstack.info


@pytest.fixture(scope="session")
def gateway_url(stack_info: StackInfo) -> str:
    """How tasks reach the gateway: gRPC over its Unix socket."""
    return f"grpc+unix:{stack_info.gateway.grpc_uds}"


@pytest.fixture(scope="session")
def spark(stack_info: StackInfo, gateway_url: str) -> Iterator[SparkSession]:
    """``local[2,2]`` with the ``lakekeeper`` data source registered (stopped at the end).

    The JVM, and every Python worker it forks, copies the environment when the session starts,
    so ``LAKEGATE_URL`` is set only around that moment and other tests never see it.
    """
    from devstack.spark_session import spark_session

    env = {
        "LAKEGATE_URL": gateway_url,
        "LAKEGATE_WAREHOUSE": stack_info.warehouse.name,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # The write-protocol tests inject task faults (lakegate_client/spark/faults.py).
        "LAKEGATE_TEST_FAULTS": "1",
    }
    with patch.dict(os.environ, env):
        # local[2,2]: a failed task gets one retry, as on a cluster (plain local[2] never retries)
        # killTimeout: a cancelled task keeps running for a while, as on a busy cluster, so a
        # task can finish its file after the job's abort (test_spark_write_protocol.py)
        session = spark_session("local[2,2]", app_name="lakegate-e2e",
                                conf={"spark.python.task.killTimeout": "30s"})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def client(stack_info: StackInfo, gateway_url: str) -> Iterator[Client]:
    from lakegate_client import Client

    with Client(gateway_url, warehouse=stack_info.warehouse.name) as c:
        yield c


@pytest.fixture(scope="session")
def namespace(stack_info: StackInfo) -> str:
    return stack_info.namespace


@pytest.fixture
def table_name() -> str:
    """A fresh table name per test (the stack is shared by the whole session)."""
    return f"t_{uuid.uuid4().hex[:10]}"


class Upstream:
    """Reads the catalog emulator's exact call counters and the gateway's cache controls."""

    def __init__(self, info: StackInfo) -> None:
        self._catalog = info.catalog.url
        self._gateway = info.gateway_url

    def catalog_stats(self) -> dict[str, int]:
        answer = httpx.get(f"{self._catalog}/_emulator/stats", timeout=5.0, trust_env=False)
        answer.raise_for_status()
        return {k: int(v) for k, v in answer.json().items() if isinstance(v, (int, float))}

    def invalidate_gateway_cache(self) -> None:
        answer = httpx.post(
            f"{self._gateway}/v1/cache/invalidate",
            json={"all": True},
            headers={"X-Lakegate-Request": "1"},
            timeout=5.0,
            trust_env=False,
        )
        answer.raise_for_status()

    def gateway_metrics(self) -> str:
        answer = httpx.get(f"{self._gateway}/metrics", timeout=5.0, trust_env=False)
        answer.raise_for_status()
        return answer.text


@pytest.fixture(scope="session")
def upstream(stack_info: StackInfo) -> Upstream:
    return Upstream(stack_info)
