"""gateway/service/own_creates.py: which change events are the echo of this gateway's create."""

from __future__ import annotations

from gateway.service.own_creates import OwnCreates
from tests.fakes.clock import FakeClock

WID = "0198f0c2-1f2e-7b0a-9c4d-5e6f7a8b9c0d"
RID = "4daa9ec3-8ad6-47df-8889-99827f019994"
OTHER = "4daa9ec3-8ad6-47df-8889-99827f019995"
CREATE = "createGenericTable"


def test_the_echo_of_a_recorded_create_is_taken_once_whatever_the_spelling() -> None:
    own = OwnCreates(FakeClock())
    own.record(RID, WID, ("NS",), "Orders")
    # The event spells the name as the catalog stored it; names compare folded.
    assert own.take(CREATE, RID.upper(), WID.upper(), ("ns",), "orders")
    assert not own.take(CREATE, RID, WID, ("ns",), "orders")  # taken


def test_another_request_another_type_or_another_table_is_not_an_echo() -> None:
    own = OwnCreates(FakeClock())
    own.record(RID, WID, ("ns",), "orders")
    assert not own.take(CREATE, RID, WID, ("ns",), "other")
    assert not own.take("createTable", RID, WID, ("ns",), "orders")  # an Iceberg create
    assert not own.take("dropGenericTable", RID, WID, ("ns",), "orders")
    assert own.take(CREATE, RID, WID, ("ns",), "orders")
    own.record(RID, WID, ("ns",), "orders")
    # A create of the same name by another request supersedes ours: neither is an echo now.
    assert not own.take(CREATE, OTHER, WID, ("ns",), "orders")
    assert not own.take(CREATE, RID, WID, ("ns",), "orders")


def test_any_other_change_to_the_table_forgets_the_record() -> None:
    own = OwnCreates(FakeClock())
    own.record(RID, WID, ("ns",), "orders")
    own.forget(WID, ("ns",), "orders")  # e.g. a drop's event applied before the create's
    assert not own.take(CREATE, RID, WID, ("ns",), "orders")


def test_a_request_id_the_catalog_does_not_keep_is_not_recorded() -> None:
    own = OwnCreates(FakeClock())
    # Lakekeeper makes only a UUID x-request-id the event's trace-id (else a fresh one).
    own.record("r-1", WID, ("ns",), "orders")
    assert not own.take(CREATE, "r-1", WID, ("ns",), "orders")


def test_records_are_bounded_in_time_and_count() -> None:
    clock = FakeClock()
    own = OwnCreates(clock, max_entries=2, ttl_s=60.0)
    own.record(RID, WID, ("ns",), "a")
    clock.advance(61)
    assert not own.take(CREATE, RID, WID, ("ns",), "a")  # too late: applied as any other
    for name in ("a", "b", "c"):
        own.record(RID, WID, ("ns",), name)
    assert not own.take(CREATE, RID, WID, ("ns",), "a")  # the oldest went past the bound
    assert own.take(CREATE, RID, WID, ("ns",), "b")
    assert own.take(CREATE, RID, WID, ("ns",), "c")
