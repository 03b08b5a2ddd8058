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
from collections.abc import Iterator
from typing import Any, TypeVar

import httpx

from lakegate_client._auth import CallerAuth
from lakegate_client._config import ClientConfig
from lakegate_client._errors import GatewayConnectionError, GatewayTimeoutError, LakegateError
from lakegate_client._http_codec import HttpRequest, error_from_http
from lakegate_client._ops import Operation

__all__ = ["AsyncHttpTransport", "SyncHttpTransport"]

R = TypeVar("R")


def _answer(status: int, body: bytes, headers: Any, where: str) -> Any:
    """A response → its decoded JSON body, or the matching LakegateError raised."""
    if status >= 400:
        raise error_from_http(status, body, headers)
    if status == 204 or not body:
        return None
    try:
        return json.loads(body)
    except ValueError as exc:
        raise LakegateError(
            f"the gateway at {where} answered non-JSON (HTTP {status})", type="ProtocolError"
        ) from exc


def _arguments(request: HttpRequest, auth: CallerAuth) -> tuple[str, str, dict[str, Any]]:
    """``(method, path, keyword arguments)``: the same call for httpx and aiohttp ``request``."""
    keywords: dict[str, Any] = {
        "params": dict(request.params) or None,
        "json": request.json,
        "headers": {**auth.headers(), **request.headers},
    }
    return request.method, request.path, keywords


def _timed_out(where: str) -> GatewayTimeoutError:
    return GatewayTimeoutError(f"no answer from the gateway at {where} in time")


def _unreachable(where: str, exc: BaseException) -> GatewayConnectionError:
    return GatewayConnectionError(
        f"cannot reach the gateway at {where}: {type(exc).__name__}", type="GatewayUnreachable"
    )


@contextlib.contextmanager
def _httpx_errors(where: str) -> Iterator[None]:
    """Translate httpx transport failures into the client's errors, once for sync and async."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise _timed_out(where) from exc
    except (httpx.TransportError, OSError) as exc:
        raise _unreachable(where, exc) from exc

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
            method, path, keywords = _arguments(request, self._auth)
            response = self._client.request(method, path, **keywords)
        return _answer(response.status_code, response.content, response.headers, self._where)

    def send(self, op: Operation[R]) -> R:
        """Send one operation over HTTP and decode its answer."""
        return op.from_json(self._send(op.http()) or {})

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
                method, path, keywords = _arguments(request, self._auth)
                async with session.request(method, path, **keywords) as response:
                    status, body, headers = response.status, await response.read(), response.headers
        except TimeoutError as exc:
            raise _timed_out(self._where) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise _unreachable(self._where, exc) from exc
        return _answer(status, body, headers, self._where)

    async def _send_httpx(self, client: Any, request: HttpRequest) -> Any:  # pragma: no cover
        with _httpx_errors(self._where):
            method, path, keywords = _arguments(request, self._auth)
            response = await client.request(method, path, **keywords)
        return _answer(response.status_code, response.content, response.headers, self._where)

    async def send(self, op: Operation[R]) -> R:
        """Send one operation over HTTP and decode its answer."""
        return op.from_json(await self._send(op.http()) or {})

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
