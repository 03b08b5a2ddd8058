"""Upstream TLS (private CA, client certificate) and proxies from the environment, for real.

A local HTTPS server that demands a client certificate, and a local plain-HTTP forward proxy,
stand in for a catalog behind mTLS and a corporate egress proxy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.errors import UnavailableError
from gateway.preflight import startup_problems
from gateway.settings import Settings, SettingsError
from gateway.upstream.transport import AiohttpTransport, RawRequest, upstream_ssl_context
from tests.unit.tls_certs import https_server, self_signed


def _settings(**extra: str) -> Settings:
    env = {"LAKEGATE__UPSTREAM__URL": "https://127.0.0.1:1", "LAKEGATE__TOKEN__KIND": "none"}
    return Settings.load(environ=env | extra)


@dataclass(frozen=True)
class MtlsServer:
    """An HTTPS endpoint that requires a client certificate: where, and the files to reach it."""

    url: str
    ca: Path
    cert: Path
    key: Path


@pytest.fixture
async def mtls(tmp_path: Path) -> AsyncIterator[MtlsServer]:
    server_cert, server_key = self_signed(tmp_path, "server")
    client_cert, client_key = self_signed(tmp_path, "client")

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello over mTLS")

    app = web.Application()
    app.router.add_get("/hello", hello)
    server = await https_server(app, server_cert, server_key, client_ca=client_cert)
    yield MtlsServer(str(server.make_url("/hello")), server_cert, client_cert, client_key)
    await server.close()


async def _get(transport: AiohttpTransport, url: str) -> bytes:
    try:
        resp = await transport.send(RawRequest("GET", url, 10))
        return resp.body
    finally:
        await transport.close()


async def test_ca_bundle_and_client_certificate_reach_an_mtls_catalog(
    mtls: MtlsServer,
) -> None:
    settings = _settings(
        LAKEGATE__UPSTREAM__CA_FILE=str(mtls.ca),
        LAKEGATE__UPSTREAM__CLIENT_CERT_FILE=str(mtls.cert),
        LAKEGATE__UPSTREAM__CLIENT_KEY_FILE=str(mtls.key),
    )
    transport = AiohttpTransport(ssl_context=upstream_ssl_context(settings.upstream))
    assert await _get(transport, mtls.url) == b"hello over mTLS"


@pytest.mark.parametrize("missing", ["ca", "client certificate"])
async def test_without_the_ca_or_the_client_certificate_the_call_fails(
    mtls: MtlsServer, missing: str
) -> None:
    extra = {"LAKEGATE__UPSTREAM__CA_FILE": str(mtls.ca)}
    if missing == "ca":
        extra = {
            "LAKEGATE__UPSTREAM__CLIENT_CERT_FILE": str(mtls.cert),
            "LAKEGATE__UPSTREAM__CLIENT_KEY_FILE": str(mtls.key),
        }
    transport = AiohttpTransport(ssl_context=upstream_ssl_context(_settings(**extra).upstream))
    with pytest.raises(UnavailableError):
        await _get(transport, mtls.url)


@pytest.fixture
async def proxy() -> AsyncIterator[dict[str, Any]]:
    """A forward proxy for plain HTTP: answers every absolute-form request itself."""
    seen: list[str] = []

    async def forward(request: web.Request) -> web.Response:
        seen.append(str(request.url))
        return web.Response(text="via proxy")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    server = TestServer(app)
    await server.start_server()
    yield {"url": f"http://127.0.0.1:{server.port}", "seen": seen}
    await server.close()


async def test_proxy_from_the_environment_is_used_when_trusted(
    proxy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy["url"])
    monkeypatch.setenv("http_proxy", proxy["url"])
    target = "http://catalog.example.invalid/catalog/v1/config"
    assert await _get(AiohttpTransport(trust_env=True), target) == b"via proxy"
    assert proxy["seen"] == [target]
    # Not trusted: the proxy is ignored and the (unresolvable) host is tried directly.
    with pytest.raises(UnavailableError):
        await _get(AiohttpTransport(trust_env=False), target)
    assert len(proxy["seen"]) == 1


async def test_the_proxy_is_looked_up_once_per_origin_and_no_proxy_is_honoured(
    proxy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp's own trust_env looks the proxy (and ~/.netrc) up in a worker thread on every
    request; the transport does it once per origin, with the same rules."""
    import gateway.upstream.transport as transport_module

    for var in ("HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy["url"])
    monkeypatch.setenv("http_proxy", proxy["url"])
    monkeypatch.setenv("NO_PROXY", "direct.example.invalid")
    monkeypatch.setenv("no_proxy", "direct.example.invalid")
    lookups: list[str] = []
    real = transport_module._env_proxy

    def counted(url: Any) -> Any:
        lookups.append(str(url))
        return real(url)

    monkeypatch.setattr(transport_module, "_env_proxy", counted)
    transport = AiohttpTransport(trust_env=True)
    try:
        for path in ("/a", "/b", "/c"):
            resp = await transport.send(RawRequest("GET", f"http://proxied.example.invalid{path}",
                                                   10))
            assert resp.body == b"via proxy"
        # NO_PROXY: tried directly (and unresolvable), never through the proxy.
        with pytest.raises(UnavailableError):
            await transport.send(RawRequest("GET", "http://direct.example.invalid/x", 10))
    finally:
        await transport.close()
    assert len(proxy["seen"]) == 3
    assert lookups == ["http://proxied.example.invalid", "http://direct.example.invalid"]


def test_proxy_trust_is_on_by_default_and_can_be_turned_off() -> None:
    assert _settings().upstream.trust_env is True
    assert _settings(LAKEGATE__UPSTREAM__TRUST_ENV="false").upstream.trust_env is False


def test_client_secret_from_a_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "client-secret"
    secret_file.write_text("s3cret-from-file\n")
    env = {
        "LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:1",
        "LAKEGATE__TOKEN__TOKEN_URL": "http://127.0.0.1:1/token",
        "LAKEGATE__TOKEN__CLIENT_ID": "lakegate",
        "LAKEGATE__TOKEN__CLIENT_SECRET_FILE": str(secret_file),
    }
    settings = Settings.load(environ=env)
    assert settings.token.client_secret is not None
    assert settings.token.client_secret.get_secret_value() == "s3cret-from-file"
    assert "s3cret-from-file" in settings.secret_values()  # registered for log redaction
    secret_file.unlink()
    with pytest.raises(SettingsError, match="LAKEGATE__TOKEN__CLIENT_SECRET_FILE"):
        Settings.load(environ=env)


def test_client_key_without_certificate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="LAKEGATE__UPSTREAM__CLIENT_CERT_FILE"):
        _settings(LAKEGATE__UPSTREAM__CLIENT_KEY_FILE=str(tmp_path / "k.pem"))


def test_preflight_names_unusable_tls_files(tmp_path: Path) -> None:
    _, key = self_signed(tmp_path, "a")
    garbage = tmp_path / "not-a-cert.pem"
    garbage.write_text("not a certificate\n")
    unusable = _settings(
        LAKEGATE__UPSTREAM__CLIENT_CERT_FILE=str(garbage),
        LAKEGATE__UPSTREAM__CLIENT_KEY_FILE=str(key),
    )
    (problem,) = startup_problems(unusable)
    assert "LAKEGATE__UPSTREAM__CLIENT_CERT_FILE" in problem
    missing = _settings(LAKEGATE__UPSTREAM__CA_FILE=str(tmp_path / "absent.pem"))
    (problem,) = startup_problems(missing)
    assert problem.startswith("LAKEGATE__UPSTREAM__CA_FILE=")
