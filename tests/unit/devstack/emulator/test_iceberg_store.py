"""The Iceberg table rows: names case-insensitive, pointer moves only by compare-and-set."""

from __future__ import annotations

import uuid

import pytest

from devstack.emulator.iceberg_store import IcebergStore
from devstack.emulator.models import Namespace
from devstack.emulator.pagination import Cursor
from devstack.emulator.store import ConflictError

NS = Namespace(id="ns1", warehouse_id="wh1", parts=["a"], properties={})
NS2 = Namespace(id="ns2", warehouse_id="wh1", parts=["b"], properties={})


@pytest.fixture
def store(tmp_path):
    s = IcebergStore(tmp_path / "catalog.db")
    yield s
    s.close()


def _create(store, name="Tbl", ns=NS, location=None):
    return store.create(
        table_id=str(uuid.uuid4()),
        ns=ns,
        name=name,
        location=location or f"s3://b/pre/{name}",
        metadata_location=f"s3://b/pre/{name}/metadata/00000-x.metadata.json",
        metadata_json="{}",
    )


def test_names_are_case_insensitive_and_case_preserving(store):
    t = _create(store)
    assert store.get(NS, "tbl") == t
    assert store.get(NS, "TBL").name == "Tbl"
    with pytest.raises(ConflictError):
        _create(store, name="TBL")


def test_swap_moves_the_pointer_only_from_the_expected_location(store):
    t = _create(store)
    assert store.swap_metadata(t.id, t.metadata_location, "loc1", '{"v":1}')
    assert not store.swap_metadata(t.id, t.metadata_location, "loc2", '{"v":2}')
    row = store.get_by_id(t.id)
    assert (row.metadata_location, row.metadata_json) == ("loc1", '{"v":1}')


def test_location_overlap_is_detected_both_ways(store):
    _create(store, location="s3://b/pre/x")
    assert store.location_taken("wh1", "s3://b/pre/x")
    assert store.location_taken("wh1", "s3://b/pre/x/sub")
    assert store.location_taken("wh1", "s3://b/pre")
    assert not store.location_taken("wh1", "s3://b/pre/x2")
    assert not store.location_taken("wh2", "s3://b/pre/x")


def test_rename_moves_across_namespaces_and_refuses_a_taken_name(store):
    t = _create(store, name="one")
    _create(store, name="two", ns=NS2)
    with pytest.raises(ConflictError):
        store.rename(t.id, NS2, "TWO")
    store.rename(t.id, NS2, "three")
    assert store.get(NS, "one") is None
    assert store.get(NS2, "three").id == t.id


def test_list_pages_in_creation_order_and_delete_removes(store):
    names = [f"t{i}" for i in range(5)]
    for n in names:
        _create(store, name=n)
    first = store.list(NS, None, 2)
    rest = store.list(NS, Cursor(first[-1].created_at_us, first[-1].id), 10)
    assert [t.name for t in first + rest] == names
    store.delete(first[0].id)
    assert store.get(NS, "t0") is None
    assert len(store.list(NS, None, 10)) == 4
