"""Expiry of a vended credential, read from its own config keys (all epoch milliseconds).

Lakekeeper writes `s3.session-token-expires-at-ms` and `expiration-time` for S3,
`adls.sas-token-expires-at-ms.<account>` for ADLS and `gcs.oauth2.token-expires-at` for GCS
(crates/iceberg-ext/src/configs/table.rs). The earliest parseable one wins: a set is only as
good as its first credential to expire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.models import EXPIRY_KEY_PREFIXES, EXPIRY_KEYS, CredentialSet, StorageCredential

# Epoch ms outside this range is not an expiry but garbage (or seconds sent by mistake).
_MIN_PLAUSIBLE_MS = 946_684_800_000  # 2000-01-01
_MAX_PLAUSIBLE_MS = 32_503_680_000_000  # 3000-01-01


def is_expiry_key(key: str) -> bool:
    """Whether `key` is one of the credential expiry keys (dropped from a load's `config`)."""
    return key in EXPIRY_KEYS or key.startswith(EXPIRY_KEY_PREFIXES)


def _parse_ms(value: str) -> int | None:
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        return None
    ms = int(text)
    if not _MIN_PLAUSIBLE_MS <= ms <= _MAX_PLAUSIBLE_MS:
        return None
    return ms


def parse_expiry_ms(config: Mapping[str, str]) -> int | None:
    """The earliest expiry (epoch ms) among the expiry keys of one credential config.

    Returns:
        None when no expiry key holds a plausible epoch-ms integer.
    """
    found = [
        ms
        for key, value in config.items()
        if is_expiry_key(key) and isinstance(value, str) and (ms := _parse_ms(value)) is not None
    ]
    return min(found) if found else None


def earliest(values: Iterable[int | None]) -> int | None:
    """The earliest of the known expiries (None when none is known)."""
    known = [v for v in values if v is not None]
    return min(known) if known else None


def credential_set(credentials: Iterable[StorageCredential], location: str = "", *,
                   server_date_s: float | None = None) -> CredentialSet:
    """Build a CredentialSet whose expiry is the earliest of its credentials.

    A credential without a parseable expiry next to ones with an expiry does not make the set
    unbounded: the known expiries still bound it.
    """
    creds = tuple(credentials)
    return CredentialSet(
        credentials=creds,
        expires_at_ms=earliest(c.expires_at_ms for c in creds),
        location=location or (creds[0].prefix if creds else ""),
        server_date_s=server_date_s,
    )


def storage_credential(prefix: str, config: Mapping[str, str]) -> StorageCredential:
    """A StorageCredential with its expiry parsed from its config."""
    return StorageCredential(
        prefix=prefix, config=dict(config), expires_at_ms=parse_expiry_ms(config)
    )
