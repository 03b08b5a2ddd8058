"""RequestIds: cheap ids that are still unique, UUID4-shaped (usable as the envelope Error ID)."""

from __future__ import annotations

import uuid

import pytest

from gateway.surfaces.request_ids import RequestIds


def test_ids_are_unique_and_canonical_uuid4_text() -> None:
    ids = RequestIds()
    made = [ids.new() for _ in range(10_000)]
    assert len(set(made)) == len(made)
    for value in made[:50]:
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_two_sources_do_not_share_ids() -> None:
    a, b = RequestIds(), RequestIds()
    assert {a.new() for _ in range(100)}.isdisjoint({b.new() for _ in range(100)})


def test_the_counter_wraps_inside_its_48_bits() -> None:
    ids = RequestIds(seed=bytes(10) + b"\xff" * 6)
    last, first_after_wrap = ids.new(), ids.new()
    assert last.endswith("-ffffffffffff")
    assert first_after_wrap.endswith("-000000000000")
    assert len(first_after_wrap) == 36


def test_a_seed_must_be_16_bytes() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        RequestIds(seed=b"short")
