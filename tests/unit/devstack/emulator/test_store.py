import uuid

import pytest

from devstack.emulator.pagination import Cursor
from devstack.emulator.store import ConflictError, Store


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "catalog.db")
    yield s
    s.close()


def _warehouse(store, name="demo", soft=False):
    return store.create_warehouse(
        project_id="p",
        name=name,
        storage_profile={
            "type": "s3",
            "bucket": "b",
            "region": "r",
            "key-prefix": "/pre/",
            "sts-enabled": True,
        },
        storage_credential=None,
        delete_profile={"type": "soft" if soft else "hard"},
    )


def _table(store, ns, name, loc=None):
    return store.create_table(
        table_id=str(uuid.uuid4()),
        ns=ns,
        name=name,
        fmt="lance",
        base_location=loc or f"s3://b/pre/{name}",
        doc=None,
        properties={},
        schema=None,
        statistics=None,
    )


def test_warehouse_names_are_unique_case_insensitively(store):
    wh = _warehouse(store)
    assert wh.base_location == "s3://b/pre"
    assert store.get_warehouse_by_name("p", "DEMO").id == wh.id
    with pytest.raises(ConflictError):
        _warehouse(store, "Demo")


def test_bootstrap_happens_once(store):
    assert store.bootstrap() is True
    assert store.bootstrap() is False


def test_namespace_lookup_is_case_insensitive_and_preserves_case(store):
    wh = _warehouse(store)
    store.create_namespace(wh.id, ["Team"], {})
    store.create_namespace(wh.id, ["Team", "Sub"], {"k": "v"})
    got = store.get_namespace(wh.id, ["team", "SUB"])
    assert got.parts == ["Team", "Sub"]
    assert got.properties == {"k": "v"}
    with pytest.raises(ConflictError):
        store.create_namespace(wh.id, ["TEAM"], {})
    children = store.list_namespaces(wh.id, ["team"], None, 10)
    assert [ns.parts for ns, _ in children] == [["Team", "Sub"]]


def test_table_listing_pages_by_created_at_and_id(store):
    wh = _warehouse(store)
    ns = store.create_namespace(wh.id, ["n"], {})
    names = [f"t{i}" for i in range(7)]
    for name in names:
        _table(store, ns, name)
    seen, after = [], None
    for _ in range(10):
        page = store.list_tables(ns, after, 3)
        if not page:
            break
        seen += [t.name for t in page]
        after = Cursor(page[-1].created_at_us, page[-1].id)
    assert seen == names


def test_soft_deleted_table_frees_its_name_until_undropped(store):
    wh = _warehouse(store, soft=True)
    ns = store.create_namespace(wh.id, ["n"], {})
    t = _table(store, ns, "x")
    store.soft_delete_table(t.id, 3600)
    assert store.get_table(ns, "X") is None
    assert [d.id for d in store.list_deleted(wh.id, None, None, 10)] == [t.id]
    store.undrop_table(t.id)
    assert store.get_table(ns, "x").id == t.id
    assert store.list_deleted(wh.id, None, None, 10) == []


def test_location_overlap_detection(store):
    wh = _warehouse(store)
    ns = store.create_namespace(wh.id, ["n"], {})
    _table(store, ns, "a", "s3://b/pre/data/a")
    assert store.location_taken(wh.id, "s3://b/pre/data/a")
    assert store.location_taken(wh.id, "s3://b/pre/data/a/inner")
    assert store.location_taken(wh.id, "s3://b/pre/data")
    assert not store.location_taken(wh.id, "s3://b/pre/data/ab")


def test_state_survives_reopening(tmp_path):
    first = Store(tmp_path / "c.db")
    wh = _warehouse(first)
    first.create_namespace(wh.id, ["n"], {})
    first.close()
    second = Store(tmp_path / "c.db")
    assert second.get_namespace(wh.id, ["N"]) is not None
    second.close()
