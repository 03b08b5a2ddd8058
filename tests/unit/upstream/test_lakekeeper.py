import asyncio
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.clock import SystemClock
from gateway.errors import (
    ConflictError,
    IdentityProviderError,
    InvalidRequestError,
    NotFoundError,
    ProtocolViolationError,
    UpstreamAuthError,
    UpstreamTimeoutError,
)
from gateway.models import AccessMode, CacheKey, CreateTableSpec, RequestContext
from gateway.upstream.lakekeeper import CatalogClient, ns_segment
from gateway.upstream.transport import RawResponse
from tests.fakes.catalog import FakeCatalog, Fault
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings
from tests.fakes.tokens import FakeTokenSource

CTX = RequestContext(request_id="0198f2a4-6c1e-7d32-9a51-3f0b2c7e9d10")


@pytest.fixture
def catalog(clock):
    cat = FakeCatalog(clock)
    cat.add_table(("ns",), "orders")
    cat.add_table(("a", "b"), "nested")
    return cat


@pytest.fixture
def tokens():
    return FakeTokenSource()


def client(catalog, tokens, metrics, clock, **env):
    settings = make_settings(**env)
    return CatalogClient(catalog.transport(), tokens, settings.upstream, metrics, clock,
                         rng=seeded(5))


def key(table="orders", ns=("ns",), access=AccessMode.READ, wid=None, catalog=None):
    return CacheKey.of(project=None, warehouse_id=wid or catalog.warehouse_id, namespace=ns,
                       table=table, access=access)


async def test_namespace_levels_are_joined_with_percent_1f():
    assert ns_segment(("a", "b c", "d/e")) == "a%1Fb%20c%1Fd%2Fe"


async def test_credentials_call_sends_the_lakekeeper_headers(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock, UPSTREAM__PROJECT_ID="proj-1",
               UPSTREAM__READ_ROLE_ID="read-role", UPSTREAM__WRITE_ROLE_ID="write-role")
    creds = await c.load_credentials(key(catalog=catalog), CTX)
    assert creds[0].config["s3.session-token"].endswith("-read")
    op, headers = catalog.requests[-1]
    assert op == "load_generic_table_credentials"
    assert headers["Authorization"] == "Bearer token-1"
    assert headers["x-request-id"] == CTX.request_id
    assert headers["x-project-id"] == "proj-1"
    assert headers["x-assume-role"] == "read-role"
    assert headers["X-Iceberg-Access-Delegation"] == "vended-credentials"
    await c.load_credentials(key(catalog=catalog, access=AccessMode.WRITE), CTX)
    assert catalog.requests[-1][1]["x-assume-role"] == "write-role"


async def test_multi_level_namespace_reaches_the_catalog(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    table = await c.load_table(catalog.warehouse_id, ("a", "b"), "nested", CTX)
    assert table.name == "nested"


async def test_mutations_get_a_generated_idempotency_key(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    await c.create_table(catalog.warehouse_id, ("ns",), CreateTableSpec(
        name="new", format="lance", extra={"schema": {"a": 1}}), CTX)
    _, headers = catalog.requests[-1]
    assert len(headers["Idempotency-Key"]) == 36
    given = RequestContext(request_id="r", idempotency_key="0198f0c3-aaaa-7bbb-8ccc-dddddddddddd")
    await c.drop_table(catalog.warehouse_id, ("ns",), "new", given, purge=False)
    assert catalog.requests[-1][1]["Idempotency-Key"] == given.idempotency_key
    await c.load_table(catalog.warehouse_id, ("ns",), "orders", CTX)
    assert "Idempotency-Key" not in catalog.requests[-1][1]


async def test_error_envelope_becomes_a_typed_error_keeping_the_lakekeeper_type(
    catalog, tokens, metrics, clock
):
    c = client(catalog, tokens, metrics, clock)
    with pytest.raises(NotFoundError) as info:
        await c.load_table(catalog.warehouse_id, ("ns",), "missing", CTX)
    assert info.value.type_name == "NoSuchGenericTableException"
    assert info.value.status == 404
    with pytest.raises(ConflictError):
        await c.create_table(catalog.warehouse_id, ("ns",),
                             CreateTableSpec(name="orders", format="lance"), CTX)


async def test_transient_errors_are_retried(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    catalog.fail("load_generic_table_credentials", Fault(status=503), times=1)
    catalog.fail("load_generic_table_credentials", Fault(drop=True), times=1)
    catalog.fail("load_generic_table_credentials",
                 Fault(status=412, error_type="ShortTermCredentialError"), times=1)
    run = asyncio.ensure_future(c.load_credentials(key(catalog=catalog), CTX))
    await clock.run_for(5, step=0.05)
    async with asyncio.timeout(5):
        creds = await run
    assert creds
    assert catalog.calls["load_generic_table_credentials"] == 4
    sample = metrics.registry.get_sample_value
    assert sample("lakegate_upstream_requests_total",
                  {"target": "catalog", "op": "load_credentials", "status": "503"}) == 1
    assert sample("lakegate_upstream_requests_total",
                  {"target": "catalog", "op": "load_credentials", "status": "error"}) == 1


async def test_429_retry_after_is_one_shared_wait_for_concurrent_calls(
    catalog, tokens, metrics, clock
):
    c = client(catalog, tokens, metrics, clock)
    catalog.add_table(("ns",), "other")
    catalog.fail("load_generic_table_credentials", Fault(status=429, retry_after="2"))
    first = asyncio.ensure_future(c.load_credentials(key(catalog=catalog), CTX))
    await clock.settle()
    assert catalog.calls["load_generic_table_credentials"] == 1
    # A second table asked during the wait does not reach the catalog before it ends.
    second = asyncio.ensure_future(c.load_credentials(key("other", catalog=catalog), CTX))
    await clock.run_for(1.9, step=0.1)
    assert catalog.calls["load_generic_table_credentials"] == 1
    await clock.run_for(0.2, step=0.1)
    async with asyncio.timeout(5):
        await asyncio.gather(first, second)
    assert catalog.calls["load_generic_table_credentials"] == 3


async def test_a_401_forces_one_token_refresh_and_one_retry(catalog, tokens, metrics, clock):
    catalog.valid_tokens = {"token-2"}
    c = client(catalog, tokens, metrics, clock)
    await c.load_table(catalog.warehouse_id, ("ns",), "orders", CTX)
    assert tokens.forced == 1
    assert catalog.calls["load_generic_table"] == 2
    await c.load_table(catalog.warehouse_id, ("ns",), "orders", CTX)
    assert tokens.forced == 1  # the new token is kept


async def test_a_401_after_refresh_is_an_upstream_auth_error(catalog, tokens, metrics, clock):
    catalog.valid_tokens = {"nobody"}
    c = client(catalog, tokens, metrics, clock)
    with pytest.raises(UpstreamAuthError) as info:
        await c.load_table(catalog.warehouse_id, ("ns",), "orders", CTX)
    assert info.value.status == 502
    assert catalog.calls["load_generic_table"] == 2
    assert "token-" not in str(info.value)


async def test_idp_failure_is_not_retried_by_the_catalog_runner(catalog, tokens, metrics, clock):
    tokens.down = True
    c = client(catalog, tokens, metrics, clock)
    with pytest.raises(IdentityProviderError):
        await c.load_table(catalog.warehouse_id, ("ns",), "orders", CTX)
    assert catalog.calls["load_generic_table"] == 0


async def test_unreadable_answer_is_a_protocol_violation(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)

    async def garbage(method, url, headers, body):
        return RawResponse(200, {}, b"<html>")

    catalog.handle = garbage
    with pytest.raises(ProtocolViolationError):
        await c.load_credentials(key(catalog=catalog), CTX)


async def test_warehouse_name_resolves_through_config(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    assert await c.resolve_warehouse_id("demo", CTX) == catalog.warehouse_id
    with pytest.raises(NotFoundError):
        await c.resolve_warehouse_id("nope", CTX)


async def test_list_passes_page_token_and_size(catalog, tokens, metrics, clock):
    for i in range(5):
        catalog.add_table(("p",), f"t{i}")
    c = client(catalog, tokens, metrics, clock)
    names, token, pages = [], None, 0
    while pages < 10:
        page = await c.list_tables(catalog.warehouse_id, ("p",), CTX, page_token=token,
                                   page_size=2)
        pages += 1
        names += [i.name for i in page.identifiers]
        token = page.next_page_token
        if token is None:
            break
    assert names == [f"t{i}" for i in range(5)]
    assert pages == 4


async def test_forward_returns_client_errors_as_they_are(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    catalog.fail("other:GET:catalog/v1/x/namespaces", Fault(status=404, error_type="NoSuchX"))
    resp = await c.forward("GET", "/catalog/v1/x/namespaces", "", None, CTX)
    assert resp.status == 404
    assert b"NoSuchX" in resp.body
    resp = await c.forward("GET", "/catalog/v1/x/namespaces", "pageSize=1", None, CTX)
    assert resp.status == 200


async def test_health_is_one_unauthenticated_attempt(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    assert await c.health() is True
    catalog.fail("health", Fault(status=503))
    assert await c.health() is False
    assert tokens.token_calls == 0


async def test_unsafe_caller_header_values_never_reach_the_catalog(catalog, tokens, metrics,
                                                                   clock):
    c = client(catalog, tokens, metrics, clock)
    bad_rid = RequestContext(request_id="abc\r\nX-Evil: 1")
    await c.load_table(catalog.warehouse_id, ("ns",), "orders", bad_rid)
    sent = catalog.requests[-1][1]["x-request-id"]
    assert "\n" not in sent
    assert len(sent) == 36
    with pytest.raises(InvalidRequestError):
        await c.drop_table(catalog.warehouse_id, ("ns",), "orders",
                           RequestContext(request_id="r", idempotency_key="k\nX: y"))
    with pytest.raises(InvalidRequestError):
        await c.load_table(catalog.warehouse_id, ("ns",), "orders",
                           RequestContext(request_id="r", project_id="p p"))


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\x1f",
                                               blacklist_categories=["Cs"]),
                        min_size=1, max_size=10), min_size=1, max_size=5))
def test_namespace_segment_round_trips_and_stays_one_path_segment(levels):
    segment = ns_segment(tuple(levels))
    assert not set(segment) & set("/?#")
    assert unquote(segment).split("\x1f") == levels


async def test_credentials_come_with_the_catalogs_date(catalog, tokens, metrics, clock):
    c = client(catalog, tokens, metrics, clock)
    creds, date_s = await c.load_credentials_dated(key(catalog=catalog), CTX)
    assert creds
    assert date_s == float(int(clock.true_now()))
    catalog.send_date = False
    _, date_s = await c.load_credentials_dated(key(catalog=catalog), CTX)
    assert date_s is None


async def test_a_slow_session_token_never_keeps_a_call_past_its_deadline(
    catalog, tokens, metrics, clock
):
    """Suspected (real): token() was awaited unbounded, so the IdP's own timeout (10 s + 1),
    not the catalog call's deadline, decided how long a fetch could take."""
    tokens.gate = asyncio.Event()  # the IdP never answers
    # Real time: the deadline and the retry pacing both run on it here.
    c = client(catalog, tokens, metrics, SystemClock(), UPSTREAM__DEADLINE_S="0.3",
               UPSTREAM__TIMEOUT_S="0.3")
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with asyncio.timeout(5):
        with pytest.raises(UpstreamTimeoutError):
            await c.load_credentials(key(catalog=catalog), CTX)
    assert loop.time() - started < 3
    assert catalog.calls["load_generic_table_credentials"] == 0


async def test_the_request_timeout_is_computed_after_the_session_token_arrives(
    catalog, tokens, metrics, clock
):
    # #33 finding 7: the timeout was computed before the token was awaited, so after a slow
    # IdP a request sent at +26 s still got the full 10 s against a 30 s deadline.
    sent: list[float] = []
    c = client(catalog, tokens, metrics, clock, UPSTREAM__DEADLINE_S="30",
               UPSTREAM__TIMEOUT_S="10")
    send = c.transport.send

    async def recording(request):
        sent.append(request.timeout_s)
        return await send(request)

    c.transport.send = recording
    tokens.gate = asyncio.Event()
    call = asyncio.ensure_future(c.load_credentials(key(catalog=catalog), CTX))
    for _ in range(5):
        await asyncio.sleep(0)
    clock.advance(26)  # the IdP answers 26 s into the call
    tokens.gate.set()
    async with asyncio.timeout(5):
        await call
    assert sent == [pytest.approx(4.0)]
