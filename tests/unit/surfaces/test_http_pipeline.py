"""The one HTTP pipeline (gateway/surfaces/http_pipeline.py): request ids, route matches,
admission and counting once per request, error rendering."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import warnings
from typing import Any

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.errors import UnavailableError
from gateway.logging import request_id_var
from gateway.metrics import Metrics
from gateway.models import CredentialLookup, Outcome
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.http_app import ROUTER_KEY, HttpDeps, build_pipeline
from gateway.surfaces.http_pipeline import FAILED_LOG_INTERVAL_S, HttpPipeline, Unfinished
from gateway.surfaces.http_routing import OpenRoute, Route
from tests.unit.surfaces.conftest import MakeClient, count, total_requests
from tests.unit.surfaces.fake_operations import FakeClock, FakeOperations

MARK = {"X-Lakegate-Request": "1"}
CREDS = "/v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials"


async def test_request_id_is_echoed_and_generated(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get(CREDS, headers={**MARK, "x-request-id": "abc-123"})
    assert resp.headers["x-request-id"] == "abc-123"
    resp = await client.get(CREDS, headers={**MARK, "x-request-id": "bad id\twith tab"})
    assert resp.headers["x-request-id"] != "bad id\twith tab"
    assert len(resp.headers["x-request-id"]) == 36


async def test_unknown_route_and_wrong_method(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get("/v1/nothing", headers=MARK)
    assert resp.status == 404
    resp = await client.put(CREDS, headers=MARK)
    assert resp.status == 405
    assert (await resp.json())["error"]["code"] == 405


async def test_unexpected_exception_is_500_without_internals(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    fake_ops.errors["get_credentials"] = RuntimeError("db password=hunter2 leaked")  # type: ignore[assignment]
    client = await make_client()
    resp = await client.get(CREDS, headers=MARK)
    assert resp.status == 500
    text = await resp.text()
    assert "hunter2" not in text
    assert "RuntimeError" not in text


async def test_a_memoized_target_still_requires_the_anti_ssrf_marker(
    make_client: MakeClient, metrics
) -> None:
    client = await make_client()
    assert (await client.get(CREDS, headers=MARK)).status == 200
    resp = await client.get(CREDS)
    assert resp.status == 403
    assert (await resp.json())["error"]["type"] == "ForgeableRequest"
    resp = await client.get(CREDS, headers={**MARK, "Origin": "http://evil.example"})
    assert resp.status == 403
    assert count(metrics, "http", "credential", "denied") == 2


async def test_route_matches_are_remembered_only_for_matched_short_targets(
    make_client: MakeClient,
) -> None:
    from gateway.surfaces.http_app import MATCH_CACHE_MAX_TARGET, MATCHES_KEY

    client = await make_client()
    matches = client.server.app[MATCHES_KEY]
    await client.get(CREDS, headers=MARK)
    await client.get(CREDS, headers=MARK)
    assert len(matches) == 1
    assert (await client.get("/v1/nope", headers=MARK)).status == 404
    long_table = "t" * MATCH_CACHE_MAX_TARGET
    await client.get(CREDS.replace("orders", long_table), headers=MARK)
    assert len(matches) == 1
    assert matches.maxsize >= 1


async def test_generated_request_ids_differ_per_request(make_client: MakeClient) -> None:
    client = await make_client()
    ids = {(await client.get(CREDS, headers=MARK)).headers["x-request-id"] for _ in range(5)}
    assert len(ids) == 5


async def test_every_admitted_route_declares_a_surface_and_kind_and_open_routes_are_few(
    make_client: MakeClient,
) -> None:
    client = await make_client()
    routes = client.server.app[ROUTER_KEY].routes()
    admitted = [r for r in routes if isinstance(r, Route)]
    opened = {(r.method, "/".join(r.pattern)) for r in routes if isinstance(r, OpenRoute)}
    assert opened == {("GET", "metrics"), ("GET", "livez"), ("GET", "readyz"),
                      ("GET", "v1/openapi.json")}
    assert {r.surface for r in admitted} == {"http", "rest", "aws"}
    assert all(r.lakekeeper == (r.surface == "rest") for r in admitted)


async def test_a_refused_caller_is_counted_once_as_denied_and_never_reaches_the_handler(
    make_client: MakeClient, fake_ops: FakeOperations, metrics
) -> None:
    client = await make_client(auth=None)
    resp = await client.post("/v1/cache/invalidate", json={"all": True})  # no marker, no auth
    assert resp.status == 403
    assert count(metrics, "http", "admin", "denied") == 1
    assert total_requests(metrics) == 1
    assert fake_ops.calls["invalidate"] == 0


async def test_open_routes_are_neither_admitted_nor_counted(
    make_client: MakeClient, metrics
) -> None:
    client = await make_client()
    for path in ("/livez", "/readyz", "/v1/openapi.json", "/metrics"):
        assert (await client.get(path)).status == 200, path  # no marker: not admitted
    assert total_requests(metrics) == 0


async def test_the_handler_gets_the_admitted_caller_and_the_request_context(
    make_client: MakeClient, fake_ops: FakeOperations
) -> None:
    client = await make_client(allow_project_header=True)  # no policy: any project
    resp = await client.get(CREDS, headers={**MARK, "x-request-id": "rid-1",
                                            "x-project-id": "p1",
                                            "X-Iceberg-Access-Delegation": "vended-credentials"})
    assert resp.status == 200
    ctx = fake_ops.contexts[-1]
    # Only client-managed-only reaches the context (Lakekeeper: anything else vends).
    assert (ctx.request_id, ctx.project_id, ctx.delegation) == ("rid-1", "p1", None)
    assert ctx.caller is not None


def failed_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name == "lakegate.http" and r.getMessage() == "request failed"]


async def test_readyz_failing_on_a_loop_logs_one_warning_per_interval(
    make_client: MakeClient, fake_ops: FakeOperations, clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_ops.ready = (False, "catalog unreachable")
    client = await make_client()
    caplog.set_level(logging.WARNING, logger="lakegate.http")
    for _ in range(10):
        assert (await client.get("/readyz")).status == 503
    assert len(failed_lines(caplog)) == 1
    clock.advance(FAILED_LOG_INTERVAL_S - 1)
    assert (await client.get("/readyz")).status == 503
    assert len(failed_lines(caplog)) == 1
    clock.advance(1)
    assert (await client.get("/readyz")).status == 503
    lines = failed_lines(caplog)
    assert len(lines) == 2
    assert lines[1].levelno == logging.WARNING
    assert lines[1].left_out == 10  # type: ignore[attr-defined]  # the 9 + 1 left out


async def test_the_warning_limit_is_per_route(
    make_client: MakeClient, fake_ops: FakeOperations, caplog: pytest.LogCaptureFixture,
) -> None:
    fake_ops.ready = (False, "catalog unreachable")
    fake_ops.errors["get_credentials"] = UnavailableError("catalog down")
    client = await make_client()
    caplog.set_level(logging.WARNING, logger="lakegate.http")
    for _ in range(3):
        assert (await client.get("/readyz")).status == 503
        assert (await client.get(CREDS, headers=MARK)).status == 503
    assert sorted(r.path for r in failed_lines(caplog)) == [  # type: ignore[attr-defined]
        "/readyz", CREDS]


def _pipeline(fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock) -> HttpPipeline:
    from tests.unit.surfaces.conftest import build_gate
    gate = build_gate(fake_ops, metrics, clock)
    return build_pipeline(HttpDeps(fake_ops, gate, Recorder(metrics, clock), metrics, clock,
                                   1 << 20))


async def test_start_leaves_the_rest_of_an_awaiting_request_to_run_in_its_context(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    # FakeOperations has no at-once hits: the steps must await get_credentials.
    pipeline = _pipeline(fake_ops, metrics, clock)
    request = make_mocked_request("GET", CREDS, headers={**MARK, "Host": "127.0.0.1",
                                                          "x-request-id": "r-1"})
    context = contextvars.copy_context()
    rest = context.run(pipeline.start, request)
    assert isinstance(rest, Unfinished)
    assert request_id_var.get() is None  # set in the request's context only
    assert context.run(request_id_var.get) == "r-1"
    assert total_requests(metrics) == 0  # counted once, when it ends
    response = await asyncio.get_running_loop().create_task(rest.run(), context=context)
    assert response.status == 200
    assert response.headers["x-request-id"] == "r-1"
    assert context.run(request_id_var.get) is None  # the steps reset what they set
    assert total_requests(metrics) == 1


async def test_an_abandoned_rest_is_counted_once_and_leaves_nothing_unawaited(
    fake_ops: FakeOperations, metrics: Metrics, clock: FakeClock
) -> None:
    pipeline = _pipeline(fake_ops, metrics, clock)
    request = make_mocked_request("GET", CREDS, headers={**MARK, "Host": "127.0.0.1"})
    context = contextvars.copy_context()
    rest = context.run(pipeline.start, request)
    assert isinstance(rest, Unfinished)
    gc.collect()  # earlier tests' garbage first (an unclosed socket warns as it goes)
    with warnings.catch_warnings():
        # "coroutine ... was never awaited" is raised; anything else keeps the suite's filters
        warnings.filterwarnings("error", message="coroutine .* was never awaited",
                                category=RuntimeWarning)
        context.run(rest.close)
        gc.collect()
    assert context.run(request_id_var.get) is None
    assert count(metrics, "http", "credential", "error") == 1
    assert total_requests(metrics) == 1


class AtOnceOperations(FakeOperations):
    """FakeOperations whose credentials are answered at once once `cached` is set."""

    cached = False

    def credentials_now(self, ref: Any, access: Any, ctx: Any, *,
                        min_left_s: float | None = None) -> Any:
        if not self.cached:
            return None
        table = self._table(ref)
        return CredentialLookup(warehouse=self._wh(ref.warehouse), ref=ref, access=access,
                                credentials=self.credential_set(table), outcome=Outcome.HIT,
                                remaining_s=self.lifetime_s, identity_ttl_s=None)


async def test_a_target_is_ready_at_once_after_an_answer_without_await_and_not_after_one_with(
    metrics: Metrics, clock: FakeClock
) -> None:
    ops = AtOnceOperations()
    ops.add_table(("demo_ns",), "orders")
    pipeline = _pipeline(ops, metrics, clock)

    def request() -> Any:
        return make_mocked_request("GET", CREDS, headers={**MARK, "Host": "127.0.0.1"})

    async def run(req: Any) -> Any:
        context = contextvars.copy_context()
        started = context.run(pipeline.start, req)
        if isinstance(started, Unfinished):
            return await asyncio.get_running_loop().create_task(started.run(),
                                                                context=context)
        return started

    assert not pipeline.ready("GET", CREDS)  # never seen
    assert (await run(request())).status == 200  # a miss: awaited
    assert not pipeline.ready("GET", CREDS)
    ops.cached = True
    assert (await run(request())).status == 200  # answered without an await
    assert pipeline.ready("GET", CREDS)
    assert not pipeline.ready("POST", CREDS)
    ops.cached = False
    assert (await run(request())).status == 200  # awaited again (a refresh, say)
    assert not pipeline.ready("GET", CREDS)
