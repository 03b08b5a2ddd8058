"""Lakekeeper's error envelope and the emulator's typed API errors.

Envelope (iceberg-ext `ErrorModel`): {"error": {"message", "type", "code", "stack"}} where the last
`stack` line is always "Error ID: <uuid v7>"; for 5xx the stack holds only that line.
axum extractor rejections are plain text in Lakekeeper; `PlainRejection` reproduces them.
"""

from __future__ import annotations

import random
import time
import uuid


def uuid7() -> uuid.UUID:
    """A UUID version 7 (time-ordered), as Lakekeeper uses for request and error ids.

    The random bits come from `random`, not `os.urandom`: ids are not secrets, and the
    getrandom syscall was measurable on the hot path here.
    """
    ms = time.time_ns() // 1_000_000
    rand = random.getrandbits(80)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return uuid.UUID(int=value)


class ApiError(Exception):
    """An error rendered in Lakekeeper's envelope with `status` as both HTTP status and `code`."""

    def __init__(
        self,
        status: int,
        error_type: str,
        message: str,
        *,
        detail: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.detail = detail or []
        self.headers = headers or {}


class PlainRejection(Exception):
    """An axum-style plain-text rejection (400/413/415/422 before the handler runs)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def envelope(
    status: int, error_type: str, message: str, detail: list[str] | None = None
) -> dict[str, object]:
    """The JSON body of an error response."""
    error_id = f"Error ID: {uuid7()}"
    stack = [error_id] if status >= 500 else [*(detail or []), error_id]
    return {"error": {"message": message, "type": error_type, "code": status, "stack": stack}}


def not_found_table() -> ApiError:
    return ApiError(404, "NoSuchGenericTableException", "Generic table does not exist")


def not_found_namespace() -> ApiError:
    return ApiError(404, "NoSuchNamespaceException", "Namespace does not exist")


def not_found_warehouse(detail: str = "Warehouse does not exist") -> ApiError:
    return ApiError(404, "NoSuchWarehouseException", detail)
