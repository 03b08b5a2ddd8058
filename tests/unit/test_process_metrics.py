"""Process metrics are exported on the App's own (injected) registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from gateway.metrics import Metrics


def test_process_metrics_on_the_injected_registry() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    rss = metrics.registry.get_sample_value("process_resident_memory_bytes")
    assert rss is not None
    assert rss > 0
    fds = registry.get_sample_value("process_open_fds")
    assert fds is not None
    assert fds >= 1
    assert registry.get_sample_value("process_start_time_seconds") is not None
    assert b"process_cpu_seconds_total" in generate_latest(registry)


def test_two_metrics_objects_do_not_collide() -> None:
    # Each App builds its own registry, so tests and embedded gateways can coexist.
    Metrics()
    Metrics()
