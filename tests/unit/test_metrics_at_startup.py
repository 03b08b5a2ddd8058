"""Every `lakegate_*` series the shipped alerts, recording rules and dashboard select exists at
start-up, before any request: an alert on "no requests" or a ratio never sees an absent series.

The daemon runs in-process with its real object graph (upstream unreachable, token kind none);
/metrics is scraped once, before any other request, and every selector in deploy/monitoring
(metric name plus its label matchers; dashboard template variables such as `$instance` aside)
must match at least one exposed sample.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import App
from tests.deploy.manifests import MONITORING, exprs
from tests.unit.app_harness import running, settings_for

RULE_FILES = ("alerts.yaml", "prometheusrule.yaml")
_SELECTOR = re.compile(r"\b(lakegate_[a-z0-9_]+)\s*(?:\{([^}]*)\})?")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')

Sample = tuple[str, dict[str, str]]


def monitoringexprs() -> list[tuple[str, str]]:
    """(file, expr) for the shipped rule files and the dashboard."""
    out = [(name, e) for name in RULE_FILES
           for e in exprs(yaml.safe_load((MONITORING / name).read_text()))]
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    return out + [("dashboard.json", e) for e in exprs(dashboard)]


def _matches(op: str, want: str, got: str) -> bool:
    if op == "=":
        return got == want
    if op == "!=":
        return got != want
    found = re.fullmatch(want, got) is not None  # PromQL regexes are fully anchored
    return found if op == "=~" else not found


def selector_matches(name: str, matchers: str, samples: list[Sample]) -> bool:
    parsed = [(k, op, v) for k, op, v in _MATCHER.findall(matchers or "") if "$" not in v]
    return any(
        sample == name and all(_matches(op, v, labels.get(k, "")) for k, op, v in parsed)
        for sample, labels in samples
    )


def test_the_selector_check_can_fail() -> None:
    samples = [("lakegate_requests_total", {"kind": "credential", "result": "hit"})]
    assert selector_matches("lakegate_requests_total", 'kind="credential"', samples)
    assert selector_matches("lakegate_requests_total", 'result=~"hit|miss"', samples)
    assert not selector_matches("lakegate_requests_total", 'result!~"h.."', samples)
    assert not selector_matches("lakegate_requests_total", 'kind="metadata"', samples)
    assert not selector_matches("lakegate_absent_total", "", samples)


async def test_every_monitored_series_exists_before_the_first_request(tmp_path: Path) -> None:
    exprs = monitoringexprs()
    selectors = {(f, m.group(1), m.group(2) or "") for f, e in exprs for m in _SELECTOR.finditer(e)}
    assert len({name for _, name, _ in selectors}) >= 10  # the files were read
    # The real service, upstream unreachable.
    async with running(App(settings_for(tmp_path))) as app:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{app.http_port}/metrics") as resp:
                assert resp.status == 200
                text = await resp.text()
    samples = [(s.name, dict(s.labels)) for family in text_string_to_metric_families(text)
               for s in family.samples]
    missing = sorted((f, name, matchers) for f, name, matchers in selectors
                     if not selector_matches(name, matchers, samples))
    assert not missing, f"selected by deploy/monitoring but absent at start-up: {missing}"
