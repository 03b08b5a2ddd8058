"""Azure service SAS signing (account-key HMAC-SHA256), as Lakekeeper mints for ADLS.

Lakekeeper signs a directory SAS (`sr=d`, `sdd` = depth of the table path) with a
user-delegation key or, for a `shared-access-key` credential, the account key. Azurite enforces
container and blob SAS but refuses directory SAS, so the emulator can sign both: `sr=d` (what
Lakekeeper vends, enforced by devstack/adls_guard.py in front of Azurite) and `sr=c` (a
container SAS Azurite enforces itself).
String-to-sign of service version 2020-12-06 and later (signed encryption scope included).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

SAS_VERSION = "2022-11-02"
# Azurite's development account (https://learn.microsoft.com/azure/storage/common/storage-use-azurite).
DEV_ACCOUNT = "devstoreaccount1"
DEV_ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
READ_PERMISSIONS = "rl"  # Lakekeeper: read = r,l
WRITE_PERMISSIONS = "rawdl"  # Lakekeeper: read-write-delete = r,w,a,l,d (SAS order: racwdl)

Resource = Literal["c", "d"]


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SasRequest:
    """What one SAS grants: `path` is the directory inside the container (`sr=d` only)."""

    account: str
    container: str
    permissions: str
    start: dt.datetime
    expiry: dt.datetime
    resource: Resource = "c"
    path: str = ""
    protocol: str = "https,http"
    version: str = SAS_VERSION

    @property
    def canonical_resource(self) -> str:
        base = f"/blob/{self.account}/{self.container}"
        if self.resource == "d":
            return f"{base}/{self.path.strip('/')}"
        return base

    @property
    def depth(self) -> int:
        """`sdd`: the number of path segments of the directory."""
        stripped = self.path.strip("/")
        return len(stripped.split("/")) if stripped else 0

    def string_to_sign(self) -> str:
        fields = [
            self.permissions,
            _iso(self.start),
            _iso(self.expiry),
            self.canonical_resource,
            "",  # signed identifier (stored access policy)
            "",  # signed IP
            self.protocol,
            self.version,
            self.resource,
            "",  # snapshot time
            "",  # encryption scope
            "", "", "", "", "",  # rscc, rscd, rsce, rscl, rsct
        ]  # fmt: skip
        return "\n".join(fields)


def sign(request: SasRequest, account_key_b64: str) -> str:
    """The SAS token (query string without a leading `?`, as Lakekeeper vends it)."""
    digest = hmac.new(
        base64.b64decode(account_key_b64),
        request.string_to_sign().encode("utf-8"),
        hashlib.sha256,
    ).digest()
    params = [
        ("sv", request.version),
        ("st", _iso(request.start)),
        ("se", _iso(request.expiry)),
        ("sr", request.resource),
        ("sp", request.permissions),
        ("spr", request.protocol),
    ]
    if request.resource == "d":
        params.append(("sdd", str(request.depth)))
    params.append(("sig", base64.b64encode(digest).decode()))
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in params)


def account_sas(
    account: str, account_key_b64: str, *, permissions: str, resource_types: str,
    start: dt.datetime, expiry: dt.datetime, version: str = SAS_VERSION,
) -> str:  # fmt: skip
    """An account SAS for the blob service (the local stack's admin: it creates containers)."""
    fields = [
        account, permissions, "b", resource_types, _iso(start), _iso(expiry), "", "https,http",
        version, "", "",
    ]  # fmt: skip
    digest = hmac.new(
        base64.b64decode(account_key_b64), "\n".join(fields).encode("utf-8"), hashlib.sha256
    ).digest()
    params = [
        ("sv", version), ("ss", "b"), ("srt", resource_types), ("sp", permissions),
        ("st", _iso(start)), ("se", _iso(expiry)), ("spr", "https,http"),
        ("sig", base64.b64encode(digest).decode()),
    ]  # fmt: skip
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in params)
