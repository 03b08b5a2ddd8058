"""Change events on the real stack: the emulator publishes Lakekeeper-shaped CloudEvents to the
stack's NATS server, a second gateway (node B) subscribes, and a table replaced through node A
is served new by node B within 2 s, although its identity TTL while subscribed is an hour.

The fault test kills NATS mid-run: node B's requests go on, `/readyz` stays ready and says the
subscription is lost, the metric shows it, staleness falls back to `cache.identity_ttl_s`; once
NATS is back, node B subscribes again and events work again.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.gateway_proc import events_settings
from devstack.hooks import EmulatorHooks
from devstack.launcher import start_component, stop_component
from devstack.stack_info import StackInfo
from tests.gateway_process import running_gateway, stack_env
from tests.integration.gateway.conftest import MARK, idp_token

pytestmark = pytest.mark.integration

FALLBACK_TTL_S = 3.0
EVENT_BOUND_S = 2.0
UPSTREAM_DEADLINE_S = 5.0
# After a reconnect the short TTL holds this long (service/change_events.py, issue 50 item 8).
GAP_WINDOW_S = FALLBACK_TTL_S + UPSTREAM_DEADLINE_S + 1.0


@pytest.fixture(scope="module")
def node_b(info: StackInfo, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[httpx.Client]:
    assert info.nats is not None, "the stack runs NATS"
    env = stack_env(info) | events_settings(info) | {
        "LAKEGATE__EVENTS__IDENTITY_TTL_S": "3600",
        "LAKEGATE__CACHE__IDENTITY_TTL_S": str(FALLBACK_TTL_S),
        # A short deadline keeps the window after a reconnect short (GAP_WINDOW_S).
        "LAKEGATE__UPSTREAM__TIMEOUT_S": str(UPSTREAM_DEADLINE_S),
        "LAKEGATE__UPSTREAM__DEADLINE_S": str(UPSTREAM_DEADLINE_S),
    }
    with running_gateway(tmp_path_factory.mktemp("events-b"), env, name="events-b") as gw, \
            httpx.Client(base_url=gw.http_url, headers=MARK, timeout=30,
                         trust_env=False) as client:
        _wait_for(lambda: _metric(client, "lakegate_change_events_up") == 1.0, 10)
        yield client


def _wait_for(check: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"not within {timeout_s} s")
        time.sleep(step_s)
    return time.monotonic() - start


def _metric(node: httpx.Client, name: str) -> float | None:
    for line in node.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def _location(node: httpx.Client, ns: str, name: str) -> str:
    resp = node.get(f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}/credentials")
    assert resp.status_code == 200, resp.text
    return str(resp.json()["location"])


def _recreate(gw: httpx.Client, ns: str, name: str, how: str) -> str:
    if how == "drop":
        assert gw.delete(f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}",
                         params={"purge": "true"}).status_code == 204
    else:
        assert gw.post("/v1/warehouses/demo/tables/rename", json={
            "source": {"namespace": [ns], "name": name},
            "destination": {"namespace": [ns], "name": name + "_old"}}).status_code == 204
    resp = gw.post(f"/v1/warehouses/demo/namespaces/{ns}/tables",
                   json={"name": name, "format": "lance"})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["table"]["base_location"])


@pytest.mark.parametrize("how", ["drop", "rename"])
def test_with_events_node_b_serves_the_new_location_within_2s(
    gw: httpx.Client, node_b: httpx.Client, new_table: Any, how: str
) -> None:
    table = new_table(prefix="evt")
    ns, name = table["namespace"], table["table"]["name"]
    old = _location(node_b, ns, name)
    before = _metric(node_b, 'lakegate_change_events_total{result="applied"}') or 0.0
    new = _recreate(gw, ns, name, how)
    assert new != old
    took = _wait_for(lambda: _location(node_b, ns, name) == new, EVENT_BOUND_S)
    assert took < EVENT_BOUND_S
    # Events did it, not the identity check (an hour while subscribed).
    assert (_metric(node_b, 'lakegate_change_events_total{result="applied"}') or 0) > before
    assert _metric(node_b, 'lakegate_identity_checks_total{result="loaded"}') == 0


async def _subscriber(url: str, subject: str, got: list[dict[str, Any]]) -> Any:
    import nats

    nc = await nats.connect(url)

    async def cb(msg: Any) -> None:
        got.append(json.loads(msg.data))

    await nc.subscribe(subject, cb=cb)
    await nc.flush(timeout=5)  # subscribed at the server before the test acts (no lost event)
    return nc


def test_the_emulator_publishes_lakekeeper_shaped_events(
    info: StackInfo, gw: httpx.Client, new_table: Any
) -> None:
    assert info.nats is not None
    got: list[dict[str, Any]] = []

    async def run() -> None:
        nc = await _subscriber(info.nats.url, info.nats.subject, got)
        try:
            table = await asyncio.to_thread(new_table, prefix="shape")
            name = table["table"]["name"]
            await asyncio.to_thread(gw.delete, f"/v1/warehouses/demo/namespaces/"
                                    f"{table['namespace']}/tables/{name}")
            # Bounded, and long enough for a loaded machine (5 s was not, under a parallel
            # Spark suite): the events arrive within milliseconds when the box is idle.
            for _ in range(600):
                if len(got) >= 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            await nc.close()

    asyncio.run(run())
    assert len(got) >= 2, f"only {len(got)} of the create and drop events arrived in 30 s"
    create, drop = got[0], got[1]
    assert (create["type"], drop["type"]) == ("createGenericTable", "dropGenericTable")
    for ev in (create, drop):
        assert ev["specversion"] == "1.0"
        assert ev["datacontenttype"] == "application/json"
        assert ev["source"].startswith("uri:iceberg-catalog-service:")
        assert ev["tabular-type"] == "GenericTable"
        assert ev["warehouse-id"] == info.warehouse.id == ev["prefix"]
        assert ev["namespace"] == info.namespace
        assert (ev["num-events"], ev["sequence-number"]) == (1, 0)
        assert json.loads(ev["actor"])["type"] in ("principal", "anonymous")
        assert ev["id"][14] == "7"  # UUIDv7
        assert not {"subject", "time", "dataschema"} & ev.keys()
    assert create["tabular-id"] == drop["tabular-id"]
    assert create["data"]["name"] == create["name"]
    assert "base-location" not in create["data"]
    assert drop["data"] is None


def test_killing_nats_mid_run_keeps_requests_going_within_the_fallback_ttl(
    info: StackInfo, gw: httpx.Client, node_b: httpx.Client, new_table: Any
) -> None:
    run_dir = Path(info.run_dir)
    table = new_table(prefix="evtkill")
    ns, name = table["namespace"], table["table"]["name"]
    old = _location(node_b, ns, name)
    stop_component(run_dir, "nats")
    try:
        _wait_for(lambda: _metric(node_b, "lakegate_change_events_up") == 0.0, 10)
        ready = node_b.get("/readyz")
        assert ready.status_code == 200
        assert "change events subscription lost" in ready.json()["reason"]
        assert _location(node_b, ns, name) == old  # requests go on
        new = _recreate(gw, ns, name, "drop")  # no event can reach node B now
        lost_at = time.monotonic()
        _wait_for(lambda: _location(node_b, ns, name) == new, FALLBACK_TTL_S + 2.0)
        assert time.monotonic() - lost_at <= FALLBACK_TTL_S + 2.0
    finally:
        start_component(run_dir, "nats")
    # Subscribed again, but the events of the gap are lost: the short TTL holds for the gap's
    # window (issue 50 item 8: the events TTL came back at once).
    _wait_for(lambda: "resynchronising" in node_b.get("/readyz").json()["reason"], 15)
    back_at = time.monotonic()
    assert _metric(node_b, "lakegate_change_events_up") == 0.0
    _wait_for(lambda: _metric(node_b, "lakegate_change_events_up") == 1.0, GAP_WINDOW_S + 5)
    assert time.monotonic() - back_at >= GAP_WINDOW_S - 1.0
    assert "change events" not in node_b.get("/readyz").json()["reason"]
    # Events work again (the emulator reconnected too).
    newer = _recreate(gw, ns, name, "drop")
    _wait_for(lambda: _location(node_b, ns, name) == newer, EVENT_BOUND_S)


def test_a_table_replaced_by_register_overwrite_is_served_new_within_2s(
    info: StackInfo, node_b: httpx.Client
) -> None:
    # `registerTable` with overwrite replaces a table with no drop event: only the
    # registerTable event tells node B (its identity TTL while subscribed is an hour).
    catalog = httpx.Client(base_url=info.catalog.url, timeout=30, trust_env=False, headers={
        "Authorization": f"Bearer {idp_token(info, 'direct')}",
        "X-Iceberg-Access-Delegation": "vended-credentials"})
    tables = f"/catalog/v1/{info.warehouse.id}/namespaces/{info.namespace}"
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
    name, donor = f"reg_{uuid.uuid4().hex[:8]}", f"donor_{uuid.uuid4().hex[:8]}"
    with catalog:
        for each in (name, donor):
            resp = catalog.post(f"{tables}/tables", json={"name": each, "schema": schema})
            assert resp.status_code == 200, resp.text
        donor_doc = catalog.get(f"{tables}/tables/{donor}").json()
        assert catalog.delete(f"{tables}/tables/{donor}").status_code == 204  # files kept

        def location() -> str:
            resp = node_b.get(f"{tables}/tables/{name}/credentials")
            assert resp.status_code == 200, resp.text
            return str(resp.json()["storage-credentials"][0]["prefix"])

        old = location()
        resp = catalog.post(f"{tables}/register", json={
            "name": name, "metadata-location": donor_doc["metadata-location"],
            "overwrite": True})
        assert resp.status_code == 200, resp.text
        new = donor_doc["metadata"]["location"]
        assert new != old
        took = _wait_for(lambda: location() == new, EVENT_BOUND_S)
        assert took < EVENT_BOUND_S


def _upstream_credential_calls(node: httpx.Client) -> float:
    return sum(float(line.split()[1]) for line in node.get("/metrics").text.splitlines()
               if line.startswith("lakegate_upstream_requests_total{")
               and 'op="load_credentials"' in line)


def test_the_event_of_a_nodes_own_create_drops_nothing_it_cached_since(
    node_b: httpx.Client, new_table: Any, emulator: EmulatorHooks
) -> None:
    """The catalog's event carries the create's x-request-id as its trace-id: the node that
    made the create keeps what it cached since its create answered (one STS call, not two).
    The event is held back a second, as a loaded catalog's was, so it lands after the fill."""
    ns = new_table(prefix="own")["namespace"]
    emulator.set_faults(event_delay_ms=1000)
    name = f"own_{uuid.uuid4().hex[:8]}"
    applied = _metric(node_b, 'lakegate_change_events_total{result="applied"}') or 0.0
    created = node_b.post(f"/v1/warehouses/demo/namespaces/{ns}/tables",
                          json={"name": name, "format": "lance"},
                          headers={"x-request-id": str(uuid.uuid4())})
    assert created.status_code == 200, created.text
    url = f"/v1/warehouses/demo/namespaces/{ns}/tables/{name}/credentials"
    before = _upstream_credential_calls(node_b)
    assert node_b.get(url).json()["outcome"] == "miss"
    _wait_for(lambda: (_metric(node_b, 'lakegate_change_events_total{result="applied"}')
                       or 0.0) > applied, EVENT_BOUND_S + 1)
    assert node_b.get(url).json()["outcome"] == "hit"
    assert _upstream_credential_calls(node_b) == before + 1
