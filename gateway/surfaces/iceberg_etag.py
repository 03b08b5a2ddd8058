"""The gateway's own ETag on a vended Iceberg `loadTable`, and when it may answer 304.

Iceberg Java (1.10+, `RESTTableCache`) revalidates a table it holds with `If-None-Match`; the
catalog's tag covers only its client-managed body, while the gateway merges in the caller's
cached credential. So the gateway tags the merged body itself, as Lakekeeper tags its vended
loads: the tag names the catalog's tag, the access mode and the credential set (its expiry),
and a 304 is answered only while

- the catalog answers 304 to its own tag (the metadata did not change),
- the credential the caller holds is still the one the cache serves (same expiry, same mode),
- and that credential has more than half of the life left it had when the tag was issued, and
  the tag is under an hour old (Lakekeeper's `revalidate-after`: half the remaining credential
  life, capped at 1 h), so a client never keeps revalidating onto an expiring credential.

The tag carries no secret: only the catalog's tag, the mode, the expiry and two durations.
Every measure comes from the cache's answer (`CredentialLookup.remaining_s`), so this module
reads no clock and is a pure function of its inputs.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from gateway.models import AccessMode, CredentialLookup

_PREFIX = "lg1."
MAX_AGE_S = 3600.0
_MODES = {m.value: m for m in AccessMode}


@dataclass(frozen=True)
class LoadTag:
    """What a gateway load tag says: the catalog's tag and the credential it was served with."""

    upstream: str
    access: AccessMode
    expires_at_ms: int | None
    remaining_s: int | None

    def render(self) -> str:
        upstream = base64.urlsafe_b64encode(self.upstream.encode()).decode().rstrip("=")
        expiry = "-" if self.expires_at_ms is None else str(self.expires_at_ms)
        remaining = "-" if self.remaining_s is None else str(self.remaining_s)
        return f'W/"{_PREFIX}{self.access.value}.{expiry}.{remaining}.{upstream}"'


def issue(upstream_tag: str | None, lookup: CredentialLookup) -> LoadTag | None:
    """The tag of a merged load body (None when the catalog gave no tag to build on)."""
    if not upstream_tag:
        return None
    remaining = None if lookup.remaining_s is None else max(0, int(lookup.remaining_s))
    return LoadTag(upstream_tag, lookup.access, lookup.credentials.expires_at_ms, remaining)


def _int_or_none(text: str) -> int | None:
    return None if text == "-" else int(text)


def parse(header: str | None) -> LoadTag | None:
    """The gateway tag in an `If-None-Match` value (None for anything else: the catalog's own
    tags, `*`, a list, garbage; each of those simply gets a full load)."""
    if not header:
        return None
    text = header.strip()
    if not (text.startswith(f'W/"{_PREFIX}') and text.endswith('"')):
        return None
    parts = text[len('W/"') + len(_PREFIX):-1].split(".", 3)
    if len(parts) != 4 or parts[0] not in _MODES:
        return None
    try:
        expiry, remaining = _int_or_none(parts[1]), _int_or_none(parts[2])
        pad = "=" * (-len(parts[3]) % 4)
        upstream = base64.urlsafe_b64decode(parts[3] + pad).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not upstream or any(c in upstream for c in "\r\n"):
        return None
    return LoadTag(upstream, _MODES[parts[0]], expiry, remaining)


def still_valid(tag: LoadTag, lookup: CredentialLookup) -> bool:
    """Whether a client holding `tag` still holds what the cache serves now, fresh enough for a
    304 (the rules of the module docstring; the catalog's 304 is checked by the caller)."""
    if tag.access is not lookup.access or tag.expires_at_ms != lookup.credentials.expires_at_ms:
        return False
    if tag.remaining_s is None or lookup.remaining_s is None:
        # No expiring credential in the answer: the catalog's 304 alone decides.
        return tag.remaining_s is None and lookup.remaining_s is None
    now = lookup.remaining_s
    return now > tag.remaining_s / 2 and tag.remaining_s - now < MAX_AGE_S
