"""Run INSIDE a clean client venv (tests/deploy/client_min_deps.py) against a real gateway.

argv: install ("core" or "grpc"), gateway URL, warehouse, namespace. Creates a table, gets its
credentials twice (the second from the memo), lists it and drops it, then prints one JSON line:
the runtime versions installed, the modules loaded and what the calls returned. Exits non-zero
on any failure. Stdlib + the client only: nothing of the test suite exists in this venv.
"""

from __future__ import annotations

import json
import sys
import uuid
from importlib import metadata

import lakegate_client


def _installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def main(install: str, url: str, warehouse: str, namespace: str) -> int:
    name = f"min_{install}_{uuid.uuid4().hex[:8]}"
    with lakegate_client.Client(url=url, warehouse=warehouse, timeout_s=20) as client:
        created = client.create(namespace, name, format="parquet")
        first = client.credentials(namespace, name)
        again = client.credentials(namespace, name)
        listed = [t.name for t in client.list(namespace)]
        client.drop(namespace, name)
    loaded = {k for k, m in sys.modules.items() if m is not None}
    print(json.dumps({
        "install": install,
        "client_file": lakegate_client.__file__,
        "versions": {d: _installed(d) for d in ("protobuf", "grpcio", "httpx")},
        "grpc_loaded": "grpc" in loaded,
        "protobuf_loaded": "google.protobuf" in loaded,
        "location": created.base_location,
        "storage": first.storage,
        "outcomes": [first.outcome, again.outcome],
        "listed": name in listed,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
