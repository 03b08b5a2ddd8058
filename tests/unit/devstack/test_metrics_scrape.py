"""Prometheus text parsing used as fault evidence."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from devstack.metrics_scrape import delta, parse, scrape, total

TEXT = """# HELP lakegate_requests_total requests
# TYPE lakegate_requests_total counter
lakegate_requests_total{surface="http",kind="credential",result="hit"} 120.0
lakegate_requests_total{surface="grpc",kind="credential",result="stale"} 3.0
lakegate_requests_total{surface="http",kind="credential",result="stale"} 2.0
lakegate_refresh_total{reason="ahead",status="error"} 4
lakegate_cache_entries 5
not a metric line at all
"""


def test_total_sums_every_series_matching_the_labels() -> None:
    samples = parse(TEXT)
    assert total(samples, "lakegate_requests_total", result="stale") == 5.0
    assert total(samples, "lakegate_requests_total") == 125.0
    assert total(samples, "lakegate_cache_entries") == 5.0
    assert total(samples, "lakegate_missing") == 0.0


def test_delta_never_goes_negative_after_a_restart_reset() -> None:
    before = parse(TEXT)
    after = parse('lakegate_refresh_total{reason="ahead",status="error"} 1\n')
    assert delta(before, after, "lakegate_refresh_total", status="error") == 0.0
    assert delta(after, before, "lakegate_refresh_total", status="error") == 3.0


@pytest.fixture
def metrics_server() -> Iterator[str]:
    """A real HTTP server answering TEXT at /metrics, on a thread."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = TEXT.encode() if self.path == "/metrics" else b""
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(10)
    server.server_close()


def test_scrape_reads_a_live_endpoint_past_any_proxy_setting(
    metrics_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert total(scrape(metrics_server), "lakegate_requests_total") == 125.0


def test_an_unreachable_gateway_scrapes_as_no_samples() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert scrape(f"http://127.0.0.1:{port}", timeout_s=2) == {}
