import json

import pytest

from gateway.errors import NotFoundError, ProtocolViolationError
from gateway.models import AccessMode, CacheKey, RequestContext
from gateway.upstream.lakekeeper import CatalogClient
from gateway.upstream.table_identity import TableIdentityLoader
from gateway.upstream.transport import RawRequest, RawResponse
from tests.fakes.catalog import FakeCatalog
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tokens import FakeTokenSource

CTX = RequestContext(request_id="req-1")
TABLE_UUID = "0198F0C4-5D6E-7F80-9A1B-2C3D4E5F6A7B"


def loader(transport, metrics, clock):
    settings = make_settings()
    return TableIdentityLoader(CatalogClient(transport, FakeTokenSource(), settings.upstream,
                                             metrics, clock, rng=seeded(5)))


def key(catalog_wid, table="orders", kind="generic"):
    return CacheKey.of(project=None, warehouse_id=catalog_wid, namespace=("ns",), table=table,
                       access=AccessMode.WRITE, kind=kind)


@pytest.fixture
def catalog(clock):
    cat = FakeCatalog(clock)
    for i in range(5):
        cat.add_table(("ns",), f"other{i}")
    cat.add_table(("ns",), "Orders")
    return cat


async def test_generic_load_is_client_managed_and_has_no_id(catalog, metrics, clock):
    answer = await loader(catalog.transport(), metrics, clock).load(key(catalog.warehouse_id),
                                                                    CTX)
    assert answer.identity is not None
    assert answer.identity.location == "s3://bucket/ns/Orders"
    assert answer.identity.table_id is None
    assert catalog.calls["load_generic_table"] == 1
    assert catalog.calls["load_generic_table_credentials"] == 0  # no STS call
    _op, headers = catalog.requests[-1]
    assert headers["X-Iceberg-Access-Delegation"] == "client-managed"


async def test_generic_id_is_found_in_the_listing_when_asked(catalog, metrics, clock):
    table = catalog.tables[(catalog.warehouse_id, ("ns",), "orders")]
    answer = await loader(catalog.transport(), metrics, clock).load(
        key(catalog.warehouse_id), CTX, want_id=True)
    assert answer.identity is not None
    assert answer.identity.table_id == table.id.lower()
    assert catalog.calls["list_generic_tables"] == 1


async def test_generic_404_is_not_found(catalog, metrics, clock):
    with pytest.raises(NotFoundError):
        await loader(catalog.transport(), metrics, clock).load(
            key(catalog.warehouse_id, table="gone"), CTX)


class IcebergTransport:
    """Iceberg `loadTable` with Lakekeeper's weak ETag and 304 on If-None-Match."""

    def __init__(self, body: bytes, etag: str = 'W/"lk2.abc"') -> None:
        self.body = body
        self.etag = etag
        self.requests: list[RawRequest] = []

    async def send(self, request: RawRequest) -> RawResponse:
        self.requests.append(request)
        if request.headers.get("If-None-Match") == self.etag:
            return RawResponse(304, {"etag": self.etag})
        return RawResponse(200, {"etag": self.etag, "content-type": "application/json"},
                           self.body)

    async def close(self) -> None:
        pass


def iceberg_body(location="s3://b/wh/t1", table_uuid=TABLE_UUID) -> bytes:
    return json.dumps({"metadata-location": f"{location}/metadata/00001.json",
                       "metadata": {"format-version": 2, "table-uuid": table_uuid,
                                    "location": location}}).encode()


async def test_iceberg_load_gives_uuid_and_location_then_304(metrics, clock):
    transport = IcebergTransport(iceberg_body())
    ld = loader(transport, metrics, clock)
    k = key("0198f0c2-1f2e-7b0a-9c4d-5e6f7a8b9c0d", kind="iceberg")
    first = await ld.load(k, CTX)
    assert first.identity is not None
    assert (first.identity.table_id, first.identity.location) == (TABLE_UUID.lower(),
                                                                  "s3://b/wh/t1")
    assert first.etag == 'W/"lk2.abc"'
    second = await ld.load(k, CTX, etag=first.etag)
    assert second.identity is None
    sent = transport.requests[-1]
    assert sent.headers["If-None-Match"] == 'W/"lk2.abc"'
    assert sent.headers["X-Iceberg-Access-Delegation"] == "client-managed"
    assert "/catalog/v1/" in sent.url
    assert sent.url.endswith("/tables/orders")


async def test_iceberg_answer_without_location_is_a_protocol_violation(metrics, clock):
    transport = IcebergTransport(json.dumps({"metadata": {"table-uuid": TABLE_UUID}}).encode())
    with pytest.raises(ProtocolViolationError):
        await loader(transport, metrics, clock).load(
            key("0198f0c2-1f2e-7b0a-9c4d-5e6f7a8b9c0d", kind="iceberg"), CTX)
