"""Peers and failed-authentication limits (issue #28, finding 7; issue #35, finding 2)."""

from __future__ import annotations

import os
import socket

import pytest

from gateway.errors import RateLimitedCallerError
from gateway.metrics import Metrics
from gateway.models import CallerIdentity
from gateway.surfaces.callers import StaticTokenCallerAuth
from gateway.surfaces.peers import AuthFailures, Peer, credential_key, grpc_peer_key, socket_peer
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


def test_a_tcp_peer_fails_by_its_address_and_is_anonymous_by_its_connection() -> None:
    """Issue #35: the failure bucket was the connection, so reconnecting escaped the limit;
    issue 50: the anonymous caller's bucket was the address, so every local process (all on
    127.0.0.1) shared one (docs/contracts.md: per connection)."""
    a, b = socket_peer(None, ("127.0.0.1", 40000)), socket_peer(None, ("127.0.0.1", 40001))
    assert a.auth_key == b.auth_key == "tcp:127.0.0.1"
    assert (a.caller_key, b.caller_key) == ("tcp:127.0.0.1:40000", "tcp:127.0.0.1:40001")


@pytest.mark.parametrize(("peer", "key"), [
    ("ipv4:127.0.0.1:5555", "ipv4:127.0.0.1"),
    ("ipv6:[::1]:5555", "ipv6:[::1]"),
    ("unix:", "unix"),
    ("unix:/run/lakegate/grpc.sock", "unix"),
    ("", "unknown"),
])
def test_a_grpc_peer_is_its_address_without_the_port(peer: str, key: str) -> None:
    assert grpc_peer_key(peer) == key


def test_a_credential_past_its_burst_is_refused_until_it_regains_a_failure(
        clock: FakeClock) -> None:
    failures = AuthFailures(0.5, 3, clock)
    assert not failures.active
    bad, other = credential_key("bad-token"), credential_key("other-token")
    assert "bad-token" not in bad  # a digest, never the token
    for _ in range(3):
        failures.check_credential(bad)
        failures.failed(bad, "uid:1")
    with pytest.raises(RateLimitedCallerError) as info:
        failures.check_credential(bad)
    assert info.value.retry_after_s == pytest.approx(2.0)
    failures.check_credential(other)  # another credential is not affected, on the same peer
    assert failures.peer_wait_s("uid:1") == pytest.approx(2.0)
    assert failures.peer_wait_s("uid:2") == 0
    clock.advance(2.0)
    failures.check_credential(bad)
    failures.failed(bad, None)
    failures.forget_credentials()  # a reload: the token may be valid now
    failures.check_credential(bad)


async def test_a_refusal_is_held_at_most_delay_s_and_only_so_many_at_once(
        clock: FakeClock) -> None:
    """Issue #35: answered at once, one process's refusals paced by the event loop doubled a
    neighbour's p99; held, the flood runs at the pace of its connections."""
    import asyncio

    failures = AuthFailures(1.0, 1, clock, delay_s=0.5, max_delayed=1)
    held = asyncio.create_task(failures.hold(30.0))
    await asyncio.sleep(0)
    assert clock.sleepers == 1
    await asyncio.wait_for(failures.hold(30.0), 1)  # past max_delayed: answered at once
    await asyncio.wait_for(failures.hold(0.0), 1)  # nothing to wait for
    clock.advance(0.5)
    await asyncio.wait_for(held, 1)


class CountingAuth(StaticTokenCallerAuth):
    """Counts token verifications: the expensive step a refused peer must not reach."""

    verified = 0

    async def authenticate(self, authorization: str | None) -> CallerIdentity:
        CountingAuth.verified += 1
        return await super().authenticate(authorization)


async def test_a_failing_credential_is_refused_before_it_is_verified_again(
    make_client: MakeClient, metrics: Metrics, clock: FakeClock
) -> None:
    """Issue #28: 3,000 bad tokens all got 401, each verified. The same bad token is refused
    (429) once it has used up its failures, without another verification."""
    CountingAuth.verified = 0
    client = await make_client(auth=CountingAuth({"good-token-123": "alice"}),
                               failures=AuthFailures(1.0, 5, clock))
    bad = {"Authorization": "Bearer bad-token"}
    statuses = [(await client.get(CREDS, headers=bad)).status for _ in range(50)]
    assert statuses == [401] * 5 + [429] * 45
    assert CountingAuth.verified == 5
    clock.advance(1.0)
    assert (await client.get(CREDS, headers=bad)).status == 401
    assert metrics.registry.get_sample_value(
        "lakegate_ingress_rejected_total", {"reason": "auth_ratelimit"}) == 45


async def test_a_peers_failures_never_refuse_a_token_that_verifies(
    make_client: MakeClient, metrics: Metrics, clock: FakeClock
) -> None:
    """Issue #35: a neighbour's bad tokens (one peer: a shared uid, address or the gRPC
    socket) gave the valid caller 429. Now the failing requests get 429, the valid one 200."""
    client = await make_client(auth=StaticTokenCallerAuth({"good-token-123": "alice"}),
                               failures=AuthFailures(1.0, 5, clock))
    statuses = [(await client.get(CREDS, headers={"Authorization": f"Bearer bad-{i}"})).status
                for i in range(50)]
    assert statuses == [401] * 5 + [429] * 45  # distinct tokens: the peer's limit answers 429
    good = {"Authorization": "Bearer good-token-123"}
    assert [(await client.get(CREDS, headers=good)).status for _ in range(3)] == [200] * 3
    resp = await client.get(CREDS, headers={"X-Lakegate-Request": "1"})  # no token: limited
    assert resp.status == 429
    assert resp.headers["Retry-After"] == "1"


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
                            LAKEGATE__CALLERS__AUTH_FAILURE_BURST="3",
                            LAKEGATE__CALLERS__AUTH_FAILURE_DELAY_S="0.05")
    async with running(app_for(settings, fake_ops)):
        sock = str(tmp_path / "http.sock")
        statuses = [await asyncio.to_thread(_uds_get, sock, CREDS, f"bad-{i}") for i in range(6)]
        assert statuses == [401, 401, 401, 429, 429, 429]  # a new connection each: one uid
        # ...and the uid's valid caller is not locked out (issue #35: it got 429).
        assert await asyncio.to_thread(_uds_get, sock, CREDS, "good-token-123") == 200


async def test_over_tcp_failures_count_per_address_across_connections(  # type: ignore[no-untyped-def]
        tmp_path, fake_ops) -> None:
    """Issue #35: over TCP the bucket was the connection: 200 bad tokens on new connections,
    0 limited. Now the address is the peer, and its valid caller is still admitted."""
    import asyncio
    import json
    import urllib.error
    import urllib.request

    from tests.unit.app_harness import app_for, running, settings_for

    tokens = tmp_path / "tokens.yaml"
    tokens.write_text('{"good-token-123": "alice"}')
    settings = settings_for(tmp_path, LAKEGATE__CALLERS__MODE="token",
                            LAKEGATE__CALLERS__TOKENS_FILE=str(tokens),
                            LAKEGATE__CALLERS__AUTH_FAILURES_PER_S="0.001",
                            LAKEGATE__CALLERS__AUTH_FAILURE_BURST="3",
                            LAKEGATE__CALLERS__AUTH_FAILURE_DELAY_S="0.05")
    async with running(app_for(settings, fake_ops)):
        port = json.loads((tmp_path / "ports.json").read_text())["http_port"]

        def get(token: str) -> int:  # urllib: one new connection per request
            req = urllib.request.Request(f"http://127.0.0.1:{port}{CREDS}",
                                         headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310
                    return int(resp.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        statuses = [await asyncio.to_thread(get, f"bad-{i}") for i in range(6)]
        assert statuses == [401, 401, 401, 429, 429, 429]
        assert await asyncio.to_thread(get, "good-token-123") == 200


async def test_over_the_grpc_socket_a_neighbours_bad_tokens_do_not_lock_out_a_caller(  # type: ignore[no-untyped-def]
        tmp_path, fake_ops) -> None:
    """Issue #35: every gRPC client on the Unix socket is the peer `unix:`, one bucket: a
    neighbour's bad tokens gave every valid caller RESOURCE_EXHAUSTED."""
    import grpc

    from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc
    from tests.unit.app_harness import app_for, running, settings_for

    tokens = tmp_path / "tokens.yaml"
    tokens.write_text('{"good-token-123": "alice"}')
    settings = settings_for(tmp_path, LAKEGATE__CALLERS__MODE="token",
                            LAKEGATE__CALLERS__TOKENS_FILE=str(tokens),
                            LAKEGATE__CALLERS__AUTH_FAILURES_PER_S="0.001",
                            LAKEGATE__CALLERS__AUTH_FAILURE_BURST="3",
                            LAKEGATE__CALLERS__AUTH_FAILURE_DELAY_S="0.05")
    request = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders"))
    async with running(app_for(settings, fake_ops)):
        codes = []
        for i in range(6):  # the neighbour, on its own channels
            async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as ch:
                try:
                    await credentials_pb2_grpc.CredentialServiceStub(ch).GetTableCredentials(
                        request, metadata=(("authorization", f"Bearer bad-{i}"),), timeout=10)
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
        assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 3 + [
            grpc.StatusCode.RESOURCE_EXHAUSTED] * 3
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as ch:
            resp = await credentials_pb2_grpc.CredentialServiceStub(ch).GetTableCredentials(
                request, metadata=(("authorization", "Bearer good-token-123"),), timeout=10)
        assert resp.warehouse_id


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


async def test_in_mode_none_each_tcp_connection_has_its_own_bucket(tmp_path, fake_ops) -> None:  # type: ignore[no-untyped-def]
    """Issue 50 item 7: every local process connects from 127.0.0.1, so the address bucket
    was one bucket for every TCP client of the node; the contract says per connection."""
    import asyncio
    import http.client
    import json

    from tests.unit.app_harness import app_for, running, settings_for

    settings = settings_for(tmp_path, LAKEGATE__CALLERS__RATE_PER_S="0.001",
                            LAKEGATE__CALLERS__BURST="2")
    async with running(app_for(settings, fake_ops)):
        port = json.loads((tmp_path / "ports.json").read_text())["http_port"]

        def statuses(n: int) -> list[int]:  # n requests on one keep-alive connection
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                out = []
                for _ in range(n):
                    conn.request("GET", CREDS, headers={"X-Lakegate-Request": "1"})
                    resp = conn.getresponse()
                    resp.read()
                    out.append(resp.status)
                return out
            finally:
                conn.close()

        assert await asyncio.to_thread(statuses, 3) == [200, 200, 429]
        assert await asyncio.to_thread(statuses, 1) == [200]  # a neighbour is not starved


async def test_in_mode_none_each_grpc_tcp_connection_has_its_own_bucket(  # type: ignore[no-untyped-def]
        tmp_path, fake_ops) -> None:
    """Issue 50 item 7, gRPC over TCP: the peer was `ipv4:127.0.0.1` for every channel."""
    import grpc

    from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc
    from tests.unit.app_harness import app_for, running, settings_for

    settings = settings_for(tmp_path, LAKEGATE__CALLERS__RATE_PER_S="0.001",
                            LAKEGATE__CALLERS__BURST="2")
    request = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders"))
    async with running(app_for(settings, fake_ops)) as app:
        async def codes(n: int) -> list[grpc.StatusCode]:  # n calls on one channel
            out = []
            # A channel of its own connection: gRPC shares subchannels (TCP connections)
            # between a process's channels by default, so a second channel could ride the
            # first one's connection, and so its bucket.
            async with grpc.aio.insecure_channel(
                    f"127.0.0.1:{app.grpc_port}",
                    options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
                stub = credentials_pb2_grpc.CredentialServiceStub(ch)
                for _ in range(n):
                    try:
                        await stub.GetTableCredentials(request, timeout=10)
                        out.append(grpc.StatusCode.OK)
                    except grpc.aio.AioRpcError as exc:
                        out.append(exc.code())
            return out

        ok, limited = grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await codes(3) == [ok, ok, limited]
        assert await codes(1) == [ok]  # another connection is not starved
