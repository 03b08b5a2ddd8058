"""Raw TCP byte exchanges with a real server on 127.0.0.1, every wait bounded.

Why raw: these tests speak below HTTP (a fault proxy, a malformed request line), where no
client library would send what they need to send.
"""

from __future__ import annotations

import asyncio

import pytest


async def exchange(
    port: int, payload: bytes, *, exactly: int | None = None, timeout_s: float = 5.0
) -> bytes:
    """Send `payload` on a new connection and return the first answer bytes (up to 64, or
    `exactly` that many)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        async with asyncio.timeout(timeout_s):
            if exactly is not None:
                return await reader.readexactly(exactly)
            return await reader.read(64)
    finally:
        writer.close()


async def open_echoed(
    port: int, first: bytes, timeout_s: float = 5.0
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a connection through an echo path and prove it carries `first` both ways."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    async with asyncio.timeout(timeout_s):
        assert await reader.readexactly(len(first)) == first
    return reader, writer


async def assert_silent(reader: asyncio.StreamReader, for_s: float = 0.3) -> None:
    """Nothing arrives within `for_s` (not a timing measurement: the fault holds bytes for
    far longer than this)."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(for_s):
            await reader.read(1)
