"""ClientConfig: where the gateway is and how long to wait, parsed once from arguments or env.

The client's connection settings are read from ``os.environ`` here only (other modules
read just their own switches: the Spark fault hooks, the worker heap, DuckDB's extension
directory, and the driver's Iceberg catalog URL). URL forms (``LAKEGATE_URL``):

=========================  ====================================================
``http://127.0.0.1:8765``  native HTTP API over loopback TCP (also ``https://``)
``unix:/run/lakegate.sock``  native HTTP API over a Unix socket
``grpc://127.0.0.1:8766``  gRPC over loopback TCP
``grpc+unix:/run/g.sock``  gRPC over a Unix socket
=========================  ====================================================

``unix:///abs/path`` and ``grpc+unix:///abs/path`` are accepted too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from lakegate_client._errors import ConfigurationError

__all__ = ["DEFAULT_URL", "ClientConfig", "Endpoint", "parse_url", "storage_endpoint"]

DEFAULT_URL = "http://127.0.0.1:8765"
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMO_FLOOR_S = 300.0
DEFAULT_MEMO_MAX_ENTRIES = 1024

Protocol = Literal["http", "grpc"]
# A local object store's endpoint, per family: Lakekeeper never vends one for ADLS (always
# https://<account>.<host>) or GCS (no endpoint field), so reaching an emulator is a client setting.
STORAGE_ENDPOINT_ENV = {"adls": "LAKEGATE_ADLS_ENDPOINT", "gcs": "LAKEGATE_GCS_ENDPOINT"}


def storage_endpoint(kind: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint override for storage ``kind`` (``adls``, ``gcs``) from the environment.

    ``LAKEGATE_ADLS_ENDPOINT``: the blob endpoint with the account in its path
    (``http://127.0.0.1:10000/devstoreaccount1``); ``LAKEGATE_GCS_ENDPOINT``: the JSON API's
    base URL (``http://127.0.0.1:4443``). None when unset.

    Raises:
        ConfigurationError: the value is not an http(s) URL with a host.
    """
    name = STORAGE_ENDPOINT_ENV.get(kind)
    if name is None:
        return None
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{name}={value!r} must be an http(s) URL")
    return value.rstrip("/")


@dataclass(frozen=True)
class Endpoint:
    """A parsed gateway address.

    Attributes:
        protocol: ``http`` (native HTTP API) or ``grpc``.
        url: the URL as normalised (used in memo keys and messages; never holds secrets).
        uds: Unix socket path, or None for TCP.
        host, port: TCP address (None for UDS).
        scheme: ``http`` or ``https`` for the HTTP protocol over TCP.
    """

    protocol: Protocol
    url: str
    uds: str | None = None
    host: str | None = None
    port: int | None = None
    scheme: str = "http"

    @property
    def http_base_url(self) -> str:
        """Base URL for HTTP requests; a placeholder host when the socket is a UDS."""
        if self.uds is not None:
            return "http://localhost"  # an accepted Host (gateway/surfaces/hosts.py)
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def grpc_target(self) -> str:
        """Target string for ``grpc.insecure_channel``."""
        if self.uds is not None:
            return f"unix:{self.uds}"
        host = f"[{self.host}]" if self.host and ":" in self.host else self.host
        return f"{host}:{self.port}"


def _uds_path(rest: str, original: str) -> str:
    # "unix:/p", "unix:///p" and "unix://p" (relative, rare) all name a filesystem path.
    path = rest[2:] if rest.startswith("//") else rest
    if not path:
        raise ConfigurationError(f"LAKEGATE_URL {original!r} has no socket path")
    return path


def parse_url(url: str) -> Endpoint:
    """Parse a gateway URL into an :class:`Endpoint`.

    Raises:
        ConfigurationError: the URL has an unknown scheme or no host/port/path.
    """
    text = url.strip()
    lowered = text.lower()
    uds_forms: tuple[tuple[str, Protocol], ...] = (("grpc+unix:", "grpc"), ("unix:", "http"))
    for prefix, protocol in uds_forms:
        if lowered.startswith(prefix):
            path = _uds_path(text[len(prefix) :], url)
            return Endpoint(protocol=protocol, url=f"{prefix}{path}", uds=path)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "grpc"):
        raise ConfigurationError(
            f"LAKEGATE_URL {url!r}: use http://host:port, unix:/path, grpc://host:port "
            "or grpc+unix:/path"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"LAKEGATE_URL {url!r} has an invalid port") from exc
    if not parts.hostname:
        raise ConfigurationError(f"LAKEGATE_URL {url!r} has no host")
    if parts.username or parts.password:
        raise ConfigurationError("LAKEGATE_URL must not carry credentials; use LAKEGATE_TOKEN")
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
        if port is None:
            raise ConfigurationError(f"LAKEGATE_URL {url!r} needs a port")
    tcp_protocol: Protocol = "grpc" if scheme == "grpc" else "http"
    host = parts.hostname
    shown = f"[{host}]" if ":" in host else host
    return Endpoint(
        protocol=tcp_protocol,
        url=f"{scheme}://{shown}:{port}",
        host=host,
        port=port,
        scheme="https" if scheme == "https" else "http",
    )


def _positive_float(value: str | float, name: str) -> float:
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigurationError(f"{name}={value!r} is not a number") from exc
    if number <= 0:
        raise ConfigurationError(f"{name}={value!r} must be > 0")
    return number


@dataclass(frozen=True)
class ClientConfig:
    """Everything a client needs, validated.

    Attributes:
        endpoint: the parsed gateway address.
        token: caller token sent as ``Authorization: Bearer`` (never shown in reprs).
        token_file: file the token is re-read from when it changes (``LAKEGATE_TOKEN_FILE``).
        warehouse: default warehouse name or id.
        timeout_s: bound on every call, connect included.
        memo_floor_s: the per-process memo serves a credential only while it has more than this
            left (matches the gateway's serve floor, so a memoised credential is as good as a
            fresh one from the gateway).
        memo_max_entries: bound on the memo's size.
    """

    endpoint: Endpoint
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    warehouse: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    memo_floor_s: float = DEFAULT_MEMO_FLOOR_S
    memo_max_entries: int = DEFAULT_MEMO_MAX_ENTRIES

    @classmethod
    def resolve(
        cls,
        url: str | None = None,
        *,
        token: str | None = None,
        warehouse: str | None = None,
        timeout_s: float | None = None,
        memo_floor_s: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ClientConfig:
        """Arguments win over ``LAKEGATE_*`` environment variables, which win over defaults.

        Reads ``LAKEGATE_URL``, ``LAKEGATE_TOKEN``, ``LAKEGATE_TOKEN_FILE`` (read once, here),
        ``LAKEGATE_WAREHOUSE``, ``LAKEGATE_TIMEOUT_S`` and ``LAKEGATE_MEMO_FLOOR_S``.

        Raises:
            ConfigurationError: a value is malformed (the message names the variable).
        """
        env = os.environ if environ is None else environ
        endpoint = parse_url(url or env.get("LAKEGATE_URL") or DEFAULT_URL)
        token_file = None
        if token is None:
            token = env.get("LAKEGATE_TOKEN") or None
        if token is None and env.get("LAKEGATE_TOKEN_FILE"):
            path = token_file = env["LAKEGATE_TOKEN_FILE"]
            try:
                with open(path, encoding="utf-8") as handle:
                    token = handle.read().strip() or None
            except OSError as exc:
                raise ConfigurationError(f"LAKEGATE_TOKEN_FILE {path!r} unreadable") from exc
        if timeout_s is None:
            timeout_s = _positive_float(
                env.get("LAKEGATE_TIMEOUT_S", DEFAULT_TIMEOUT_S), "LAKEGATE_TIMEOUT_S"
            )
        else:
            timeout_s = _positive_float(timeout_s, "timeout_s")
        if memo_floor_s is None:
            raw = env.get("LAKEGATE_MEMO_FLOOR_S", str(DEFAULT_MEMO_FLOOR_S))
            try:
                memo_floor_s = float(raw)
            except ValueError as exc:
                raise ConfigurationError(f"LAKEGATE_MEMO_FLOOR_S={raw!r} is not a number") from exc
        if memo_floor_s < 0:
            raise ConfigurationError("LAKEGATE_MEMO_FLOOR_S must be >= 0")
        return cls(
            endpoint=endpoint,
            token=token,
            token_file=token_file,
            warehouse=warehouse or env.get("LAKEGATE_WAREHOUSE") or None,
            timeout_s=timeout_s,
            memo_floor_s=memo_floor_s,
        )
