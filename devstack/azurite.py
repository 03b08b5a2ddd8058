"""Azurite (npm `azurite`, pinned in devstack/azurite/package-lock.json): the stack's ADLS store.

Only the blob service runs, in memory, on a free loopback port. `--skipApiVersionCheck`: current
Azure SDKs (azure-storage-blob, adlfs, pyarrow) send a newer API version than Azurite knows.
Azurite's development account (`devstoreaccount1` and its well-known key) signs every SAS; the
launcher creates each warehouse's container with an account-key-signed container SAS.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import httpx

from devstack.emulator.sas import DEV_ACCOUNT, DEV_ACCOUNT_KEY, SasRequest, account_sas, sign
from devstack.errors import StartupError

AZURITE_DIR = Path(__file__).resolve().parent / "azurite"
ACCOUNT = DEV_ACCOUNT
ACCOUNT_KEY = DEV_ACCOUNT_KEY
# What Lakekeeper's profile names as `host`: locations read abfss://<fs>@<account>.<host>/...
HOST = "dfs.core.windows.net"
# Bound on blob data held in memory (the default is half the machine, which is shared).
EXTENT_MEMORY_LIMIT_MB = 1024


def azurite_script() -> Path:
    """The blob service's entry point in the npm install; fails early if it is missing."""
    script = AZURITE_DIR / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if not script.exists():
        raise FileNotFoundError(f"run `make azurite` (npm ci in {AZURITE_DIR})")
    return script


def azurite_argv(port: int) -> list[str]:
    """argv of the blob service: in memory, loopback, no telemetry, any client API version.

    Run it with the run directory as cwd: `--location` cannot go with `--inMemoryPersistence`.
    """
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node not found (Node 20 is required for Azurite)")
    return [
        node,
        str(azurite_script()),
        "--inMemoryPersistence",
        "--disableTelemetry",
        "--skipApiVersionCheck",
        "--extentMemoryLimit",
        str(EXTENT_MEMORY_LIMIT_MB),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
    ]


def blob_endpoint(port: int) -> str:
    """The account's blob endpoint (path-style, as Azurite serves the development account)."""
    return f"http://127.0.0.1:{port}/{ACCOUNT}"


def _admin_sas(container: str, permissions: str) -> str:
    now = dt.datetime.now(dt.UTC)
    request = SasRequest(
        ACCOUNT, container, permissions, now - dt.timedelta(minutes=5), now + dt.timedelta(hours=1)
    )
    return sign(request, ACCOUNT_KEY)


def owner_sas(container: str) -> str:
    """A container SAS with every blob permission, signed with the account key: the storage
    owner's view (audits list and read what no vended credential may)."""
    return _admin_sas(container, "racwdl")


def create_container(endpoint: str, container: str, timeout_s: float = 5.0) -> None:
    """Create `container` with an account SAS of the development account (idempotent).

    Raises:
        StartupError: Azurite answered neither 201 (created) nor 409 (exists).
    """
    now = dt.datetime.now(dt.UTC)
    sas = account_sas(
        ACCOUNT, ACCOUNT_KEY, permissions="rwdlac", resource_types="sco",
        start=now - dt.timedelta(minutes=5), expiry=now + dt.timedelta(hours=1),
    )  # fmt: skip
    answer = httpx.put(
        f"{endpoint}/{container}?restype=container&{sas}", timeout=timeout_s, trust_env=False
    )
    if answer.status_code not in (201, 409):
        raise StartupError(f"Azurite refused to create container {container}: {answer.status_code}")


def azurite_ready(endpoint: str, container: str) -> bool:
    """True once the container lists with an account-key SAS (Azurite up, container made)."""
    sas = _admin_sas(container, "rl")
    url = f"{endpoint}/{container}?restype=container&comp=list&maxresults=1&{sas}"
    try:
        answer = httpx.get(url, timeout=1.0, trust_env=False)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200
