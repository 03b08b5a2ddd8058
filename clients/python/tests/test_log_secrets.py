"""No secret in any log line the client's stores and transports cause, at DEBUG and INFO
(issue 50 item 7). Each store (S3 through boto3, ADLS and GCS through httpx) and each client
transport talks to a local HTTP server with planted secrets; every record any logger emits is
searched for them. Used to be: httpx's INFO request line carried the ADLS SAS (``sig=``) of
every blob call, and botocore's DEBUG lines the S3 session token."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lakegate_client import AsyncClient, Client, StorageCredential, TableCredentials

SIG = "PlantedSasSignature0123456789abcdefXYZ%3D"
SESSION = "PlantedSessionToken0123456789abcdef"
SECRET_KEY = "PlantedSecretAccessKey0123456789abcdef"  # noqa: S105 - planted, not a key
BEARER = "ya29.PlantedOAuthToken0123456789abcdef"
CALLER = "PlantedCallerToken0123456789abcdef"
SECRETS = (SIG, SIG.replace("%3D", "="), SESSION, SECRET_KEY, BEARER, CALLER)


class _Answer(BaseHTTPRequestHandler):
    """200 with an empty XML/JSON-ish body to everything: the calls' outcome does not matter,
    the request lines and headers the libraries log do."""

    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        self.server.seen.append(f"{self.requestline}\n{self.headers}")  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b"{}" if "/storage/v1/" in self.path or "/upload/" in self.path else (
            b'<?xml version="1.0"?><ListBucketResult></ListBucketResult>')
        self.send_response(200)
        self.send_header("ETag", '"0x8DPLAIN"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _creds(location: str, config: dict[str, str], endpoint: str | None = None) -> TableCredentials:
    creds = TableCredentials.from_parts(location=location,
                                        credentials=[StorageCredential(location, config)])
    return creds.with_storage_endpoint(endpoint) if endpoint else creds


def _s3(endpoint: str) -> None:
    from lakegate_client.engine.stores.s3 import S3Store, s3_client

    creds = _creds("s3://bucket/wh/t1", {
        "s3.access-key-id": "AKIDPLANTED", "s3.secret-access-key": SECRET_KEY,
        "s3.session-token": SESSION, "s3.endpoint": endpoint, "s3.region": "us-east-1",
        "s3.path-style-access": "true"})
    _store_calls(S3Store(s3_client(creds), "bucket"))


def _adls(endpoint: str) -> None:
    from lakegate_client.engine.stores.adls import AzureBlobStore

    creds = _creds("abfss://wh@devstoreaccount1.dfs.core.windows.net/ns/t1", {
        "adls.sas-token.devstoreaccount1.dfs.core.windows.net":
            f"sv=2021-08-06&sr=c&sp=racwdl&sig={SIG}"}, f"{endpoint}/devstoreaccount1")
    _store_calls(AzureBlobStore.for_credentials(creds))


def _gcs(endpoint: str) -> None:
    from lakegate_client.engine.stores.gcs import GcsStore

    creds = _creds("gs://bucket/wh/t1", {"gcs.oauth2.token": BEARER,
                                         "gcs.oauth2.token-expires-at": "4000000000000"},
                   endpoint)
    _store_calls(GcsStore.for_credentials(creds))


def _store_calls(store: object) -> None:
    for call in (lambda: store.put_if("wh/t1/_lakegate_commit.json", b"{}", None),  # type: ignore[attr-defined]
                 lambda: store.get("wh/t1/a.parquet"),  # type: ignore[attr-defined]
                 lambda: list(store.list("wh/t1/")),  # type: ignore[attr-defined]
                 lambda: store.delete("wh/t1/a.parquet")):  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):  # the answers are not the stores' kind
            call()


def _http(endpoint: str) -> None:
    with Client(endpoint, warehouse="wh", token=CALLER, timeout_s=5) as client, \
            contextlib.suppress(Exception):
        client.credentials("ns", "t1")


def _http_async(endpoint: str) -> None:
    async def ask() -> None:
        async with AsyncClient(endpoint, warehouse="wh", token=CALLER, timeout_s=5) as client:
            with contextlib.suppress(Exception):
                await client.credentials("ns", "t1")

    asyncio.run(ask())


CALLS: dict[str, Callable[[str], None]] = {
    "s3": _s3, "adls": _adls, "gcs": _gcs, "http": _http, "http-async": _http_async,
}  # gRPC: grpcio logs through its C core (GRPC_VERBOSITY, stderr), never Python logging


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO])
@pytest.mark.parametrize("kind", CALLS)
def test_no_secret_in_any_log_line(server: ThreadingHTTPServer, kind: str, level: int,
                                   caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("boto3")
    seen: list[str] = server.seen  # type: ignore[attr-defined]
    seen.clear()
    with caplog.at_level(level):
        CALLS[kind](f"http://127.0.0.1:{server.server_address[1]}")
    assert any(secret in request for request in seen for secret in SECRETS)  # they were sent
    lines = [f"{r.name}: {r.getMessage()} {r.exc_text or ''}" for r in caplog.records]
    leaked = [line for line in lines if any(secret in line for secret in SECRETS)]
    assert leaked == []
    if level == logging.DEBUG and kind != "http-async":  # aiohttp logs no request
        assert lines, "nothing was logged: the test would prove nothing"


def test_the_redacted_line_keeps_the_request(server: ThreadingHTTPServer,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """What a reader of the log needs stays: method, path, status, the SAS's other fields."""
    with caplog.at_level(logging.INFO):
        _adls(f"http://127.0.0.1:{server.server_address[1]}")
    line = next(r.getMessage() for r in caplog.records if r.name == "httpx")
    assert "PUT http://127.0.0.1" in line
    assert "/wh/t1/_lakegate_commit.json?sv=2021-08-06&sr=c&sp=racwdl&sig=REDACTED" in line
    assert "200 OK" in line
