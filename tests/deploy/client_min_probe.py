"""Run INSIDE the min-deps venv (only the client's declared minimums, stdlib otherwise).

Imports lakegate_client, then lists one namespace over HTTP and once over gRPC against two
in-process fakes. Prints the runtime versions and exits non-zero on any failure.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from google import protobuf

import lakegate_client
from lakegate.v1 import catalog_pb2, catalog_pb2_grpc, common_pb2


class _Http(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ident = {"namespace": ["ns"], "name": "via_http", "format": "parquet"}
        body = json.dumps({"identifiers": [ident], "next_page_token": None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        """Quiet: the probe prints one summary line."""


class _Catalog(catalog_pb2_grpc.CatalogServiceServicer):  # type: ignore[misc]
    def ListTables(self, request: Any, context: Any) -> Any:
        ident = common_pb2.TableIdentifier(namespace=list(request.namespace), name="via_grpc")
        return catalog_pb2.ListTablesResponse(identifiers=[ident])


def main() -> int:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Http)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    catalog_pb2_grpc.add_CatalogServiceServicer_to_server(_Catalog(), server)
    grpc_port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        urls = {
            "via_http": f"http://127.0.0.1:{httpd.server_address[1]}",
            "via_grpc": f"grpc://127.0.0.1:{grpc_port}",
        }
        for expected, url in urls.items():
            with lakegate_client.Client(url=url, warehouse="wh", timeout_s=10) as client:
                names = [t.name for t in client.list("ns")]
            if names != [expected]:
                print(f"FAIL {url}: listed {names}, expected [{expected!r}]")
                return 1
    finally:
        server.stop(grace=None)
        httpd.shutdown()
    print(
        f"ok: lakegate_client {lakegate_client.__version__} with protobuf {protobuf.__version__},"
        f" grpcio {grpc.__version__}: HTTP and gRPC list calls answered"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
