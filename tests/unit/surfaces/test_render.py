"""Pre-rendered credential bodies (gateway/surfaces/render.py, native's credentials_body)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from gateway.models import AccessMode, CredentialLookup, Outcome, TableRef
from gateway.surfaces.http_native import credentials_body, credentials_doc
from gateway.surfaces.render import RenderedBody, config_strings
from tests.unit.surfaces.fake_operations import WAREHOUSE, RotatingOperations


def contract_bytes(lookup: CredentialLookup) -> bytes:
    return json.dumps(credentials_doc(lookup), separators=(",", ":")).encode()


@given(
    remaining=st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False),
                        st.integers(-10**6, 10**6)),
    outcome=st.sampled_from(list(Outcome)),
    identity_ttl=st.one_of(st.none(), st.floats(0, 3600)),
)
def test_pre_rendered_body_is_byte_identical_to_the_contract_json(
    remaining: float | None, outcome: Outcome, identity_ttl: float | None
) -> None:
    ops = RotatingOperations()
    ops.add_table(("demo_ns", "sub"), "ordérs \"x\"")
    table = next(iter(ops.tables.values()))
    ref = TableRef("demo", ("demo_ns", "sub"), table.name)
    first = CredentialLookup(WAREHOUSE, ref, AccessMode.WRITE, ops.credential_set(table),
                             Outcome.MISS, 1.5)
    body = credentials_body(first)
    lookup = CredentialLookup(WAREHOUSE, ref, AccessMode.WRITE, first.credentials, outcome,
                              remaining, identity_ttl)
    assert body.fits(lookup)
    assert body.render(lookup) == contract_bytes(lookup)


def orders_lookup(outcome: Outcome) -> tuple[RotatingOperations, CredentialLookup]:
    """A fake service with one table and a READ lookup of it (remaining 10 s)."""
    ops = RotatingOperations()
    ops.add_table(("demo_ns",), "orders")
    table = next(iter(ops.tables.values()))
    ref = TableRef("demo", ("demo_ns",), "orders")
    return ops, CredentialLookup(WAREHOUSE, ref, AccessMode.READ, ops.credential_set(table),
                                 outcome, 10.0)


def test_pre_rendered_body_does_not_match_another_set_table_or_access() -> None:
    ops, lookup = orders_lookup(Outcome.HIT)
    table, ref = next(iter(ops.tables.values())), lookup.ref
    body = credentials_body(lookup)
    ops.rotate()
    rotated = CredentialLookup(WAREHOUSE, ref, AccessMode.READ, ops.credential_set(table),
                               Outcome.HIT, 10.0)
    assert not body.fits(rotated)
    assert not body.fits(CredentialLookup(WAREHOUSE, ref, AccessMode.WRITE,
                                             lookup.credentials, Outcome.HIT, 10.0))
    other = TableRef("demo", ("demo_ns",), "other")
    assert not body.fits(CredentialLookup(WAREHOUSE, other, AccessMode.READ,
                                             lookup.credentials, Outcome.HIT, 10.0))


def test_a_static_body_is_returned_as_rendered_whatever_the_outcome() -> None:
    _, lookup = orders_lookup(Outcome.MISS)
    ref = lookup.ref
    body = RenderedBody(lookup, b'{"static":true}')
    later = CredentialLookup(WAREHOUSE, ref, AccessMode.READ, lookup.credentials, Outcome.HIT, 2.0)
    assert body.fits(later)
    assert body.render(later) == b'{"static":true}'


def test_config_values_are_rendered_as_strings() -> None:
    assert config_strings({"a": True, "b": False, "c": 3, "d": None, "e": "x"}) == {
        "a": "true", "b": "false", "c": "3", "e": "x"}


def test_coalesced_waiters_of_one_fetch_get_the_same_bytes_rendered_once() -> None:
    _, first = orders_lookup(Outcome.COALESCED)
    body = credentials_body(first)
    rendered = body.render(first)
    assert rendered == contract_bytes(first)
    # later waiters of the same fetch (same set object), answered a moment later
    later = CredentialLookup(WAREHOUSE, first.ref, AccessMode.READ, first.credentials,
                             Outcome.COALESCED, 9.25)
    assert body.render(later) is rendered
    # a hit on the same set renders its own remaining_s
    hit = CredentialLookup(WAREHOUSE, first.ref, AccessMode.READ, first.credentials,
                           Outcome.HIT, 9.0)
    assert body.render(hit) == contract_bytes(hit)
