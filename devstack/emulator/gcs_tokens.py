"""The emulator's GCS access tokens: what Lakekeeper's downscoped STS token grants, checkable.

Lakekeeper exchanges its service account's token at Google STS for a token bounded to the
bucket, with a CEL condition on the table's prefix and a role (objectViewer, +objectCreator,
objectUser). Google's tokens are opaque; these are too, to a client. The local store's
token-checking layer (devstack/gcs_guard.py) verifies them with the same key: HMAC-SHA256 over
(bucket, prefix, role, expiry), keyed by a digest of the warehouse's service-account key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Literal

TOKEN_PREFIX = "ya29.lkg."  # noqa: S105 - a marker, not a secret
Role = Literal["read", "write"]


def signing_key(service_account_private_key: str) -> bytes:
    """The HMAC key both sides derive from the service account's private key."""
    return hashlib.sha256(b"lakegate-gcs-token\0" + service_account_private_key.encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class TokenGrant:
    """What one token allows: objects of `bucket` under `prefix/`, with `role`, until expiry."""

    bucket: str
    prefix: str
    role: Role
    expires_at_ms: int


def mint(grant: TokenGrant, key: bytes) -> str:
    """An opaque bearer token carrying `grant` (a fresh nonce each time)."""
    body = json.dumps(
        {"b": grant.bucket, "p": grant.prefix, "r": grant.role, "e": grant.expires_at_ms,
         "n": secrets.token_hex(8)},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    mac = hmac.new(key, body, hashlib.sha256).digest()
    return f"{TOKEN_PREFIX}{_b64(body)}.{_b64(mac)}"


def verify(token: str, key: bytes) -> TokenGrant | None:
    """The grant of a token this key signed, or None (not ours, tampered, malformed).

    Expiry is not checked here: the caller compares it with its clock.
    """
    if not token.startswith(TOKEN_PREFIX):
        return None
    body_text, _, mac_text = token[len(TOKEN_PREFIX) :].partition(".")
    try:
        body, mac = _unb64(body_text), _unb64(mac_text)
        if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).digest()):
            return None
        data = json.loads(body)
        role = data["r"]
        if role not in ("read", "write"):
            return None
        return TokenGrant(str(data["b"]), str(data["p"]), role, int(data["e"]))
    except (ValueError, KeyError, TypeError):
        return None
