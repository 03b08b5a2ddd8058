"""The gateway's load tag (gateway/surfaces/iceberg_etag.py): round trip, and when a 304 holds."""

from __future__ import annotations

from gateway.models import (
    AccessMode,
    CredentialLookup,
    CredentialSet,
    Outcome,
    TableRef,
    Warehouse,
)
from gateway.surfaces import iceberg_etag

EXPIRY_MS = 1_900_000_000_000


def _lookup(remaining_s: float | None, access: AccessMode = AccessMode.READ,
            expires_at_ms: int | None = EXPIRY_MS) -> CredentialLookup:
    return CredentialLookup(
        Warehouse(id="wh", name="demo"), TableRef("demo", ("ns",), "t", kind="iceberg"), access,
        CredentialSet(credentials=(), expires_at_ms=expires_at_ms), Outcome.HIT, remaining_s)


def test_the_tag_round_trips_and_names_the_catalogs_tag() -> None:
    tag = iceberg_etag.issue('W/"lk2.abc.def"', _lookup(900.0))
    assert tag is not None
    text = tag.render()
    assert text.startswith('W/"lg1.read.')
    assert text.endswith('"')
    assert iceberg_etag.parse(text) == tag
    assert iceberg_etag.parse(text) == iceberg_etag.LoadTag(
        'W/"lk2.abc.def"', AccessMode.READ, EXPIRY_MS, 900)


def test_no_catalog_tag_no_gateway_tag() -> None:
    assert iceberg_etag.issue(None, _lookup(900.0)) is None
    assert iceberg_etag.issue("", _lookup(900.0)) is None


def test_foreign_and_malformed_tags_are_not_the_gateways() -> None:
    for header in (None, "", "*", 'W/"lk2.abc"', '"lg1.read.1.2.eA"', 'W/"lg1.admin.1.2.eA"',
                   'W/"lg1.read.x.2.eA"', 'W/"lg1.read.1.2"', 'W/"lg1.read.1.2.!!!"',
                   'W/"lg1.read.1.2.DQo"'):  # the last decodes to CR LF
        assert iceberg_etag.parse(header) is None, header


def test_304_while_over_half_the_life_is_left_and_the_credential_is_the_same() -> None:
    tag = iceberg_etag.issue('W/"lk2.a"', _lookup(900.0))
    assert tag is not None
    assert iceberg_etag.still_valid(tag, _lookup(899.0))
    assert iceberg_etag.still_valid(tag, _lookup(451.0))
    assert not iceberg_etag.still_valid(tag, _lookup(450.0))  # revalidate-after reached
    assert not iceberg_etag.still_valid(tag, _lookup(899.0, AccessMode.WRITE))
    assert not iceberg_etag.still_valid(tag, _lookup(899.0, expires_at_ms=EXPIRY_MS + 1))


def test_a_tag_is_good_for_an_hour_at_most() -> None:
    tag = iceberg_etag.issue('W/"lk2.a"', _lookup(12 * 3600.0))
    assert tag is not None
    assert iceberg_etag.still_valid(tag, _lookup(12 * 3600.0 - 3599))
    assert not iceberg_etag.still_valid(tag, _lookup(12 * 3600.0 - 3600))


def test_without_an_expiry_only_the_catalog_decides() -> None:
    tag = iceberg_etag.issue('W/"lk2.a"', _lookup(None, expires_at_ms=None))
    assert tag is not None
    assert tag.remaining_s is None
    assert iceberg_etag.still_valid(tag, _lookup(None, expires_at_ms=None))
    assert not iceberg_etag.still_valid(tag, _lookup(600.0))
