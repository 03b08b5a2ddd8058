"""Lazy table listings: a namespace's tables, one page fetched only when iteration needs it.

Why lazy: a namespace can hold many thousands of tables; a caller looking for one name, or
streaming names into another system, should not wait for (or hold) every page first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Any

from lakegate_client._errors import LakegateError
from lakegate_client._models import TableIdentifier
from lakegate_client._ops import Page

__all__ = ["AsyncTablePager", "TablePager"]

MAX_PAGES = 10_000  # a misbehaving gateway that never ends a listing must not loop forever


def _endless() -> LakegateError:
    return LakegateError("the gateway's table listing did not end", type="ProtocolError")


class TablePager:
    """Iterates a namespace's tables; each ``iter()`` starts a fresh listing."""

    def __init__(self, fetch: Callable[[str | None], Page]) -> None:
        self._fetch = fetch

    def pages(self) -> Iterator[list[TableIdentifier]]:
        """Page by page, as the gateway returns them."""
        token: str | None = None
        for _ in range(MAX_PAGES):
            page, token = self._fetch(token)
            yield page
            if not token:
                return
        raise _endless()

    def __iter__(self) -> Iterator[TableIdentifier]:
        for page in self.pages():
            yield from page


class AsyncTablePager:
    """``async for`` over a namespace's tables; ``await pager`` collects them all into a list."""

    def __init__(self, fetch: Callable[[str | None], Awaitable[Page]]) -> None:
        self._fetch = fetch

    async def pages(self) -> AsyncIterator[list[TableIdentifier]]:
        """Page by page, as the gateway returns them."""
        token: str | None = None
        for _ in range(MAX_PAGES):
            page, token = await self._fetch(token)
            yield page
            if not token:
                return
        raise _endless()

    async def __aiter__(self) -> AsyncIterator[TableIdentifier]:
        async for page in self.pages():
            for item in page:
                yield item

    async def _collect(self) -> list[TableIdentifier]:
        return [item async for item in self]

    def __await__(self) -> Generator[Any, None, list[TableIdentifier]]:
        return self._collect().__await__()
