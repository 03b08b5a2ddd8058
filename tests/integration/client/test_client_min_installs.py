"""The client as executor images install it, in clean venvs, against the real gateway.

- core: `pip install clients/python` next to protobuf 4.25 and grpcio 1.62 (what Spark 3.5,
  TensorFlow/Ray and google-cloud images pin), calling the gateway over HTTP without ever
  importing grpc or protobuf;
- grpc: `lakegate-client[grpc]` at its declared floors, calling the gateway over gRPC.

The venvs are built by `make client-min-deps` (cached; tests/deploy/client_min_deps.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from packaging.version import Version

from tests.deploy.client_floor import CLIENT, declared_floors
from tests.deploy.client_min_deps import installs, run_probe

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]


def _probe(name: str, url: str, devstack: Any) -> dict[str, Any]:
    info = devstack.info
    done = run_probe(installs()[name], name, url, info.warehouse.name, info.namespace)
    assert done.returncode == 0, done.stdout + done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["client_file"].startswith(str(CLIENT / "src"))  # this checkout's client
    assert result["location"].startswith("s3://")
    assert result["storage"] == "s3"
    assert result["outcomes"][1] == "memo"
    assert result["listed"] is True
    return result


def test_core_client_next_to_protobuf_4_25_and_grpcio_1_62_over_http(devstack: Any) -> None:
    result = _probe("core", devstack.info.gateway.http_url, devstack)
    assert result["versions"]["protobuf"].startswith("4.25.")
    assert result["versions"]["grpcio"].startswith("1.62.")
    assert result["grpc_loaded"] is False
    assert result["protobuf_loaded"] is False


def test_grpc_extra_at_its_declared_floors_over_grpc(devstack: Any) -> None:
    result = _probe("grpc", f"grpc://{devstack.info.gateway.grpc_target}", devstack)
    floors = declared_floors(CLIENT / "pyproject.toml", "grpc")
    for package in ("protobuf", "grpcio", "httpx"):
        floor = Version(".".join(map(str, floors[package])))
        assert Version(result["versions"][package]) == floor, package
    assert result["grpc_loaded"] is True


def test_spark_35_runs_the_client_table_functions_in_map_in_arrow(devstack: Any) -> None:
    """Spark 3.5 has no Python Data Source: the README's mapInArrow / mapPartitions pattern."""
    info = devstack.info
    done = run_probe(installs()["spark35"], info.gateway_url, info.warehouse.name,
                     info.namespace, str(CLIENT / "src"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["pyspark"].startswith("3.5.")
    assert (result["written"], result["read"], result["sum"]) == (1000, 1000, sum(range(1000)))
