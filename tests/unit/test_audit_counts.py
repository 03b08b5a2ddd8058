"""No request is missing from the audit: under concurrent load against a real App, the folded
counts plus the single lines equal the requests served, the shutdown flush included."""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import grpc

from gateway.app import App
from gateway.audit import AUDIT_LOGGER, configure_audit
from gateway.service import build_core
from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc
from tests.fakes.catalog import FakeCatalog, FakeIdP
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded
from tests.fakes.settings import make_settings

TOKENS = {"tok-alice-0123": "alice", "tok-bob-4567": "bob"}
TABLES = [f"t{i}" for i in range(6)]
MARK = {"X-Lakegate-Request": "1"}


def _audit(text: str) -> list[dict[str, Any]]:
    docs = (json.loads(line) for line in text.splitlines() if line.startswith("{"))
    # The credential lines (the promise counted here); a refused or failed request also has a
    # `table` line (audit.TableNotes), another kind.
    return [d for d in docs if d.get("logger") == AUDIT_LOGGER and d.get("audit") == "credential"]


def _http_path(surface: str, table: str, access: str) -> str:
    if surface == "aws":
        return f"/v1/aws-credentials/demo/ns/{table}?access={access}"
    return f"/v1/warehouses/demo/namespaces/ns/tables/{table}/credentials?access={access}"


async def test_folded_counts_plus_single_lines_equal_the_requests_served(
    tmp_path: Path, audit_stream: io.StringIO
) -> None:
    configure_audit(True)
    clock = FakeClock()
    catalog = FakeCatalog(clock)
    for name in TABLES:
        catalog.add_table(("ns",), name)
    (tmp_path / "tokens.yaml").write_text("".join(f'"{t}": {n}\n' for t, n in TOKENS.items()))
    settings = make_settings(**{
        "LISTEN__HTTP_PORT": "0", "LISTEN__GRPC_PORT": "0",
        "LISTEN__GRPC_UDS": str(tmp_path / "grpc.sock"),
        "CALLERS__MODE": "token", "CALLERS__TOKENS_FILE": str(tmp_path / "tokens.yaml"),
        "SHUTDOWN_GRACE_S": "5",
    })
    assert settings.log.audit_interval_s == 10.0  # the default folds
    app = App(settings, clock=clock, core_factory=lambda s, m, spawn: build_core(
        s, m, spawn, clock, transport=catalog.transport(FakeIdP()), rng=seeded(3)))
    await app.start()
    served: Counter[tuple[str, str, str, str, int]] = Counter()
    try:
        http = aiohttp.ClientSession(f"http://127.0.0.1:{app.http_port}")
        channel = grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}")
        stub = credentials_pb2_grpc.CredentialServiceStub(channel)

        async def one_http(surface: str, token: str, table: str, access: str) -> None:
            headers = {"Authorization": f"Bearer {token}", **MARK}
            async with http.get(_http_path(surface, table, access), headers=headers) as resp:
                await resp.read()
                served[(surface, TOKENS[token], table, access, resp.status)] += 1

        async def one_grpc(token: str, table: str, access: str) -> None:
            mode = (common_pb2.ACCESS_MODE_WRITE if access == "write"
                    else common_pb2.ACCESS_MODE_READ)
            request = credentials_pb2.GetTableCredentialsRequest(
                table=common_pb2.TableRef(warehouse="demo", namespace=["ns"], name=table),
                access=mode)
            try:
                await stub.GetTableCredentials(
                    request, metadata=(("authorization", f"Bearer {token}"),), timeout=30)
                status = 200
            except grpc.aio.AioRpcError as exc:
                status = 404 if exc.code() is grpc.StatusCode.NOT_FOUND else 500
            served[("grpc", TOKENS[token], table, access, status)] += 1

        async def wave(i: int) -> None:
            calls = []
            for n, token in enumerate(TOKENS):
                for table in [*TABLES, "no_such_table"]:
                    access = "write" if (i + n) % 5 == 0 else "read"
                    calls.append(one_http("http", token, table, access))
                    calls.append(one_http("aws", token, table, access))
                    calls.append(one_grpc(token, table, access))
            await asyncio.gather(*calls)

        async with asyncio.timeout(120):
            for i in range(10):
                await wave(i)
                if i == 4:  # one interval flush in the middle of the load
                    clock.advance(settings.log.audit_interval_s)
                    await clock.settle()
        mid_flush = _audit(audit_stream.getvalue())
        await http.close()
        await channel.close()
    finally:
        await app.shutdown()
    lines = _audit(audit_stream.getvalue())
    assert any(d.get("count") for d in mid_flush), "the interval flush wrote nothing"
    assert len(lines) > len(mid_flush), "the shutdown flush wrote nothing"
    folded = [d for d in lines if "count" in d]
    assert {d["outcome"] for d in folded} <= {"hit", "coalesced"}
    assert {d["access"] for d in folded} == {"read"}
    audited: Counter[tuple[str, str, str, str, str]] = Counter()
    for d in lines:
        audited[(d["surface"], d["caller"], d["table"], d["access"], d["outcome"])] += d.get(
            "count", 1)
    served_ok = sum(n for k, n in served.items() if k[4] == 200)
    assert served_ok + sum(n for k, n in served.items() if k[4] == 404) == sum(served.values())
    # Per (surface, caller, table, access): the audited decisions equal the requests served.
    per_target: Counter[tuple[str, str, str, str]] = Counter()
    for (surface, caller, table, access, _), n in served.items():
        per_target[(surface, caller, table, access)] += n
    audited_target: Counter[tuple[str, str, str, str]] = Counter()
    for (surface, caller, table, access, _), n in audited.items():
        audited_target[(surface, caller, table, access)] += n
    assert audited_target == per_target
    assert sum(audited.values()) == sum(served.values()) == 10 * 2 * 7 * 3
    errors = sum(n for k, n in audited.items() if k[4] == "NotFoundError")
    assert errors == sum(n for k, n in served.items() if k[4] == 404) == 10 * 2 * 3
    # The read hits are folded: far fewer folded lines than the requests they count.
    assert len(folded) * 3 < sum(d["count"] for d in folded)
