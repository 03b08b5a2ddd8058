"""Lakekeeper's list page tokens: URL-safe base64 (no padding) of `1&<created_at micros>&<uuid>`.

The emulator accepts only tokens of that shape; anything else is a 400 `InvalidPaginationToken`
(`InvalidPaginationToken` in lakekeeper-storage-postgres `pagination.rs`; the namespace list
answers exactly that. The generic-table list wraps it as an unexpected backend error, 5xx; the
emulator deliberately never answers 5xx for bad input).

Page sizes (`config.rs` `page_size_or_pagination_*`, `server/mod.rs` `fetch_until_full_page`):
always clamped to [1, 1000]. Generic tables default to 100. Namespaces default to 1000 without
a `pageToken` and 100 with one, and a partial namespace page carries no next token.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from devstack.emulator.errors import ApiError

PAGE_SIZE_DEFAULT = 100
PAGE_SIZE_MAX = 1000


@dataclass(frozen=True, order=True)
class Cursor:
    """Position after the last row of a page, in (created_at, id) order."""

    created_at_us: int
    id: str


class Positioned(Protocol):
    """A listed row: its place in (created_at, id) order."""

    @property
    def created_at_us(self) -> int: ...

    @property
    def id(self) -> str: ...


def encode_token(cursor: Cursor) -> str:
    raw = f"1&{cursor.created_at_us}&{cursor.id}".encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def next_page(rows: Sequence[Positioned]) -> dict[str, str]:
    """`{"next-page-token": <after the last row>}`, or `{}` for an empty page.

    Lakekeeper's table lists emit a token whenever the page had a row, even on the last page.
    """
    if not rows:
        return {}
    return {"next-page-token": encode_token(Cursor(rows[-1].created_at_us, rows[-1].id))}


def decode_token(token: str) -> Cursor:
    """Parse a page token, raising 400 InvalidPaginationToken if it is not one of ours."""
    bad = ApiError(400, "InvalidPaginationToken", "Invalid pagination token")
    try:
        padded = token + "=" * (-len(token) % 4)
        raw = base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError) as exc:
        raise bad from exc
    parts = raw.split("&")
    if len(parts) != 3 or parts[0] != "1":
        raise bad
    try:
        created = int(parts[1])
        ident = str(uuid.UUID(parts[2]))
    except ValueError as exc:
        raise bad from exc
    return Cursor(created_at_us=created, id=ident)


def clamp_page_size(raw: str | None, default: int = PAGE_SIZE_DEFAULT) -> int:
    """`pageSize` clamped to [1, 1000]; `default` when absent.

    A non-integer value is an axum query rejection in Lakekeeper (plain-text 400); callers
    check that before calling this.
    """
    if raw is None or raw == "":
        return default
    return max(1, min(PAGE_SIZE_MAX, int(raw)))
