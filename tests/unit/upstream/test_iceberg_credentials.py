"""Iceberg tables' credentials: their own cache keys, fetched from the Iceberg endpoint."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from gateway.models import AccessMode, CacheKey, RequestContext
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.transport import RawRequest, RawResponse
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tokens import FakeTokenSource

CTX = RequestContext(request_id="0198f2a4-6c1e-7d32-9a51-3f0b2c7e9d10")
WH = "0198f0c2-1f2e-7b0a-9c4d-5e6f7a8b9c0d"
ANSWER = {"storage-credentials": [{"prefix": "s3://b/t", "config": {"s3.session-token": "tok"}}]}


class RecordingTransport:
    """Answers every request with one credentials body and records (method, path, headers)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    async def send(self, request: RawRequest) -> RawResponse:
        self.seen.append((request.method, urlsplit(request.url).path, dict(request.headers)))
        return RawResponse(200, {"content-type": "application/json"},
                           json.dumps(ANSWER).encode())

    async def close(self) -> None:
        return None


def _key(kind: str, access: AccessMode = AccessMode.READ) -> CacheKey:
    return CacheKey.of(project=None, warehouse_id=WH, namespace=("a", "b"), table="T",
                       access=access, kind=kind)  # type: ignore[arg-type]


def test_kind_separates_cache_keys_but_not_the_table() -> None:
    generic, iceberg = _key("generic"), _key("iceberg")
    assert generic != iceberg
    assert iceberg.same_table(WH, ("A", "b"), "t")
    assert CacheKey.of(project=None, warehouse_id=WH, namespace=("a", "b"), table="T",
                       access=AccessMode.READ) == generic


async def test_iceberg_key_fetches_from_the_iceberg_credentials_endpoint(metrics, clock) -> None:
    transport = RecordingTransport()
    settings = make_settings(UPSTREAM__READ_ROLE_ID="read-role")
    client = CatalogClient(transport, FakeTokenSource(), settings.upstream, metrics, clock,
                           rng=seeded(1))
    creds, _ = await client.load_credentials_dated(_key("iceberg"), CTX)
    assert creds[0].config["s3.session-token"] == "tok"
    method, path, headers = transport.seen[-1]
    # the upstream names the table by the key's folded form, the one the policy decided on
    assert (method, path) == ("GET", f"/catalog/v1/{WH}/namespaces/a%1Fb/tables/t/credentials")
    assert headers["x-assume-role"] == "read-role"
    await client.load_credentials_dated(_key("generic"), CTX)
    assert transport.seen[-1][1] == (
        f"/lakekeeper/v1/{WH}/namespaces/a%1Fb/generic-tables/t/credentials")
