"""The memo's identity rule (_facade.CredentialsCall, _memo.py) over every transport, against the
fake gateway (fake_gateway_server.py): a table replaced behind the client's back is served from
the memo no longer than the gateway's stated ``identity_ttl_s`` (a short default when it states
none), an ``expected_location`` served from the memo included. A fake clock moves the memo's time;
the fake gateway's credentials live one hour of real time, so the clock starts at real time.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from lakegate_client import AsyncClient, Client, TableIdentityMismatchError
from lakegate_client._memo import DEFAULT_IDENTITY_TTL_S

FORMS = ["http", "http+uds", "grpc", "grpc+uds"]
IDENTITY_TTL_S = 600.0  # what fake_gateway_server.py states (IDENTITY_TTL_S there)


@pytest.fixture(params=FORMS)
def url(request: pytest.FixtureRequest, fake_gateway: Any) -> str:
    return fake_gateway.urls[request.param]  # type: ignore[no-any-return]


@pytest.fixture
def clock(fake_clock: Any) -> Any:
    """conftest's fake clock, at real time (the fake gateway's expiries are)."""
    fake_clock.t = time.time()
    return fake_clock


def table(prefix: str = "t") -> str:
    """A table name of this test alone (the fake gateway is shared by the session)."""
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def test_the_gateways_identity_ttl_reaches_the_caller(url: str) -> None:
    with Client(url, warehouse="demo", timeout_s=5, memo=False) as client:
        assert client.credentials("ns", table()).identity_ttl_s == IDENTITY_TTL_S
        assert client.credentials("ns", table("legacy")).identity_ttl_s is None


def test_a_replaced_table_is_served_new_once_the_stated_ttl_passes(
    url: str, fake_gateway: Any, clock: Any
) -> None:
    name = table()
    with Client(url, warehouse="demo", timeout_s=5, clock=clock) as client:
        old = client.credentials("ns", name)
        fake_gateway.replace(name)  # through another node: this process hears nothing
        clock.advance(IDENTITY_TTL_S - 1)
        early = client.credentials("ns", name)
        assert (early.outcome, early.location) == ("memo", old.location)  # within the bound
        clock.advance(1)
        new = client.credentials("ns", name)
        assert new.outcome != "memo"
        assert new.location == f"{old.location}-v1"
        assert client.credentials("ns", name).outcome == "memo"


def test_a_task_planned_against_the_replaced_table_gets_409_once_the_ttl_passes(
    url: str, fake_gateway: Any, clock: Any
) -> None:
    name = table()
    with Client(url, warehouse="demo", timeout_s=5, clock=clock) as client:
        planned = client.credentials("ns", name).location  # the driver's plan
        assert client.credentials("ns", name, expected_location=planned).outcome == "memo"
        fake_gateway.replace(name)
        clock.advance(IDENTITY_TTL_S)
        with pytest.raises(TableIdentityMismatchError):
            client.credentials("ns", name, expected_location=planned)


def test_an_older_gateway_that_states_no_ttl_is_asked_again_after_the_default(
    url: str, fake_gateway: Any, clock: Any
) -> None:
    name = table("legacy")
    with Client(url, warehouse="demo", timeout_s=5, clock=clock) as client:
        old = client.credentials("ns", name)
        fake_gateway.replace(name)
        clock.advance(DEFAULT_IDENTITY_TTL_S)
        assert client.credentials("ns", name).location == f"{old.location}-v1"


async def test_the_async_client_follows_the_same_bound(
    url: str, fake_gateway: Any, clock: Any
) -> None:
    name = table()
    async with AsyncClient(url, warehouse="demo", timeout_s=5, clock=clock) as client:
        old = await client.credentials("ns", name)
        fake_gateway.replace(name)
        clock.advance(IDENTITY_TTL_S - 1)
        assert (await client.credentials("ns", name)).location == old.location
        clock.advance(1)
        assert (await client.credentials("ns", name)).location == f"{old.location}-v1"
