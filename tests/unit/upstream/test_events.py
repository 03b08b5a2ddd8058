import json

import pytest

from gateway.upstream.events import parse_event

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
    ev = parse_event(event("dropGenericTable"))
    assert ev is not None
    assert (ev.type, ev.warehouse_id, ev.tabular_id) == ("dropGenericTable", WH.lower(), TID)
    assert ev.names == ((("sales", "eu"), "orders"),)


def test_a_rename_names_source_and_destination_and_splits_unit_separators() -> None:
    data = {"source": {"namespace": ["sales", "eu"], "name": "orders"},
            "destination": {"namespace": ["sales", "eu"], "name": "orders_v1"}}
    ev = parse_event(event("renameTable", namespace="sales\x1feu", prefix="", data=data))
    assert ev is not None
    assert ev.names == ((("sales", "eu"), "orders"), (("sales", "eu"), "orders_v1"))


@pytest.mark.parametrize("type_", ["updateTable", "createView", "dropView"])
def test_commits_and_views_name_no_table_to_invalidate(type_: str) -> None:
    # An Iceberg table's location is immutable: a commit never changes its identity.
    data = {"identifier": {"namespace": ["a"], "name": "T"}, "requirements": [], "updates": []}
    ev = parse_event(event(type_, namespace="a", name="T", data=data))
    assert ev is not None
    assert (ev.type, ev.names) == (type_, ())


@pytest.mark.parametrize("payload", [
    b"not json", b"[]", event("createNamespace"), event("dropTable", name=None),
    event("dropTable", **{"warehouse-id": 7}), b"\xff\xfe",
])
def test_anything_else_is_not_an_event(payload: bytes) -> None:
    assert parse_event(payload) is None
