"""lakegate_client against the real gateway on the local stack, over all four URL forms."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from devstack.stack_info import StackInfo
from lakegate_client import AsyncClient, Client, NotFoundError

pytestmark = pytest.mark.integration

FORMS = ["http", "http+uds", "grpc", "grpc+uds"]


def gateway_urls(info: StackInfo) -> dict[str, str]:
    gw = info.gateway
    return {
        "http": gw.http_url,
        "http+uds": f"unix:{gw.uds}",
        "grpc": f"grpc://{gw.grpc_target}",
        "grpc+uds": f"grpc+unix:{gw.grpc_uds}",
    }


@pytest.fixture(params=FORMS)
def client(request: pytest.FixtureRequest, devstack: Any) -> Any:
    url = gateway_urls(devstack.info)[request.param]
    with Client(url, warehouse=devstack.info.warehouse.name, timeout_s=20) as c:
        yield c


def test_catalog_lifecycle_and_credentials(client: Client, devstack: Any) -> None:
    ns = devstack.info.namespace
    name = f"cl_{uuid.uuid4().hex[:10]}"
    created = client.create(ns, name, format="parquet", properties={"team": "client-tests"})
    assert created.format == "parquet"
    assert created.base_location.startswith("s3://")

    creds = client.credentials(ns, name, access="write")
    assert creds.location.rstrip("/") == created.base_location.rstrip("/")
    assert creds.outcome in ("miss", "hit", "coalesced")
    assert creds.remaining_s is not None
    assert creds.remaining_s > 300
    assert creds.warehouse_id == devstack.info.warehouse.id
    assert client.credentials(ns, name, access="write").outcome == "memo"

    loaded = client.load(ns, name, vended=True)
    assert loaded.properties.get("team") == "client-tests"
    assert loaded.credentials is not None
    assert loaded.credentials.storage == "s3"
    assert name in {t.name for t in client.list(ns)}

    renamed = f"{name}_r"
    client.rename(ns, name, ns, renamed)
    with pytest.raises(NotFoundError):
        client.load(ns, name)
    client.drop(ns, renamed)
    with pytest.raises(NotFoundError) as info:
        client.credentials(ns, renamed)
    assert info.value.status == 404
    assert info.value.type


async def test_async_client_against_the_gateway(devstack: Any) -> None:
    ns = devstack.info.namespace
    name = f"ca_{uuid.uuid4().hex[:10]}"
    for form in ("http+uds", "grpc+uds"):
        url = gateway_urls(devstack.info)[form]
        async with AsyncClient(url, warehouse=devstack.info.warehouse.name) as client:
            table = f"{name}_{form[:4]}"
            await client.create(ns, table, format="lance")
            creds = await client.credentials(ns, table, access="write")
            assert creds.lance_storage_options()["allow_http"] == "true"
            assert (await client.credentials(ns, table, access="write")).outcome == "memo"
            await client.drop(ns, table)


def test_tight_loop_costs_one_upstream_credential_call(devstack: Any, emulator: Any) -> None:
    ns = devstack.info.namespace
    name = f"cm_{uuid.uuid4().hex[:10]}"
    url = gateway_urls(devstack.info)["grpc+uds"]
    with Client(url, warehouse=devstack.info.warehouse.name) as client:
        client.create(ns, name, format="parquet")
        emulator.reset()
        outcomes = [client.credentials(ns, name).outcome for _ in range(2000)]
        client.drop(ns, name)
    assert outcomes.count("memo") == 1999
    stats = emulator.stats()
    assert stats.get("load_generic_table_credentials", 0) == 1
    assert stats.get("sts_assume_role", 0) == 1
