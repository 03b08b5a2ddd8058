import json

import pytest

from gateway.upstream.events import BadEvent, parse_event

MAX = 256 * 1024

WH = "0198E000-0000-7000-8000-0000000000A1"
TID = "0198f0c4-5d6e-7f80-9a1b-2c3d4e5f6a7b"


def event(type_: str, **over: object) -> bytes:
    doc = {"specversion": "1.0", "id": "0198f6a2-1c3d-7e4f-8a90-112233445566", "type": type_,
           "source": "uri:iceberg-catalog-service:lk-0", "datacontenttype": "application/json",
           "data": None, "tabular-type": "GenericTable", "tabular-id": TID,
           "warehouse-id": WH, "name": "orders", "namespace": "sales.eu", "prefix": WH,
           "num-events": 1, "sequence-number": 0, "trace-id": "x",
           "actor": '{"type":"anonymous"}'}
    doc.update(over)
    return json.dumps(doc).encode()


def test_a_drop_names_its_table_with_dot_joined_levels() -> None:
    ev = parse_event(event("dropGenericTable"), max_bytes=MAX)
    assert ev is not None
    assert (ev.type, ev.warehouse_id, ev.tabular_id) == ("dropGenericTable", WH.lower(), TID)
    assert ev.names == ((("sales", "eu"), "orders"),)


@pytest.mark.parametrize(("trace", "expected"), [
    ("4DAA9EC3-8AD6-47DF-8889-99827F019994", "4daa9ec3-8ad6-47df-8889-99827f019994"),
    (None, ""), (7, ""), ("t" * 500, ""),
])
def test_the_trace_id_is_kept_short_and_folded(trace: object, expected: str) -> None:
    """A gateway recognises the event of its own create by it (service/own_creates.py)."""
    ev = parse_event(event("createGenericTable", **{"trace-id": trace}), max_bytes=MAX)
    assert ev.trace_id == expected


def test_a_rename_names_source_and_destination_and_splits_unit_separators() -> None:
    data = {"source": {"namespace": ["sales", "eu"], "name": "orders"},
            "destination": {"namespace": ["sales", "eu"], "name": "orders_v1"}}
    ev = parse_event(event("renameTable", namespace="sales\x1feu", prefix="", data=data),
                     max_bytes=MAX)
    assert ev is not None
    assert ev.names == ((("sales", "eu"), "orders"), (("sales", "eu"), "orders_v1"))


@pytest.mark.parametrize("type_", ["updateTable", "createView", "dropView"])
def test_commits_and_views_name_no_table_to_invalidate(type_: str) -> None:
    # An Iceberg table's location is immutable: a commit never changes its identity.
    data = {"identifier": {"namespace": ["a"], "name": "T"}, "requirements": [], "updates": []}
    ev = parse_event(event(type_, namespace="a", name="T", data=data), max_bytes=MAX)
    assert ev is not None
    assert (ev.type, ev.names) == (type_, ())


@pytest.mark.parametrize("payload", [
    b"not json", b"[]", event("createNamespace"), event("dropTable", name=None),
    event("dropTable", **{"warehouse-id": 7}), b"\xff\xfe",
])
def test_anything_else_is_not_an_event(payload: bytes) -> None:
    with pytest.raises(BadEvent) as bad:
        parse_event(payload, max_bytes=MAX)
    assert bad.value.result == "malformed"
    # Only a table identity event that cannot be read may have lost an invalidation.
    assert bad.value.lossy is (payload == event("dropTable", name=None)
                               or payload == event("dropTable", **{"warehouse-id": 7}))


@pytest.mark.parametrize(("over", "why"), [
    ({"namespace": ".".join(f"l{i}" for i in range(6))}, "namespace depth 6"),
    ({"name": "t" * 256}, "name too long"),
    ({"namespace": "a." + "n" * 256}, "name too long"),
    ({"data": {"source": {"namespace": ["a"], "name": "t"},
               "destination": {"namespace": ["a"] * 6, "name": "t"}}}, "namespace depth 6"),
    ({"warehouse-id": "w" * 65}, "id too long"),
])
def test_names_deeper_or_longer_than_a_request_may_spell_are_refused(
    over: dict[str, object], why: str
) -> None:
    # The gateway's requests take at most 5 levels of 255 characters (gateway.names): an event
    # beyond that is refused whole, and counts as lost (the short TTL applies).
    with pytest.raises(BadEvent, match=why) as bad:
        parse_event(event("renameGenericTable", **over), max_bytes=MAX)
    assert (bad.value.result, bad.value.lossy) == ("refused", True)


def test_an_event_over_the_size_limit_is_refused_before_it_is_parsed() -> None:
    big = event("createTable", data={"schema": "x" * 4096})
    assert parse_event(big, max_bytes=len(big)).names == ((("sales", "eu"), "orders"),)
    with pytest.raises(BadEvent) as bad:
        parse_event(big, max_bytes=len(big) - 1)
    assert (bad.value.result, bad.value.lossy) == ("refused", True)
    with pytest.raises(BadEvent):  # not even read: a broken document of that size is "refused"
        parse_event(b"{" * len(big), max_bytes=len(big) - 1)


class _Sink:
    def __init__(self) -> None:
        self.applied: list[object] = []
        self.rejected_as: list[tuple[str, bool]] = []

    def apply(self, event: object) -> None:
        self.applied.append(event)

    def rejected(self, result: str, *, lossy: bool) -> None:
        self.rejected_as.append((result, lossy))

    def state(self, up: bool) -> None:
        pass


class _Msg:
    def __init__(self, data: bytes) -> None:
        self.data = data


async def test_a_flood_beyond_the_event_budget_is_dropped_unread_as_lost_events() -> None:
    """Issue #35 finding 3, all tables together: beyond `events_per_s` a message costs one
    bucket check, not a parse; each drop is a lost event (the short identity TTL applies)."""
    from gateway.events_settings import EventsSettings
    from gateway.upstream.events import ChangeEventSubscription
    from tests.fakes.clock import FakeClock

    clock = FakeClock()
    settings = EventsSettings(nats_address="nats://127.0.0.1:4222", events_per_s=10,
                              event_burst=5)
    sink = _Sink()
    sub = ChangeEventSubscription(settings, sink, clock, spawn=None)  # type: ignore[arg-type]
    for _ in range(8):
        await sub._message(_Msg(event("dropGenericTable")))
    assert len(sink.applied) == 5
    assert sink.rejected_as == [("rate_limited", True)] * 3
    clock.advance(0.5)  # 5 tokens back
    for _ in range(6):
        await sub._message(_Msg(b"not json"))  # within budget: parsed, refused as malformed
    assert [r for r, _ in sink.rejected_as[3:]] == ["malformed"] * 5 + ["rate_limited"]


async def test_a_subscription_past_its_event_budget_pauses_instead_of_parsing_the_flood() -> None:
    """The NATS client reads and parses every message on the loop before anything can drop it:
    past the budget the subscription is closed for FLOOD_PAUSE_S (no message costs anything
    then), and the loss applies the short identity TTL like any lost subscription."""
    import asyncio

    from gateway.events_settings import EventsSettings
    from gateway.upstream.events import ChangeEventSubscription
    from tests.fakes.clock import FakeClock

    settings = EventsSettings(nats_address="nats://127.0.0.1:4222", events_per_s=10,
                              event_burst=2)
    sink = _Sink()
    sub = ChangeEventSubscription(settings, sink, FakeClock(), spawn=None)  # type: ignore[arg-type]
    broken = sub._broken = asyncio.Event()
    for _ in range(2):
        await sub._message(_Msg(event("dropGenericTable")))
    assert not broken.is_set()
    await sub._message(_Msg(event("dropGenericTable")))
    assert broken.is_set()  # the run loop closes the connection and waits FLOOD_PAUSE_S
    assert sub._flooded
    assert sink.rejected_as == [("rate_limited", True)]
