"""The OpenAPI document covers every /v1 route the router serves, and nothing else."""

from __future__ import annotations

import json

from gateway.metrics import Metrics
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.http_app import HttpDeps, build_router
from gateway.surfaces.openapi import openapi_document
from tests.unit.surfaces.conftest import build_gate
from tests.unit.surfaces.fake_operations import FakeClock, FakeOperations


def served_v1_routes(metrics: Metrics, clock: FakeClock) -> set[tuple[str, str]]:
    ops = FakeOperations()
    deps = HttpDeps(ops, build_gate(ops, metrics, clock), Recorder(metrics, clock), metrics,
                    clock, 1024)
    return {(route.method.lower(), "/" + "/".join(route.pattern))
            for route in build_router(deps).routes() if route.pattern[0] == "v1"}


def test_every_v1_route_is_documented_and_nothing_more(metrics: Metrics,
                                                      clock: FakeClock) -> None:
    doc = openapi_document()
    documented = {(m, p) for p, item in doc["paths"].items() for m in item}
    assert documented == served_v1_routes(metrics, clock)


def test_document_is_openapi_3_1_json_with_resolvable_refs() -> None:
    doc = openapi_document()
    assert doc["openapi"] == "3.1.0"
    text = json.dumps(doc)
    for ref in {part.split('"')[0] for part in text.split('"$ref": "')[1:]}:
        name = ref.removeprefix("#/components/schemas/")
        assert name in doc["components"]["schemas"], ref


def test_document_is_a_fresh_copy() -> None:
    openapi_document()["paths"].clear()
    assert openapi_document()["paths"]
