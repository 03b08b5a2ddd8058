"""Native HTTP API transports: sync over httpx, async over aiohttp (httpx only as a fallback).

Both are created by the client facade once per process (never inherited across a fork) and
talk to ``/v1`` over loopback TCP or a Unix socket. Environment proxies are ignored on purpose:
the gateway is node-local, and an ``HTTP_PROXY`` would send the caller's token off the node.

httpx's async client collapses under high concurrency, so AsyncClient uses aiohttp when it is
installed; the httpx fallback is fine for the low rate an executor asks at.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

import httpx

from lakegate_client import _base
from lakegate_client._auth import CallerAuth
from lakegate_client._base import HttpRequest, TableRef
from lakegate_client._config import ClientConfig
from lakegate_client._errors import GatewayConnectionError, GatewayTimeoutError, LakegateError
from lakegate_client._models import Access, LoadedTable
from lakegate_client._transport import Page
from lakegate_client.credentials import TableCredentials

__all__ = ["AsyncHttpTransport", "SyncHttpTransport"]


def _decode(status: int, body: bytes, where: str) -> Any:
    if status == 204 or not body:
        return None
    try:
        return json.loads(body)
    except ValueError as exc:
        raise LakegateError(
            f"the gateway at {where} answered non-JSON (HTTP {status})", type="ProtocolError"
        ) from exc


@contextlib.contextmanager
def _httpx_errors(where: str) -> Iterator[None]:
    """Translate httpx transport failures into the client's errors, once for sync and async."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise GatewayTimeoutError(f"no answer from the gateway at {where} in time") from exc
    except (httpx.TransportError, OSError) as exc:
        raise GatewayConnectionError(
            f"cannot reach the gateway at {where}: {type(exc).__name__}",
            type="GatewayUnreachable",
        ) from exc

class SyncHttpTransport:
    """Blocking HTTP transport on one ``httpx.Client`` (thread-safe, keep-alive pool)."""

    def __init__(self, config: ClientConfig) -> None:
        endpoint = config.endpoint
        self._where = endpoint.url
        transport = httpx.HTTPTransport(uds=endpoint.uds) if endpoint.uds else httpx.HTTPTransport()
        self._auth = CallerAuth(config)
        self._client = httpx.Client(
            base_url=endpoint.http_base_url,
            transport=transport,
            timeout=httpx.Timeout(config.timeout_s),
            trust_env=False,
        )
        self._pid = os.getpid()

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the httpx client>``."""
        return f"{self._pid}:{id(self._client):x}"

    def _send(self, request: HttpRequest) -> Any:
        with _httpx_errors(self._where):
            response = self._client.request(
                request.method,
                request.path,
                params=dict(request.params) or None,
                json=request.json,
                headers={**self._auth.headers(), **request.headers},
            )
        if response.status_code >= 400:
            raise _base.error_from_http(response.status_code, response.content, response.headers)
        return _decode(response.status_code, response.content, self._where)

    def credentials(self, ref: TableRef, access: Access) -> TableCredentials:
        """GET .../credentials."""
        body = self._send(_base.http_credentials(ref, access))
        return _base.credentials_from_json(body or {}, ref, access)

    def load(self, ref: TableRef, vended: bool, access: Access) -> LoadedTable:
        """GET the table."""
        body = self._send(_base.http_load(ref, vended, access))
        return _base.loaded_from_json(body or {}, ref, access, vended)

    def list_page(self, warehouse: str, namespace: tuple[str, ...], page_token: str | None) -> Page:
        """GET one page of tables."""
        body = self._send(_base.http_list(warehouse, namespace, page_token, None))
        return _base.identifiers_from_json(body or {})

    def create(
        self,
        ref: TableRef,
        format: str,
        base_location: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
        idempotency_key: str,
    ) -> LoadedTable:
        """POST a new table."""
        request = _base.http_create(ref, format, base_location, doc, properties, idempotency_key)
        return _base.loaded_from_json(self._send(request) or {}, ref, "read", False)

    def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        """DELETE the table."""
        self._send(_base.http_drop(ref, purge, force))

    def rename(self, source: TableRef, destination: TableRef) -> None:
        """POST rename."""
        self._send(_base.http_rename(source, destination))

    def close(self) -> None:
        """Close the pool."""
        self._client.close()


class AsyncHttpTransport:
    """Asyncio HTTP transport: one aiohttp session per event loop (httpx.AsyncClient fallback)."""

    def __init__(self, config: ClientConfig) -> None:
        self._config = config
        self._auth = CallerAuth(config)
        self._where = config.endpoint.url
        self._pid = os.getpid()
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._aiohttp: Any = None
        try:
            import aiohttp
        except ImportError:  # pragma: no cover - aiohttp is present wherever tests run
            self._aiohttp = None
        else:
            self._aiohttp = aiohttp

    @property
    def connection_id(self) -> str:
        """``<pid>:<id of the session>`` (0 before the first call)."""
        return f"{self._pid}:{id(self._session) if self._session else 0:x}"

    def _ensure_session(self) -> Any:
        loop = asyncio.get_running_loop()
        # A session is bound to the loop that made it; a new loop (asyncio.run per call) needs a
        # new session, and the old one cannot be closed from here, so it is simply dropped.
        if self._session is not None and self._loop is loop:
            return self._session
        endpoint = self._config.endpoint
        if self._aiohttp is not None:
            aiohttp = self._aiohttp
            connector = (
                aiohttp.UnixConnector(path=endpoint.uds) if endpoint.uds else aiohttp.TCPConnector()
            )
            self._session = aiohttp.ClientSession(
                base_url=endpoint.http_base_url,
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self._config.timeout_s),
                trust_env=False,
            )
        else:  # pragma: no cover
            transport = (
                httpx.AsyncHTTPTransport(uds=endpoint.uds)
                if endpoint.uds
                else httpx.AsyncHTTPTransport()
            )
            self._session = httpx.AsyncClient(
                base_url=endpoint.http_base_url,
                transport=transport,
                timeout=httpx.Timeout(self._config.timeout_s),
                trust_env=False,
            )
        self._loop = loop
        return self._session

    async def _send(self, request: HttpRequest) -> Any:
        session = self._ensure_session()
        if self._aiohttp is None:  # pragma: no cover
            return await self._send_httpx(session, request)
        aiohttp = self._aiohttp
        try:
            async with asyncio.timeout(self._config.timeout_s):
                async with session.request(
                    request.method,
                    request.path,
                    params=dict(request.params) or None,
                    json=request.json,
                    headers={**self._auth.headers(), **request.headers},
                ) as response:
                    status, body, headers = response.status, await response.read(), response.headers
        except TimeoutError as exc:
            raise GatewayTimeoutError(
                f"no answer from the gateway at {self._where} in time"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise GatewayConnectionError(
                f"cannot reach the gateway at {self._where}: {type(exc).__name__}",
                type="GatewayUnreachable",
            ) from exc
        if status >= 400:
            raise _base.error_from_http(status, body, headers)
        return _decode(status, body, self._where)

    async def _send_httpx(self, client: Any, request: HttpRequest) -> Any:  # pragma: no cover
        with _httpx_errors(self._where):
            response = await client.request(
                request.method,
                request.path,
                params=dict(request.params) or None,
                json=request.json,
                headers={**self._auth.headers(), **request.headers},
            )
        if response.status_code >= 400:
            raise _base.error_from_http(response.status_code, response.content, response.headers)
        return _decode(response.status_code, response.content, self._where)

    async def credentials(self, ref: TableRef, access: Access) -> TableCredentials:
        """GET .../credentials."""
        body = await self._send(_base.http_credentials(ref, access))
        return _base.credentials_from_json(body or {}, ref, access)

    async def load(self, ref: TableRef, vended: bool, access: Access) -> LoadedTable:
        """GET the table."""
        body = await self._send(_base.http_load(ref, vended, access))
        return _base.loaded_from_json(body or {}, ref, access, vended)

    async def list_page(
        self, warehouse: str, namespace: tuple[str, ...], page_token: str | None
    ) -> Page:
        """GET one page of tables."""
        body = await self._send(_base.http_list(warehouse, namespace, page_token, None))
        return _base.identifiers_from_json(body or {})

    async def create(
        self,
        ref: TableRef,
        format: str,
        base_location: str | None,
        doc: str | None,
        properties: Mapping[str, str] | None,
        idempotency_key: str,
    ) -> LoadedTable:
        """POST a new table."""
        request = _base.http_create(ref, format, base_location, doc, properties, idempotency_key)
        return _base.loaded_from_json(await self._send(request) or {}, ref, "read", False)

    async def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        """DELETE the table."""
        await self._send(_base.http_drop(ref, purge, force))

    async def rename(self, source: TableRef, destination: TableRef) -> None:
        """POST rename."""
        await self._send(_base.http_rename(source, destination))

    async def aclose(self) -> None:
        """Close the session if it belongs to the running loop."""
        session, self._session = self._session, None
        if session is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover
            running = None
        if running is self._loop:
            await (session.close() if self._aiohttp is not None else session.aclose())
