"""Event-flood measurement (issue #35, finding 3): the catalog's change events must not cost a
caller, whoever publishes them.

A gateway subscribed to the stack's NATS subject serves a victim its own table's credentials over
the HTTP socket, in quiet windows and in windows while a publisher process (`python -m
hardening.event_flood`) floods the subject as fast as it can with what a hostile or broken
publisher sends: 200 KB rename events with 29,000 namespace levels, drop events for a thousand
other tables, and a storm of events for one other table. The same publisher on a subject nobody
subscribes to is the control (what the publisher and nats-server cost this machine by
themselves). Pooled over the windows, the victim's error rate must not rise, its p99 must stay
within `hardening.lockout.p99_bound_ms` of the windows without gateway work (quiet and control
pooled: twice their p99, at least it plus 5 ms), and the gateway must have refused the
oversized events and rate-limited the flood (its `lakegate_change_events_total`): beyond
`EVENTS__EVENTS_PER_S` a message is dropped unread.

Before the fix one 200 KB event with 100 cached keys held the gateway's loop for 1.82 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from devstack.metrics_scrape import delta, scrape
from hardening.lockout import _pooled, _victim, beside, caller_for, p99_bound_ms

VICTIM_REQUESTS = 200  # per window
ROUNDS = 4  # quiet and flooded windows, in turn
PUBLISH_MAX_S = 60.0  # the publisher stops on its own after this, whatever happens here
HEAVY_LEVELS = 29_000  # a ~200 KB rename event
_EVENTS = "lakegate_change_events_total"


def measure(python: str, repo_root: Path, run_dir: Path, http_uds: str, http_url: str,
            path: str, token: str, nats_url: str, subject: str,
            warehouse_id: str) -> dict[str, Any]:
    """Quiet, control and flooded windows in turn; the pooled figures, what the gateway
    counted, and the verdict.

    The control window runs the same publisher on a subject nobody subscribes to: the
    publisher's and nats-server's own CPU on this machine, without any work for the gateway.
    The flood is judged against it (a ratio measured in the same run), not against silence."""
    call = caller_for("http_uds", http_uds, path, {})
    for _ in range(50):  # warm: the table's credential cached, the connection open
        call(token)
    before = scrape(http_url, timeout_s=10)
    windows: dict[str, list[dict[str, Any]]] = {"quiet": [], "control": [], "flooded": []}
    published = {"control": 0, "flooded": 0}
    for i in range(ROUNDS):
        windows["quiet"].append(_victim(call, token, VICTIM_REQUESTS))
        for kind, target in (("control", f"{subject}.control-{i}"), ("flooded", subject)):
            spec = {"url": nats_url, "subject": target, "warehouse_id": warehouse_id}
            window, report = beside(python, repo_root, run_dir / f"event-flood-{kind}-{i}.stop",
                                    "hardening.event_flood", spec,
                                    lambda: _victim(call, token, VICTIM_REQUESTS))
            windows[kind].append(window)
            published[kind] += int(report["published"])
    time.sleep(1.0)  # the consumer's backlog drains before the counters are read
    after = scrape(http_url, timeout_s=10)
    counted = {r: int(delta(before, after, _EVENTS, result=r))
               for r in ("applied", "ignored", "malformed", "refused", "rate_limited",
                         "dropped")}
    # the baseline: every window without work for the gateway (quiet and control, pooled)
    base = _pooled([dict(w) for w in windows["quiet"] + windows["control"]])
    q, c, f = (_pooled(windows[k]) for k in ("quiet", "control", "flooded"))
    ok = (f["error_rate"] <= q["error_rate"] and f["p99_ms"] <= p99_bound_ms(base["p99_ms"])
          and counted["refused"] > 0 and counted["rate_limited"] > 0)
    return {"surface": "http_uds", "quiet": q, "control": c, "baseline": base, "flooded": f,
            "published": published["flooded"], "published_control": published["control"],
            "gateway_counted": counted, "ok": ok}


def _event(type_: str, warehouse_id: str, namespace: list[str], name: str,
           data: dict[str, Any] | None = None) -> bytes:
    """A CloudEvent shaped as Lakekeeper publishes it (names as the request spelt them)."""
    return json.dumps({
        "specversion": "1.0", "id": "flood", "type": type_, "source": "hardening",
        "datacontenttype": "application/json", "data": data, "tabular-type": "GenericTable",
        "tabular-id": "00000000-0000-0000-0000-000000000001", "warehouse-id": warehouse_id,
        "name": name, "namespace": ".".join(namespace), "prefix": warehouse_id,
        "num-events": 1, "sequence-number": 0, "trace-id": "flood", "actor": "{}",
    }).encode()


async def _publish(spec: dict[str, Any]) -> None:
    """The publisher: oversized renames, drops of other tables, one table's storm, in turn,
    until told to stop."""
    import nats

    wid, subject = spec["warehouse_id"], spec["subject"]
    levels = ["n"] * HEAVY_LEVELS
    heavy = _event("renameGenericTable", wid, levels, "flood_t0",
                   {"source": {"namespace": levels, "name": "flood_t0"},
                    "destination": {"namespace": ["flood"], "name": "flood_t0"}})
    small = [_event("dropGenericTable", wid, ["flood"], f"flood_t{i}") for i in range(1000)]
    storm = _event("dropGenericTable", wid, ["flood"], "flood_hot")
    stop, started, published = spec["stop"], time.monotonic(), 0
    nc = await nats.connect(spec["url"], connect_timeout=10)
    try:
        print("flooding", flush=True)
        while time.monotonic() - started < PUBLISH_MAX_S:
            if await asyncio.to_thread(os.path.exists, stop):
                break
            for message in (heavy, *small[:200], *[storm] * 200):
                await nc.publish(subject, message)
            published += 401
            small = small[200:] + small[:200]
            await nc.flush(timeout=10)
    finally:
        await nc.drain()
    print(json.dumps({"published": published}), flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m hardening.event_flood")
    p.add_argument("spec", help="JSON: url, subject, warehouse_id, stop")
    asyncio.run(_publish(json.loads(p.parse_args(argv).spec)))


if __name__ == "__main__":
    main(sys.argv[1:])
