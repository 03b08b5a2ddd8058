"""Two gateways on one catalog, no change events, the client's memo on (as every executor runs it):
after a table is dropped and created again through node A, ``Client.credentials()`` on node B
hands out the new location (or, for a task planned against the old one, 409) within node B's
identity TTL plus one round trip (issue #33, "Done when"). With events, within the event's
delivery plus the 2 s a subscribed gateway lets a caller keep an identity.

Node A is the stack's own gateway; node B is a second gateway process with a short
``CACHE__IDENTITY_TTL_S`` and no events. The client in this process talks to node B only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.gateway_proc import events_settings
from gateway.tuning import EVENTS_CALLER_IDENTITY_TTL_S
from lakegate_client import Client, TableIdentityMismatchError
from tests.gateway_process import GatewayProcess, running_gateway, stack_env

pytestmark = pytest.mark.integration

IDENTITY_TTL_S = 2.0
# One round trip to node B when its identity is due: a metadata load, and for a changed
# location one credential fetch from the catalog, on a machine shared with other suites.
ROUND_TRIP_S = 1.5
POLL_S = 0.05
EVENT_DELIVERY_S = 2.0  # what tests/integration/gateway/test_change_events.py measures


@pytest.fixture(scope="module")
def node_b(devstack: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = stack_env(devstack.info) | {"LAKEGATE__CACHE__IDENTITY_TTL_S": str(IDENTITY_TTL_S)}
    run_dir: Path = tmp_path_factory.mktemp("client-node-b")
    with running_gateway(run_dir, env, name="node-b") as gw:
        yield gw


@pytest.fixture
def node_a(devstack: Any) -> Iterator[Client]:
    with Client(devstack.info.gateway.http_url, warehouse=devstack.info.warehouse.name,
                timeout_s=30, memo=False) as client:
        yield client


def _b_url(node_b: GatewayProcess, form: str) -> str:
    return node_b.http_url if form == "http" else f"grpc://{node_b.grpc_target}"


def _recreate(node_a: Client, ns: str, name: str) -> str:
    node_a.drop(ns, name, purge=True)
    return node_a.create(ns, name, format="lance").base_location.rstrip("/")


@pytest.mark.parametrize("form", ["http", "grpc"])
def test_node_b_memo_hands_out_the_new_location_within_the_identity_ttl(
    devstack: Any, node_a: Client, node_b: GatewayProcess, form: str
) -> None:
    ns, name = devstack.info.namespace, f"ccoh_{uuid.uuid4().hex[:10]}"
    old = node_a.create(ns, name, format="lance").base_location.rstrip("/")
    with Client(_b_url(node_b, form), warehouse=devstack.info.warehouse.name,
                timeout_s=30) as executor:
        first = executor.credentials(ns, name)
        assert first.location.rstrip("/") == old
        assert first.identity_ttl_s is not None
        assert 0 < first.identity_ttl_s <= IDENTITY_TTL_S
        assert executor.credentials(ns, name).outcome == "memo"  # the memo is on

        new = _recreate(node_a, ns, name)  # node B and this process hear nothing of it
        changed = time.monotonic()
        assert new != old
        outcomes: list[str] = []
        while True:
            creds = executor.credentials(ns, name)
            if creds.location.rstrip("/") == new:
                break
            outcomes.append(creds.outcome)
            assert time.monotonic() - changed <= IDENTITY_TTL_S + ROUND_TRIP_S, (
                f"still the old location {time.monotonic() - changed:.2f} s after the change")
            time.sleep(POLL_S)
        took = time.monotonic() - changed
        print(f"{form}: new location after {took:.2f} s (bound {IDENTITY_TTL_S} s + one "
              f"round trip); old answers meanwhile: {len(outcomes)}, from the memo: "
              f"{outcomes.count('memo')}")
        assert took <= IDENTITY_TTL_S + ROUND_TRIP_S
        assert creds.config["s3.access-key-id"]  # a usable credential for the new table
        assert executor.credentials(ns, name).outcome == "memo"  # memoised again
    node_a.drop(ns, name, purge=True)


def test_a_task_planned_against_the_dropped_table_is_refused_within_the_identity_ttl(
    devstack: Any, node_a: Client, node_b: GatewayProcess
) -> None:
    ns, name = devstack.info.namespace, f"ccoh_{uuid.uuid4().hex[:10]}"
    node_a.create(ns, name, format="lance")
    with Client(node_b.http_url, warehouse=devstack.info.warehouse.name,
                timeout_s=30) as executor:
        planned = executor.credentials(ns, name).location  # the driver's plan
        assert executor.credentials(ns, name, expected_location=planned).outcome == "memo"
        _recreate(node_a, ns, name)
        changed = time.monotonic()
        with pytest.raises(TableIdentityMismatchError):  # noqa: PT012 - polls until refused
            while time.monotonic() - changed <= IDENTITY_TTL_S + ROUND_TRIP_S:
                executor.credentials(ns, name, expected_location=planned)
                time.sleep(POLL_S)
        assert time.monotonic() - changed <= IDENTITY_TTL_S + ROUND_TRIP_S
    node_a.drop(ns, name, purge=True)


@pytest.fixture(scope="module")
def node_b_events(devstack: Any, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[GatewayProcess]:
    """Node B subscribed to the catalog's events; its own identity checks an hour apart, so
    only an event (and the client asking again) can show it the new table in time."""
    info = devstack.info
    assert info.nats is not None, "the stack runs NATS"
    env = stack_env(info) | events_settings(info) | {
        "LAKEGATE__EVENTS__IDENTITY_TTL_S": "3600", "LAKEGATE__CACHE__IDENTITY_TTL_S": "3600"}
    with running_gateway(tmp_path_factory.mktemp("client-node-b-events"), env,
                         name="node-b-events") as gw:
        deadline = time.monotonic() + 10
        while "lakegate_change_events_up 1.0" not in _metrics(gw):
            assert time.monotonic() < deadline, "node B never subscribed"
            time.sleep(POLL_S)
        yield gw


def _metrics(gw: GatewayProcess) -> str:
    import httpx

    with httpx.Client(trust_env=False, timeout=5) as http:
        return http.get(f"{gw.http_url}/metrics").text


def test_with_events_node_b_memo_hands_out_the_new_location_within_delivery_plus_2s(
    devstack: Any, node_a: Client, node_b_events: GatewayProcess
) -> None:
    ns, name = devstack.info.namespace, f"ccev_{uuid.uuid4().hex[:10]}"
    old = node_a.create(ns, name, format="lance").base_location.rstrip("/")
    bound = EVENT_DELIVERY_S + EVENTS_CALLER_IDENTITY_TTL_S + ROUND_TRIP_S
    with Client(node_b_events.http_url, warehouse=devstack.info.warehouse.name,
                timeout_s=30) as executor:
        first = executor.credentials(ns, name)
        assert first.location.rstrip("/") == old
        # Not node B's hour: at most the events bound, shorter while the create's own event
        # still has node B confirming again against a possibly lagging catalog (contract §4).
        assert first.identity_ttl_s is not None
        assert 0 < first.identity_ttl_s <= EVENTS_CALLER_IDENTITY_TTL_S
        new = _recreate(node_a, ns, name)
        changed = time.monotonic()
        while (creds := executor.credentials(ns, name)).location.rstrip("/") != new:
            assert time.monotonic() - changed <= bound, "still the old location"
            time.sleep(POLL_S)
        print(f"events: new location after {time.monotonic() - changed:.2f} s (bound {bound} s)")
        assert creds.outcome != "memo"
    node_a.drop(ns, name, purge=True)
