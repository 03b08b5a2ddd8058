"""Host allow-list (issue #28, finding 3): loopback and configured names only, with any port,
over TCP; over the Unix socket any well-formed Host (issue #35 item 7)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import pytest

from gateway.surfaces.hosts import HostAllowList, host_name, well_formed
from tests.unit.app_harness import CREDS, app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations


@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.0.0.1:8765", "127.8.9.10:1", "localhost", "LOCALHOST:8765", "localhost.",
    "[::1]", "[::1]:8765", "lakegate-local.lakegate.svc.cluster.local:8765",
    "Lakegate-Local.lakegate.svc.cluster.local",
])
def test_loopback_and_configured_hosts_are_accepted(host: str) -> None:
    assert HostAllowList(["lakegate-local.lakegate.svc.cluster.local"]).allows(host)


@pytest.mark.parametrize("host", [
    None, "", "rebind.evil.example", "rebind.evil.example:8765", "169.254.169.254",
    "169.254.170.2:80", "10.0.0.5:8765", "0.0.0.0:8765", "127.1", "2130706433", "::1",
    "[::1", "[::1]x", "localhost:http", "localhost:8765:1", "localhost.evil.example",
    "lakegate-local.lakegate.svc.cluster.local.evil.example", "[::ffff:127.0.0.1]",
    "lakegate", "gw",
])
def test_every_other_host_is_refused(host: str | None) -> None:
    hosts = HostAllowList(["lakegate-local.lakegate.svc.cluster.local"])
    assert not hosts.allows(host)
    assert not hosts.allows(host)  # memoized: the same answer


def test_host_name_strips_the_port_and_brackets() -> None:
    assert host_name("[::1]:80") == "::1"
    assert host_name("Example.COM.:443") == "example.com"
    assert host_name("a:b") is None


@pytest.mark.parametrize("host", [
    "lakegate", "localhost", "%2Fvar%2Frun%2Flakegate%2Fhttp.sock", "rebind.evil.example:8765",
    "[::1]:80", "gw",
])
def test_well_formed_hosts(host: str) -> None:
    assert well_formed(host)


@pytest.mark.parametrize("host", [
    None, "", "localhost:http", "a:b:c", "[::1", "[::1]x", "bad host", "tab\there", "é.example",
    "x" * 256,
])
def test_malformed_hosts(host: str | None) -> None:
    assert not well_formed(host)


# ---- over the daemon's listeners (issue #35 item 7) --------------------------------------


async def _raw(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> int:
    writer.write((f"GET {CREDS} HTTP/1.1\r\nHost: {host}\r\nX-Lakegate-Request: 1\r\n"
                  "Connection: close\r\n\r\n").encode())
    await writer.drain()
    async with asyncio.timeout(10):
        data = await reader.read()
    writer.close()
    return int(data.split(b" ", 2)[1])


async def _over_uds(path: Path, host: str) -> int:
    return await _raw(*await asyncio.open_unix_connection(str(path)), host)


async def _over_tcp(port: int, host: str) -> int:
    return await _raw(*await asyncio.open_connection("127.0.0.1", port), host)


async def test_over_the_unix_socket_any_well_formed_host_is_accepted(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    """Clients of the previous release keep working after a gateway upgrade: the previous
    `lakegate_client` sends `Host: lakegate` over the UDS, `requests-unixsocket` the
    percent-encoded socket path. No browser reaches a Unix socket, so DNS rebinding cannot."""
    sock = tmp_path / "http.sock"
    async with running(app_for(settings_for(tmp_path), fake_ops)) as app:
        assert await _over_uds(sock, "lakegate") == 200
        assert await _over_uds(sock, quote(str(sock), safe="")) == 200
        assert await _over_uds(sock, "localhost") == 200
        assert await _over_uds(sock, "localhost:http") == 403  # not a Host at all
        # Over TCP the rule stays: a rebound page's name is refused.
        assert await _over_tcp(app.http_port, "lakegate") == 403
        assert await _over_tcp(app.http_port, "rebind.evil.example:8765") == 403
        assert await _over_tcp(app.http_port, "localhost") == 200
