"""Host allow-list (issue #28, finding 3): loopback and configured names only, with any port."""

from __future__ import annotations

import pytest

from gateway.surfaces.hosts import HostAllowList, host_name


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
