"""Peers and failed-authentication limits (issue #28, finding 7)."""

from __future__ import annotations

import os
import socket

import pytest

from gateway.errors import RateLimitedCallerError
from gateway.metrics import Metrics
from gateway.models import CallerIdentity
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.peers import AuthFailureLimiter, Peer, socket_peer
from tests.fakes.clock import FakeClock
from tests.unit.surfaces.conftest import MakeClient

CREDS = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials"


def test_a_unix_peer_is_its_uid_and_pid() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        peer = socket_peer(a, a.getpeername())
    finally:
        a.close()
        b.close()
    assert peer == Peer(f"uid:{os.getuid()}", f"uid:{os.getuid()}/pid:{os.getpid()}")


def test_a_tcp_peer_is_the_connection() -> None:
    assert socket_peer(None, ("127.0.0.1", 40000)) == Peer("tcp:127.0.0.1:40000",
                                                           "tcp:127.0.0.1:40000")


def test_a_peer_past_its_burst_is_refused_until_it_regains_a_failure(clock: FakeClock) -> None:
    limiter = AuthFailureLimiter(0.5, 3, clock)
    assert not limiter.active
    for _ in range(3):
        limiter.check("uid:1")
        limiter.failed("uid:1")
    with pytest.raises(RateLimitedCallerError) as info:
        limiter.check("uid:1")
    assert info.value.retry_after_s == pytest.approx(2.0)
    limiter.check("uid:2")  # another peer is not affected
    clock.advance(2.0)
    limiter.check("uid:1")


class CountingAuth(StaticTokenCallerAuth):
    """Counts token verifications: the expensive step a refused peer must not reach."""

    verified = 0

    async def authenticate(self, authorization: str | None) -> CallerIdentity:
        CountingAuth.verified += 1
        return await super().authenticate(authorization)


async def test_bad_tokens_are_limited_before_they_are_verified(
    make_client: MakeClient, metrics: Metrics, clock: FakeClock
) -> None:
    """The issue: 3,000 bad tokens all got 401 (each verified), never 429."""
    CountingAuth.verified = 0
    client = await make_client(auth=CountingAuth({"good-token-123": "alice"}),
                               failures=AuthFailureLimiter(1.0, 5, clock))
    statuses = [(await client.get(CREDS, headers={"Authorization": f"Bearer bad-{i}"})).status
                for i in range(50)]
    assert statuses == [401] * 5 + [429] * 45
    assert CountingAuth.verified == 5
    # The peer is refused whatever it sends now, a good token too, until it regains a failure.
    good = {"Authorization": "Bearer good-token-123"}
    resp = await client.get(CREDS, headers=good)
    assert resp.status == 429
    assert resp.headers["Retry-After"] == "1"
    clock.advance(1.0)
    assert (await client.get(CREDS, headers=good)).status == 200
    assert metrics.registry.get_sample_value(
        "lakegate_ingress_rejected_total", {"reason": "auth_ratelimit"}) == 46


def _uds_get(path: str, target: str, token: str | None = None) -> int:
    """One request on a new UDS connection (http.client, as a separate process would)."""
    import http.client

    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(10)
            self.sock.connect(path)

    conn = Conn("localhost")
    headers = {"X-Lakegate-Request": "1"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn.request("GET", target, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


async def test_over_uds_failures_count_per_uid_across_connections(tmp_path, fake_ops) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from tests.unit.app_harness import app_for, running, settings_for

    tokens = tmp_path / "tokens.yaml"
    tokens.write_text('{"good-token-123": "alice"}')
    settings = settings_for(tmp_path, LAKEGATE__CALLERS__MODE="token",
                            LAKEGATE__CALLERS__TOKENS_FILE=str(tokens),
                            LAKEGATE__CALLERS__AUTH_FAILURES_PER_S="0.001",
                            LAKEGATE__CALLERS__AUTH_FAILURE_BURST="3")
    async with running(app_for(settings, fake_ops)):
        sock = str(tmp_path / "http.sock")
        statuses = [await asyncio.to_thread(_uds_get, sock, CREDS, f"bad-{i}") for i in range(6)]
        assert statuses == [401, 401, 401, 429, 429, 429]  # a new connection each: one uid


_CHILD = """
import http.client, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.settimeout(10)
        self.sock.connect(sys.argv[1])
c = C("localhost"); c.request("GET", sys.argv[2], headers={"X-Lakegate-Request": "1"})
print(c.getresponse().status)
"""


async def test_in_mode_none_each_local_process_has_its_own_bucket(tmp_path, fake_ops) -> None:  # type: ignore[no-untyped-def]
    """The issue: every caller shared one `anonymous` bucket, so one noisy process starved
    the node. Over UDS the bucket is the peer's uid and pid."""
    import asyncio
    import sys

    from tests.unit.app_harness import app_for, running, settings_for

    settings = settings_for(tmp_path, LAKEGATE__CALLERS__RATE_PER_S="0.001",
                            LAKEGATE__CALLERS__BURST="2")
    async with running(app_for(settings, fake_ops)):
        sock = str(tmp_path / "http.sock")
        mine = [await asyncio.to_thread(_uds_get, sock, CREDS) for _ in range(3)]
        assert mine == [200, 200, 429]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CHILD, sock, CREDS, stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        assert out.decode().strip() == "200"  # another process is not starved
