"""A small real gateway stand-in for the client's tests: the native HTTP API and the gRPC API.

Run as a subprocess (``python fake_gateway_server.py --run-dir D``): it listens on loopback TCP
and Unix sockets for both protocols, writes ``D/ready.json`` with its addresses, and serves
scripted answers chosen by table name:

``missing`` 404, ``denied`` 403, ``limited`` 429 (Retry-After 7), ``broken`` 500, ``down`` 503,
``slow`` sleeps 3 s, ``short`` expires in 100 s, ``noexpiry`` has no expiry, ``exists`` (create)
409; anything else succeeds with a credential valid for one hour.

Credential answers state ``identity_ttl_s`` (gRPC ``identity_ttl_seconds``) = ``IDENTITY_TTL_S``,
except for tables named ``legacy*`` (a gateway that states none). ``POST /_fake/replace?table=T``
replaces table ``T`` (drop and create again: a new location ``.../T-v<n>``); a credential request
naming another ``expected_location`` is refused 409 ``TableIdentityMismatch``
(``FAILED_PRECONDITION``), as the gateway refuses it.

``GET /_fake/stats`` answers call counters and the last caller headers seen; it exists only here.
It runs in its own process so that the forking tests never fork a process with gRPC server threads.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from aiohttp import web

from lakegate.v1 import (
    catalog_pb2,
    catalog_pb2_grpc,
    common_pb2,
    credentials_pb2,
    credentials_pb2_grpc,
)

ERRORS: dict[str, tuple[int, str, grpc.StatusCode]] = {
    "missing": (404, "NoSuchGenericTableException", grpc.StatusCode.NOT_FOUND),
    "denied": (403, "PermissionDenied", grpc.StatusCode.PERMISSION_DENIED),
    "limited": (429, "RateLimited", grpc.StatusCode.RESOURCE_EXHAUSTED),
    "broken": (500, "InternalError", grpc.StatusCode.INTERNAL),
    "down": (503, "UpstreamUnavailable", grpc.StatusCode.UNAVAILABLE),
}
REQUEST_ID = "0b7e3f5c-0000-4000-8000-000000000001"
IDENTITY_TTL_S = 600.0
MISMATCH = (409, "TableIdentityMismatch", grpc.StatusCode.FAILED_PRECONDITION)


class State:
    """Counters and the last caller headers, shared by both protocols."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.last: dict[str, str] = {}
        self.generations: dict[str, int] = {}  # table → times replaced

    def location(self, namespace: list[str], table: str) -> str:
        generation = self.generations.get(table, 0)
        suffix = f"-v{generation}" if generation else ""
        return f"s3://bucket/{'/'.join(namespace)}/{table}{suffix}"

    def answer(self, namespace: list[str], table: str, expected_location: str) -> dict[str, Any]:
        """The credential answer for the table as it is now; raises Mismatch for another
        expected location."""
        location = self.location(namespace, table)
        if expected_location and expected_location.rstrip("/") != location:
            raise Mismatch(f"table {table} is not at {expected_location}")
        body = credential(namespace, table, location)
        if not table.startswith("legacy"):
            body["identity_ttl_s"] = IDENTITY_TTL_S
        return body

    def count(self, op: str, headers: dict[str, str]) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        self.last = {
            "authorization": headers.get("authorization", ""),
            "x-lakegate-request": headers.get("x-lakegate-request", ""),
            "idempotency-key": headers.get("idempotency-key", ""),
            "op": op,
        }


class Mismatch(Exception):
    """The caller's expected identity is not the table's."""


def credential(namespace: list[str], table: str, location: str = "") -> dict[str, Any]:
    location = location or f"s3://bucket/{'/'.join(namespace)}/{table}"
    now_ms = int(time.time() * 1000)
    expires = {"short": now_ms + 100_000, "noexpiry": 0}.get(table, now_ms + 3_600_000)
    config = {
        "s3.access-key-id": "AKIAFAKEKEY",
        "s3.secret-access-key": "fake-secret-value",
        "s3.session-token": "fake-session-token",
        "s3.endpoint": "http://127.0.0.1:9/",
        "s3.region": "eu-west-1",
        "s3.path-style-access": "true",
    }
    if expires:
        config["s3.session-token-expires-at-ms"] = str(expires)
    return {
        "location": location,
        "expires_at_ms": expires,
        "credentials": [
            {"prefix": "s3://bucket/", "config": {"s3.region": "wrong"}, "expires_at_ms": expires},
            {"prefix": location, "config": config, "expires_at_ms": expires},
        ],
    }


def table_json(namespace: list[str], name: str, fmt: str = "parquet") -> dict[str, Any]:
    return {
        "name": name,
        "format": fmt,
        "base_location": f"s3://bucket/{'/'.join(namespace)}/{name}",
        "protected": False,
        "doc": None,
        "properties": {"owner": "fake"},
    }


# -- HTTP ----------------------------------------------------------------------------------------


Handler = Callable[[web.Request], Awaitable[web.Response]]
# A route's body, given the path's namespace and table (the table is "" on routes without one).
TableHandler = Callable[[web.Request, list[str], str], Awaitable[web.Response]]


def http_app(state: State) -> web.Application:
    def envelope(status: int, type_: str, message: str) -> web.Response:
        body = {
            "error": {
                "message": message,
                "type": type_,
                "code": status,
                "stack": [f"Error ID: {REQUEST_ID}"],
            }
        }
        headers = {"Retry-After": "7"} if status == 429 else {}
        return web.json_response(body, status=status, headers=headers)

    def parse(request: web.Request, op: str) -> tuple[list[str], str] | web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        state.count(op, headers)
        if "authorization" not in headers and headers.get("x-lakegate-request") != "1":
            return envelope(
                403, "ForgeableRequest", "refused: no Authorization or X-Lakegate-Request"
            )
        ns = request.match_info.get("ns", "").split("\x1f")
        return ns, request.match_info.get("table", "")

    async def scripted(name: str) -> web.Response | None:
        if name == "slow":
            await asyncio.sleep(3)
        if name in ERRORS:
            status, type_, _ = ERRORS[name]
            return envelope(status, type_, f"scripted {type_} for table {name}")
        return None

    def handles(op: str) -> Callable[[TableHandler], Handler]:
        """Every route's prologue: count the call as `op`, refuse a forgeable request, answer a
        scripted error for the path's table (routes without one have the name "")."""

        def wrap(handler: TableHandler) -> Handler:
            async def serve(request: web.Request) -> web.Response:
                parsed = parse(request, op)
                if isinstance(parsed, web.Response):
                    return parsed
                ns, name = parsed
                if (err := await scripted(name)) is not None:
                    return err
                return await handler(request, ns, name)

            return serve

        return wrap

    @handles("credentials")
    async def credentials(request: web.Request, ns: list[str], name: str) -> web.Response:
        try:
            body = state.answer(ns, name, request.query.get("expected_location", ""))
        except Mismatch as exc:
            return envelope(MISMATCH[0], MISMATCH[1], str(exc))
        remaining = (
            max(body["expires_at_ms"] / 1000 - time.time(), 0) if body["expires_at_ms"] else 0
        )
        body.update(
            warehouse_id="wh-uuid",
            namespace=ns,
            table=name,
            access=request.query.get("access", "read"),
            remaining_s=remaining,
            outcome="hit",
        )
        return web.json_response(body)

    @handles("load")
    async def load(request: web.Request, ns: list[str], name: str) -> web.Response:
        body: dict[str, Any] = {
            "table": table_json(ns, name),
            "config": {"s3.region": "eu-west-1"},
            "credentials": [],
            "warehouse_id": "wh-uuid",
        }
        if request.query.get("vended") == "true":
            body["credentials"] = credential(ns, name)["credentials"]
        return web.json_response(body)

    @handles("list")
    async def list_tables(request: web.Request, ns: list[str], _: str) -> web.Response:
        names = ["a", "b", "c"]
        start = 2 if request.query.get("page_token") == "p2" else 0
        page = names[start : start + 2]
        return web.json_response(
            {
                "identifiers": [
                    {"namespace": ns, "name": n, "format": "parquet", "id": f"id-{n}"} for n in page
                ],
                "next_page_token": "p2" if start == 0 else None,
            }
        )

    @handles("create")
    async def create(request: web.Request, ns: list[str], _: str) -> web.Response:
        body = await request.json()
        if body["name"] == "exists":
            return envelope(409, "GenericTableAlreadyExists", "table exists")
        return web.json_response(
            {
                "table": table_json(ns, body["name"], body["format"]),
                "config": {},
                "credentials": [],
                "warehouse_id": "wh-uuid",
            }
        )

    @handles("drop")
    async def drop(request: web.Request, ns: list[str], name: str) -> web.Response:
        return web.Response(status=204)

    @handles("rename")
    async def rename(request: web.Request, ns: list[str], name: str) -> web.Response:
        return web.Response(status=204)

    async def replace(request: web.Request) -> web.Response:
        table = request.query["table"]
        state.generations[table] = state.generations.get(table, 0) + 1
        return web.json_response({"generation": state.generations[table]})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response({"calls": state.calls, "last": state.last, "pid": os.getpid()})

    app = web.Application()
    base = "/v1/warehouses/{wh}/namespaces/{ns}/tables"
    app.router.add_get(base + "/{table}/credentials", credentials)
    app.router.add_get(base + "/{table}", load)
    app.router.add_get(base, list_tables)
    app.router.add_post(base, create)
    app.router.add_delete(base + "/{table}", drop)
    app.router.add_post("/v1/warehouses/{wh}/tables/rename", rename)
    app.router.add_get("/_fake/stats", stats)
    app.router.add_post("/_fake/replace", replace)
    return app


# -- gRPC ----------------------------------------------------------------------------------------


async def abort_scripted(context: grpc.aio.ServicerContext, name: str) -> None:
    if name == "slow":
        await asyncio.sleep(3)
    if name in ERRORS:
        status, type_, code = ERRORS[name]
        detail = common_pb2.ErrorDetail(
            type=type_,
            message=f"scripted {type_} for table {name}",
            http_status=status,
            request_id=REQUEST_ID,
        )
        trailing: tuple[tuple[str, str | bytes], ...] = (
            ("lakegate-error-bin", detail.SerializeToString()),
        )
        if status == 429:
            trailing += (("retry-after", "7"),)
        await context.abort(code, detail.message, trailing_metadata=trailing)


def grpc_headers(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}


class Credentials(credentials_pb2_grpc.CredentialServiceServicer):
    def __init__(self, state: State) -> None:
        self.state = state

    async def GetTableCredentials(self, request: Any, context: Any) -> Any:
        self.state.count("credentials", grpc_headers(context))
        await abort_scripted(context, request.table.name)
        try:
            body = self.state.answer(list(request.table.namespace), request.table.name,
                                     request.expected_location)
        except Mismatch as exc:
            status, type_, code = MISMATCH
            detail = common_pb2.ErrorDetail(type=type_, message=str(exc), http_status=status)
            await context.abort(code, str(exc), trailing_metadata=(
                ("lakegate-error-bin", detail.SerializeToString()),))
        remaining = (
            max(body["expires_at_ms"] / 1000 - time.time(), 0) if body["expires_at_ms"] else 0
        )
        return credentials_pb2.GetTableCredentialsResponse(
            warehouse_id="wh-uuid",
            location=body["location"],
            expires_at_ms=body["expires_at_ms"],
            remaining_seconds=remaining,
            outcome=common_pb2.CACHE_OUTCOME_MISS,
            access=request.access,
            credentials=[common_pb2.StorageCredential(**c) for c in body["credentials"]],
            identity_ttl_seconds=body.get("identity_ttl_s"),
        )


class Catalog(catalog_pb2_grpc.CatalogServiceServicer):
    def __init__(self, state: State) -> None:
        self.state = state

    @staticmethod
    def _table(ns: list[str], name: str, fmt: str = "parquet") -> common_pb2.GenericTable:
        t = table_json(ns, name, fmt)
        return common_pb2.GenericTable(
            name=t["name"],
            format=t["format"],
            base_location=t["base_location"],
            properties=t["properties"],
        )

    async def LoadTable(self, request: Any, context: Any) -> Any:
        self.state.count("load", grpc_headers(context))
        await abort_scripted(context, request.table.name)
        ns = list(request.table.namespace)
        creds = credential(ns, request.table.name)["credentials"] if request.vended else []
        return catalog_pb2.LoadTableResponse(
            table=self._table(ns, request.table.name),
            config={"s3.region": "eu-west-1"},
            credentials=[common_pb2.StorageCredential(**c) for c in creds],
            warehouse_id="wh-uuid",
        )

    async def ListTables(self, request: Any, context: Any) -> Any:
        self.state.count("list", grpc_headers(context))
        names = ["a", "b", "c"]
        start = 2 if request.page_token == "p2" else 0  # noqa: S105
        return catalog_pb2.ListTablesResponse(
            identifiers=[
                common_pb2.TableIdentifier(
                    namespace=list(request.namespace), name=n, format="parquet", id=f"id-{n}"
                )
                for n in names[start : start + 2]
            ],
            next_page_token="p2" if start == 0 else "",
        )

    async def CreateTable(self, request: Any, context: Any) -> Any:
        headers = grpc_headers(context)
        headers["idempotency-key"] = request.idempotency_key
        self.state.count("create", headers)
        if request.table.name == "exists":
            detail = common_pb2.ErrorDetail(
                type="GenericTableAlreadyExists", message="table exists", http_status=409
            )
            await context.abort(
                grpc.StatusCode.ALREADY_EXISTS,
                "table exists",
                trailing_metadata=(("lakegate-error-bin", detail.SerializeToString()),),
            )
        ns = list(request.table.namespace)
        return catalog_pb2.LoadTableResponse(
            table=self._table(ns, request.table.name, request.format), warehouse_id="wh-uuid"
        )

    async def DropTable(self, request: Any, context: Any) -> Any:
        self.state.count("drop", grpc_headers(context))
        await abort_scripted(context, request.table.name)
        return catalog_pb2.DropTableResponse()

    async def RenameTable(self, request: Any, context: Any) -> Any:
        self.state.count("rename", grpc_headers(context))
        return catalog_pb2.RenameTableResponse()


async def serve(run_dir: Path) -> None:
    state = State()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    runner = web.AppRunner(http_app(state), access_log=None)
    await runner.setup()
    http_tcp = web.TCPSite(runner, "127.0.0.1", 0)
    http_uds_path = str(run_dir / "http.sock")
    http_uds = web.UnixSite(runner, http_uds_path)
    await http_tcp.start()
    await http_uds.start()
    http_port = http_tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    server = grpc.aio.server()
    credentials_pb2_grpc.add_CredentialServiceServicer_to_server(Credentials(state), server)
    catalog_pb2_grpc.add_CatalogServiceServicer_to_server(Catalog(state), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    grpc_uds_path = str(run_dir / "grpc.sock")
    server.add_insecure_port(f"unix:{grpc_uds_path}")
    await server.start()

    info = {
        "http_url": f"http://127.0.0.1:{http_port}",
        "http_uds": http_uds_path,
        "grpc_target": f"127.0.0.1:{grpc_port}",
        "grpc_uds": grpc_uds_path,
        "pid": os.getpid(),
    }
    tmp = run_dir / "ready.json.tmp"
    tmp.write_text(json.dumps(info))
    tmp.rename(run_dir / "ready.json")
    await stop.wait()
    await server.stop(1)
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.run_dir))


if __name__ == "__main__":
    main()
