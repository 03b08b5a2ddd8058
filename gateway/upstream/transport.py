"""Transport: one small Protocol for "send one HTTP request", and its aiohttp implementation.

As in httpx, a request is a value (`RawRequest`) and a transport has one `send()`: callers and
fakes share one signature, and a transport never learns what the request is for.

This is the only module that touches `aiohttp.ClientSession`. It maps aiohttp, OSError and
timeout failures to the daemon's errors once, here, with `raise ... from exc`; messages name
the host only (never a URL query, header or body, which may carry secrets).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from gateway.errors import UnavailableError, UpstreamTimeoutError
from gateway.settings import UpstreamSettings
from gateway.tuning import UPSTREAM_MAX_RESPONSE_BYTES

_FRAMING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_READ_CHUNK = 1 << 16


def _env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """aiohttp's environment proxy for `url` (what its `trust_env` applies), or none."""
    try:
        return get_env_proxy_for_url(url)
    except LookupError:  # no proxy for this scheme, or NO_PROXY names the host
        return None, None


@dataclass(frozen=True)
class RawRequest:
    """One upstream call: the timeout travels with it (the caller's budget, not the pool's)."""

    method: str
    url: str
    timeout_s: float
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None

    @property
    def host(self) -> str:
        """For messages: the URL's host only (its query may carry secrets)."""
        return urlsplit(self.url).netloc or "upstream"


@dataclass(frozen=True)
class RawResponse:
    """An HTTP answer: status, lower-cased headers, body bytes."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


class Transport(Protocol):
    """Send one HTTP request; raise UnavailableError / UpstreamTimeoutError on failure."""

    async def send(self, request: RawRequest) -> RawResponse: ...

    async def close(self) -> None: ...


def upstream_ssl_context(settings: UpstreamSettings) -> ssl.SSLContext | None:
    """TLS for the catalog and IdP: the system CAs, or `CA_FILE`, plus a client certificate.

    None when nothing is configured (aiohttp's default verification). Reads the files once, at
    start; raises OSError / ssl.SSLError for an unreadable or mismatched file.
    """
    if settings.ca_file is None and settings.client_cert_file is None:
        return None
    cafile = str(settings.ca_file) if settings.ca_file is not None else None
    context = ssl.create_default_context(cafile=cafile)
    if settings.client_cert_file is not None:
        key = str(settings.client_key_file) if settings.client_key_file is not None else None
        context.load_cert_chain(str(settings.client_cert_file), key)
    return context


async def _read_bounded(resp: aiohttp.ClientResponse, host: str) -> bytes:
    """The whole body; UnavailableError once it passes `UPSTREAM_MAX_RESPONSE_BYTES` (a
    declared length past it is refused unread).

    Why a loop: `StreamReader.read(n)` returns what is buffered so far (at most n bytes), not
    the body: a catalog answer longer than one network read came back cut, and an Iceberg
    table's 65 KB metadata failed to parse on its next load (issue 36's write benchmark).
    """
    declared = resp.content_length
    if declared is not None and declared > UPSTREAM_MAX_RESPONSE_BYTES:
        raise UnavailableError(f"response from {host} is too large")
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(_READ_CHUNK):
        size += len(chunk)
        if size > UPSTREAM_MAX_RESPONSE_BYTES:
            raise UnavailableError(f"response from {host} is too large")
        chunks.append(chunk)
    return b"".join(chunks)


class AiohttpTransport:
    """A keep-alive connection pool shared by every upstream call of the process.

    The session is created lazily on the running loop (aiohttp binds it to that loop).
    """

    def __init__(
        self,
        *,
        pool_size: int = 100,
        keepalive_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        trust_env: bool = False,
    ) -> None:
        self._pool_size = pool_size
        self._keepalive_s = keepalive_s
        self._ssl: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
        self._trust_env = trust_env
        # (scheme, host:port) -> (proxy, proxy auth): see `_proxy_for`.
        self._proxies: dict[tuple[str, str], tuple[URL | None, aiohttp.BasicAuth | None]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise UnavailableError("the upstream transport is closed")
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size, keepalive_timeout=self._keepalive_s, ttl_dns_cache=60,
                ssl=self._ssl,
            )
            # trust_env is ours (`_proxy_for`), not aiohttp's: aiohttp's looks up the proxy and
            # ~/.netrc in a worker thread on every request (two thread hops per upstream call).
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=True, trust_env=False,
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def _proxy_for(self, url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The environment's proxy for `url`'s origin (HTTP(S)_PROXY, NO_PROXY, proxy
        credentials from ~/.netrc: aiohttp's own rules), looked up once per origin in a worker
        thread (it reads files) and then remembered: the environment of a running process does
        not change."""
        if not self._trust_env:
            return None, None
        parts = urlsplit(url)
        origin = (parts.scheme, parts.netloc)
        found = self._proxies.get(origin)
        if found is None:
            found = self._proxies[origin] = await asyncio.to_thread(
                _env_proxy, URL.build(scheme=parts.scheme, authority=parts.netloc))
        return found

    async def send(self, request: RawRequest) -> RawResponse:
        session = self._get_session()
        try:
            proxy, proxy_auth = await self._proxy_for(request.url)
            async with session.request(
                request.method, request.url, headers=dict(request.headers), data=request.body,
                allow_redirects=False, timeout=aiohttp.ClientTimeout(total=request.timeout_s),
                proxy=proxy, proxy_auth=proxy_auth,
            ) as resp:
                data = await _read_bounded(resp, request.host)
                return RawResponse(
                    status=resp.status,
                    # The body is already decoded: its original framing headers would lie.
                    headers={k.lower(): v for k, v in resp.headers.items()
                             if k.lower() not in _FRAMING_HEADERS},
                    body=data,
                )
        except TimeoutError as exc:
            raise UpstreamTimeoutError(
                f"{request.host} did not answer in {request.timeout_s:g}s"
            ) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise UnavailableError(
                f"cannot reach {request.host}: {type(exc).__name__}"
            ) from exc

    async def close(self) -> None:
        """Close the pool; later requests raise UnavailableError."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
            # Give the connector a tick to close transports cleanly (aiohttp's advice).
            await asyncio.sleep(0)
