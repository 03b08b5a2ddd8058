"""An event flood against the real consumer (nats-server, nats-py, the gateway's Core with 2,000
cached keys): the event loop is never held longer than one bounded event, oversized events are
refused, one table's flood is rate-limited, and every message is accounted for in the metric.

Found before: one 200 KB event with 100 cached keys held the loop for 1.82 s (each cached key
folded the event's names again), and with 2,000 keys ~236 small events a second saturated it.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from gateway.metrics import CHANGE_EVENT_RESULTS
from gateway.models import AccessMode, Outcome, RequestContext, TableRef
from tests.integration.events.conftest import SUBJECT, EventsCore, NatsServer, wait_for

pytestmark = pytest.mark.integration

KEYS = 2000
HEAVY, SMALL, HOT = 30, 3000, 2000  # 200 KB names; distinct cached tables; one table
BURST = 20
# The loop's longest block in CPU time of the loop's thread between two ticks of a 1 ms ticker
# (wall-clock gaps also count the other processes of a shared machine preempting this one).
# One event is a few ms (measured 6-9 ms at most). The old consumer held the loop for seconds.
# The test process's own heap (thousands of tests before this one) is frozen out of the cyclic
# GC during the flood, as the gateway freezes its startup heap (gateway/app.py): a full
# collection of pytest's heap took 525 ms in one CI run, and that is not the consumer's work.
LONGEST_BLOCK_S = 0.2
CTX = RequestContext(request_id="flood")

# Runs in its own process: the publisher's work must not count as the consumer's.
PUBLISHER = r"""
import asyncio, json, sys
import nats

async def main(url, subject, wid, heavy, small, hot):
    nc = await nats.connect(url)
    def ev(type_, namespace, name, data=None):
        return json.dumps({"specversion": "1.0", "id": "x", "type": type_, "source": "s",
                           "datacontenttype": "application/json", "data": data,
                           "tabular-type": "GenericTable", "tabular-id": "tid",
                           "warehouse-id": wid, "name": name, "namespace": namespace,
                           "prefix": wid, "num-events": 1, "sequence-number": 0,
                           "trace-id": "t", "actor": "{}"}).encode()
    levels = ["n"] * 29_000
    big = ev("renameGenericTable", ".".join(levels), "t0",
             {"source": {"namespace": levels, "name": "t0"},
              "destination": {"namespace": ["ns"], "name": "t0"}})
    assert 190_000 < len(big) < 260_000, len(big)
    for _ in range(heavy):
        await nc.publish(subject, big)
    for i in range(small):
        await nc.publish(subject, ev("dropGenericTable", "ns", f"t{i % 1000}"))
    for _ in range(hot):
        await nc.publish(subject, ev("dropGenericTable", "ns", "hot"))
    await nc.flush(timeout=30)
    await nc.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:])))
"""


async def test_a_flood_of_events_never_holds_the_loop_and_is_accounted_for(
    nats_server: Callable[..., NatsServer], events_core: Callable[..., EventsCore]
) -> None:
    server = nats_server()
    # The all-events budget (which pauses the subscription past it) is off here: this test
    # accounts for every message of the flood (tests/unit/upstream/test_events.py and the
    # isolation suite's event flood cover the budget).
    node = events_core(
        server.url,
        EVENTS__TABLE_EVENT_BURST=str(BURST),
        EVENTS__EVENTS_PER_S="1000000",
        EVENTS__EVENT_BURST="1000000",
    )
    service = node.core.service
    for i in range(1, KEYS):
        node.catalog.add_table(("ns",), f"t{i}")
    node.catalog.add_table(("ns",), "hot")
    for i in range(KEYS):
        await service.get_credentials(TableRef("demo", ("ns",), f"t{i}"), AccessMode.READ, CTX)
    assert len(service.cache) == KEYS
    await node.core.start()
    await wait_for(lambda: node.up() == 1, 10)

    def counted() -> dict[str, float]:
        return {r: node.counted(r) for r in CHANGE_EVENT_RESULTS}

    longest = longest_wall = 0.0
    ticking = True

    async def ticker() -> None:
        nonlocal longest, longest_wall
        while ticking:
            start, start_cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.001)
            longest = max(longest, time.thread_time() - start_cpu)
            longest_wall = max(longest_wall, time.perf_counter() - start - 0.001)

    gc.collect()
    gc.freeze()
    try:
        tick = asyncio.create_task(ticker())
        publisher = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            PUBLISHER,
            server.url,
            SUBJECT,
            node.catalog.warehouse_id,
            str(HEAVY),
            str(SMALL),
            str(HOT),
            stderr=subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            _, err = await publisher.communicate()
        assert publisher.returncode == 0, err.decode()
        total = HEAVY + SMALL + HOT
        started = time.perf_counter()
        await wait_for(lambda: sum(counted().values()) >= total, 60)
        ticking = False
        await tick
    finally:
        gc.unfreeze()
    got = counted()
    print(
        f"\nflood of {total} events, {KEYS} cached keys: longest loop block "
        f"{longest * 1000:.1f} ms CPU ({longest_wall * 1000:.1f} ms wall); drained "
        f"{time.perf_counter() - started:.2f} s after the publisher; {got}"
    )
    assert got["refused"] == HEAVY  # names deeper than a request may spell
    assert got["dropped"] == 0  # max_pending_events is above the flood
    assert got["applied"] == SMALL + BURST
    assert got["rate_limited"] == HOT - BURST
    assert longest < LONGEST_BLOCK_S, f"the loop was held {longest:.3f} s"
    # Each small event dropped only its own table's entries.
    assert len(service.cache) == KEYS - 1000
    hit = await service.get_credentials(TableRef("demo", ("ns",), "t1999"), AccessMode.READ, CTX)
    assert hit.outcome is Outcome.HIT
    # The refused and rate-limited events count as lost: the short TTL, `up` false.
    assert node.up() == 0
    assert service.identity.ttl_s == node.settings.cache.identity_ttl_s
