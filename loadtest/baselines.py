"""Trivial servers the gateway's throughput is compared against, run as a child process.

`python -m loadtest.baselines --ports-file F --http-uds S --grpc-uds G [--http-body B]
[--grpc-body P] [--aws-body A]` serves, until SIGTERM:
- aiohttp on uvloop answering every GET with a prebuilt JSON body (by default a synthetic
  credential response, or the AWS container-credentials shape under /v1/aws-credentials/; the
  bench passes real gateway answers so sizes match), on TCP and UDS;
- grpc.aio with the generated `CredentialService` stub answering a prebuilt
  `GetTableCredentialsResponse`, on TCP and UDS.
It writes `{"http_port": .., "grpc_port": ..}` to the ports file once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web

_FAKE_TOKEN = "x" * 920  # a SeaweedFS STS session token is ~920 characters


def synthetic_http_body(now_ms: int | None = None) -> bytes:
    """A JSON document shaped and sized like the gateway's `CredentialsResponse`."""
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    expires = now_ms + 3_600_000
    config = {
        "s3.access-key-id": "ASIA" + "X" * 16,
        "s3.secret-access-key": "s" * 40,
        "s3.session-token": _FAKE_TOKEN,
        "s3.session-token-expires-at-ms": str(expires),
        "expiration-time": str(expires),
        "s3.region": "us-east-1",
        "client.region": "us-east-1",
        "s3.endpoint": "http://127.0.0.1:8333/",
        "s3.path-style-access": "true",
    }
    doc = {
        "warehouse_id": "0198f0c2-1f2e-7b0a-9c4d-5e6f7a8b9c0d",
        "namespace": ["demo_ns"],
        "table": "orders",
        "access": "read",
        "location": "s3://warehouse/tables/orders",
        "expires_at_ms": expires,
        "remaining_s": 3599.0,
        "outcome": "hit",
        "credentials": [
            {"prefix": "s3://warehouse/tables/orders", "config": config, "expires_at_ms": expires}
        ],
    }
    return json.dumps(doc).encode()


def synthetic_aws_body() -> bytes:
    """The AWS container-credentials JSON shape, sized like a SeaweedFS STS credential."""
    doc = {
        "AccessKeyId": "ASIA" + "X" * 16,
        "SecretAccessKey": "s" * 40,
        "Token": _FAKE_TOKEN,
        "Expiration": "2026-11-21T20:00:00Z",
    }
    return json.dumps(doc).encode()


def synthetic_grpc_body(now_ms: int | None = None) -> bytes:
    """A serialised `GetTableCredentialsResponse` with the same fields as the JSON body."""
    from lakegate.v1 import common_pb2, credentials_pb2

    doc = json.loads(synthetic_http_body(now_ms))
    cred = doc["credentials"][0]
    msg = credentials_pb2.GetTableCredentialsResponse(
        warehouse_id=doc["warehouse_id"],
        location=doc["location"],
        credentials=[
            common_pb2.StorageCredential(
                prefix=cred["prefix"], config=cred["config"], expires_at_ms=cred["expires_at_ms"]
            )
        ],
        expires_at_ms=doc["expires_at_ms"],
        remaining_seconds=doc["remaining_s"],
        outcome=common_pb2.CACHE_OUTCOME_HIT,
        access=common_pb2.ACCESS_MODE_READ,
    )
    return bytes(msg.SerializeToString())


def http_app(http_body: bytes, aws_body: bytes) -> web.Application:
    """The trivial aiohttp app: every GET answered with a prebuilt JSON body (the AWS shape
    under /v1/aws-credentials/). Also run in-process by `loadtest.cpu`."""
    from aiohttp import web

    async def creds(_request: web.Request) -> web.Response:
        return web.Response(body=http_body, content_type="application/json")

    app = web.Application()

    async def aws(_request: web.Request) -> web.Response:
        return web.Response(body=aws_body, content_type="application/json")

    app.router.add_get("/v1/aws-credentials/{tail:.*}", aws)
    app.router.add_get("/{tail:.*}", creds)
    return app


async def serve(
    ports_file: Path,
    http_uds: Path,
    grpc_uds: Path,
    http_body: bytes,
    grpc_body: bytes,
    aws_body: bytes,
) -> None:
    """Serve both baselines until SIGTERM/SIGINT."""
    import grpc
    from aiohttp import web

    from lakegate.v1 import credentials_pb2, credentials_pb2_grpc

    runner = web.AppRunner(http_app(http_body, aws_body), access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await tcp.start()
    await web.UnixSite(runner, str(http_uds), backlog=4096).start()
    http_port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    prebuilt = credentials_pb2.GetTableCredentialsResponse.FromString(grpc_body)

    class Servicer(credentials_pb2_grpc.CredentialServiceServicer):
        async def GetTableCredentials(self, request: object, context: object) -> object:
            return prebuilt

    server = grpc.aio.server()
    credentials_pb2_grpc.add_CredentialServiceServicer_to_server(Servicer(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.add_insecure_port(f"unix:{grpc_uds}")
    await server.start()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ports = json.dumps({"http_port": http_port, "grpc_port": grpc_port})
    await asyncio.to_thread(ports_file.write_text, ports)
    await stop.wait()
    await server.stop(1)
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ports-file", type=Path, required=True)
    parser.add_argument("--http-uds", type=Path, required=True)
    parser.add_argument("--grpc-uds", type=Path, required=True)
    parser.add_argument("--http-body", type=Path)
    parser.add_argument("--grpc-body", type=Path)
    parser.add_argument("--aws-body", type=Path)
    args = parser.parse_args()
    http_body = args.http_body.read_bytes() if args.http_body else synthetic_http_body()
    grpc_body = args.grpc_body.read_bytes() if args.grpc_body else synthetic_grpc_body()
    import uvloop

    # The gateway runs on uvloop too; the same loop makes the comparison fair.
    aws_body = args.aws_body.read_bytes() if args.aws_body else synthetic_aws_body()
    uvloop.run(serve(args.ports_file, args.http_uds, args.grpc_uds, http_body, grpc_body, aws_body))


if __name__ == "__main__":
    main()
