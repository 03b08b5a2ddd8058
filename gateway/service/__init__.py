"""The service layer: GatewayService and its wiring (see gateway_service.py, wiring.py)."""

from gateway.service.gateway_service import GatewayService, Spawn
from gateway.service.wiring import build_service, catalog_fetcher

__all__ = ["GatewayService", "Spawn", "build_service", "catalog_fetcher"]
