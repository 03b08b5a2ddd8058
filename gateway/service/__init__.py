"""The service layer: GatewayService and the Core that wires and runs it (wiring.py)."""

from gateway.concurrency import Spawn
from gateway.service.gateway_service import GatewayService
from gateway.service.wiring import Core, build_core, catalog_fetcher

__all__ = ["Core", "GatewayService", "Spawn", "build_core", "catalog_fetcher"]
