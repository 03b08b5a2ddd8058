"""SigningService: forwarded signing (a warehouse without STS) and the signature's clock."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.errors import GatewayError, NotFoundError
from gateway.models import (
    AccessMode,
    CredentialLookup,
    CredentialSet,
    Outcome,
    RequestContext,
    StorageCredential,
    TableRef,
    UpstreamResponse,
    Warehouse,
)
from gateway.service.signing import SigningService
from gateway.signing.request import parse_sign_request
from tests.fakes.clock import FakeClock

WH = Warehouse(id="0190-wh", name="demo")
REF = TableRef("demo", ("ns",), "t", kind="iceberg")
LOCATION = "s3://bkt/wh/t"
CONFIG = {"s3.endpoint": "http://127.0.0.1:8333/", "s3.path-style-access": "true",
          "s3.region": "us-east-1"}
URI = "http://127.0.0.1:8333/bkt/wh/t/data/f"
CTX = RequestContext("req-1")


@dataclass
class FakeSigningOps:
    """The catalog side: no vended key (a signing-only warehouse), a load and a signer."""

    keys: dict[str, str] | None = None
    sign_answer: tuple[int, Any] = (200, None)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    load_gate: asyncio.Event | None = None

    def credentials_now(self, ref: TableRef, access: AccessMode,
                        ctx: RequestContext) -> CredentialLookup | None:
        return None  # every signature takes the awaited path here

    async def get_credentials(self, ref: TableRef, access: AccessMode,
                              ctx: RequestContext) -> CredentialLookup:
        creds = () if self.keys is None else (StorageCredential(LOCATION, self.keys),)
        return CredentialLookup(WH, ref, access, CredentialSet(creds, None, location=LOCATION),
                                Outcome.HIT, 3600.0)

    async def forward(self, method: str, path: str, query: str, body: bytes | None,
                      ctx: RequestContext, headers: Any = None) -> UpstreamResponse:
        self.calls.append((method, path, json.loads(body) if body else None))
        if method == "GET":
            if self.load_gate is not None:
                await self.load_gate.wait()
            doc = {"metadata": {"location": LOCATION}, "config": CONFIG}
            return UpstreamResponse(200, {}, json.dumps(doc).encode())
        status, doc = self.sign_answer
        if doc is None:
            doc = {"uri": json.loads(body or b"{}")["uri"],
                   "headers": {"authorization": ["AWS4-HMAC-SHA256 by-the-catalog"],
                               "Cache-Control": ["private"]}}
        raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        return UpstreamResponse(status, {}, raw)


def _service(ops: FakeSigningOps, clock: FakeClock, **kw: Any) -> SigningService:
    return SigningService(ops, clock, asyncio.ensure_future, **kw)  # type: ignore[arg-type]


def _req(uri: str = URI, method: str = "GET") -> Any:
    return parse_sign_request({"region": "us-east-1", "uri": uri, "method": method,
                               "headers": {"Range": ["bytes=0-1"]}})


async def test_forwarded_signing_checks_first_and_sends_the_request_as_received(
        clock: FakeClock) -> None:
    ops = FakeSigningOps()
    signer = _service(ops, clock)
    signed = await signer.sign(REF, _req(), CTX)
    assert signed.mode == "forwarded"
    assert signed.headers == {"authorization": ["AWS4-HMAC-SHA256 by-the-catalog"]}
    load, sign = ops.calls
    assert load[:2] == ("GET", "/catalog/v1/0190-wh/namespaces/ns/tables/t")
    assert sign == ("POST", "/catalog/v1/0190-wh/v1/aws/s3/sign",
                    {"region": "us-east-1", "uri": URI, "method": "GET",
                     "headers": {"Range": ["bytes=0-1"]}})
    await signer.sign(REF, _req(), CTX)
    assert [c[0] for c in ops.calls] == ["GET", "POST", "POST"]  # the address is cached
    with pytest.raises(GatewayError) as err:
        await signer.sign(REF, _req("http://127.0.0.1:8333/bkt/wh/t2/f"), CTX)
    assert err.value.status == 403
    assert len(ops.calls) == 3  # refused before the catalog


async def test_concurrent_first_signatures_share_one_table_load(clock: FakeClock) -> None:
    ops = FakeSigningOps(load_gate=asyncio.Event())
    signer = _service(ops, clock)
    tasks = [asyncio.ensure_future(signer.sign(REF, _req(), CTX)) for _ in range(20)]
    await asyncio.sleep(0)
    ops.load_gate.set()  # type: ignore[union-attr]
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert [c[0] for c in ops.calls].count("GET") == 1


@pytest.mark.parametrize(("answer", "status"), [
    ((403, {"error": {"type": "NotAuthorized"}}), 403),
    ((500, {"error": {}}), 503),
    ((200, b"not json"), 502),
    ((200, {"uri": URI + "?x=1", "headers": {}}), 502),
    ((200, {"uri": URI}), 502),
])
async def test_the_catalogs_signer_answers_are_mapped_never_passed_blindly(
        clock: FakeClock, answer: tuple[int, Any], status: int) -> None:
    signer = _service(FakeSigningOps(sign_answer=answer), clock)
    with pytest.raises(GatewayError) as err:
        await signer.sign(REF, _req(), CTX)
    assert err.value.status == status


async def test_a_load_without_location_is_not_found(clock: FakeClock) -> None:
    ops = FakeSigningOps()

    async def no_location(*args: Any, **kwargs: Any) -> UpstreamResponse:
        return UpstreamResponse(200, {}, b'{"metadata": {}}')

    ops.forward = no_location  # type: ignore[method-assign]
    with pytest.raises(NotFoundError):
        await _service(ops, clock).sign(REF, _req(), CTX)


async def test_signature_time_follows_the_catalogs_clock_when_the_local_one_is_off(
        clock: FakeClock) -> None:
    keys = {**CONFIG, "s3.access-key-id": "ASIA1", "s3.secret-access-key": "s",
            "s3.session-token": "tok"}
    local = await _service(FakeSigningOps(keys=keys), clock).sign(REF, _req(), CTX)
    assert local.mode == "local"
    skewed = _service(FakeSigningOps(keys=keys), clock,
                      reference_now=lambda: clock.now() + 3600.0, max_skew_s=60.0)
    ahead = await skewed.sign(REF, _req(), CTX)
    close = _service(FakeSigningOps(keys=keys), clock,
                     reference_now=lambda: clock.now() + 5.0, max_skew_s=60.0)
    near = await close.sign(REF, _req(), CTX)
    hour = lambda signed: int(signed.headers["x-amz-date"][0][9:11])  # noqa: E731
    assert hour(ahead) == (hour(local) + 1) % 24
    assert near.headers["x-amz-date"] == local.headers["x-amz-date"]
