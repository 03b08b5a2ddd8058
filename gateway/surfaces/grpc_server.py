"""The grpc.aio server: both lakegate.v1 services, the standard health service, reflection.

Bound on loopback TCP and on a UDS (mode 0660). The health service reports SERVING only once the
gateway is ready (the App flips it), and NOT_SERVING when it drains.
"""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from gateway.surfaces.accounting import Recorder
from gateway.surfaces.grpc_servicers import method_handlers
from gateway.surfaces.ingress import Gate
from gateway.surfaces.operations import Operations
from lakegate.v1 import catalog_pb2, credentials_pb2

RPC_TASK_NAME = "rpc_task"
"""The name grpc.aio's server gives the task of each call it handles (grpc 1.5x-1.8x)."""

SERVICE_NAMES = (
    credentials_pb2.DESCRIPTOR.services_by_name["CredentialService"].full_name,
    catalog_pb2.DESCRIPTOR.services_by_name["CatalogService"].full_name,
)


class GrpcSurface:
    """The gRPC server and its health servicer (the App binds, starts and stops it)."""

    def __init__(
        self, ops: Operations, gate: Gate, recorder: Recorder, *, max_message_bytes: int
    ) -> None:
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", 16 * max_message_bytes),
                ("grpc.so_reuseport", 0),
            ]
        )
        self._calls = recorder.grpc_calls
        self._counted_at = 0  # the calls started at the last count
        self._in_flight = 0  # what it found
        for service, handlers in method_handlers(ops, gate, recorder).items():
            self.server.add_registered_method_handlers(service, handlers)
        self.health = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.enable_server_reflection(
            (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
             reflection.SERVICE_NAME),
            self.server,
        )

    def calls_in_flight(self) -> int:
        """The calls a grpc.aio server on the running loop is handling now (received and not
        finished: awaiting their message, in a handler, or sending the answer), counted by
        grpc.aio's task per call; 0 if a grpc release names that task otherwise.

        Counted only when a handler of this server started a call since the last count or the
        last count found calls, else 0 at once (nothing started, nothing was running): the
        count walks every task of the loop (one per open HTTP connection), which a loop
        without gRPC calls, say a cold herd of ten thousand HTTP requests, should not pay for
        40 times a second.
        """
        started = self._calls.count
        if started == self._counted_at and not self._in_flight:
            return 0
        self._counted_at = started
        self._in_flight = sum(1 for task in asyncio.all_tasks()
                              if task.get_name() == RPC_TASK_NAME)
        return self._in_flight

    def bind_tcp(self, host: str, port: int) -> int:
        """Bind loopback TCP; returns the actual port (port 0 picks a free one).

        Raises:
            OSError: the address cannot be bound.
        """
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        bound = self.server.add_insecure_port(target)
        if bound == 0:
            raise OSError(f"cannot bind gRPC on {target}")
        return bound

    def bind_uds(self, path: str) -> None:
        if self.server.add_insecure_port(f"unix:{path}") == 0:
            raise OSError(f"cannot bind gRPC on unix:{path}")

    async def set_serving(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, status)
