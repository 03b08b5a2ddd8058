"""The emulator's change events for the Iceberg paths that publish them as Lakekeeper does: a
rename names the source as the request spelled it, and a multi-table commit publishes one
`updateTable` per table with `num-events` and `sequence-number` (and nothing on a 409)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from tests.integration.devstack.conftest import Catalog
from tests.integration.devstack.test_iceberg_pyiceberg import _rest

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def collect(catalog: Catalog, action: Callable[[], None], want: int) -> list[dict[str, Any]]:
    """The events published while `action` runs (at least `want` of them, within 30 s)."""
    nats_info = catalog.stack.info.nats
    assert nats_info is not None, "the stack runs NATS"
    got: list[dict[str, Any]] = []

    async def run() -> None:
        import nats

        nc = await nats.connect(nats_info.url)

        async def cb(msg: Any) -> None:
            got.append(json.loads(msg.data))

        try:
            await nc.subscribe(nats_info.subject, cb=cb)
            await nc.flush(timeout=5)
            await asyncio.to_thread(action)
            async with asyncio.timeout(30):
                while len(got) < want:  # noqa: ASYNC110 - events arrive on the callback
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # and nothing more
        finally:
            await nc.close()

    asyncio.run(run())
    return got


def test_a_rename_names_its_source_as_the_request_spelled_it(catalog: Catalog) -> None:
    rest = _rest(catalog)
    name = f"Ren_{uuid.uuid4().hex[:8]}"
    rest.create_table((catalog.ns, name), schema=SCHEMA)

    def rename() -> None:
        resp = catalog.http.post(f"/catalog/v1/{catalog.wh}/tables/rename", json={
            "source": {"namespace": [catalog.ns.upper()], "name": name.lower()},
            "destination": {"namespace": [catalog.ns], "name": name + "_v1"}})
        assert resp.status_code == 204, resp.text

    (event,) = collect(catalog, rename, 1)
    assert event["type"] == "renameTable"
    assert (event["name"], event["namespace"]) == (name.lower(), catalog.ns.upper())
    assert event["prefix"] == ""
    assert event["data"]["destination"] == {"namespace": [catalog.ns], "name": name + "_v1"}


def test_a_multi_table_commit_publishes_one_update_per_table(catalog: Catalog) -> None:
    rest = _rest(catalog)
    names = [f"tx_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    tables = [rest.create_table((catalog.ns, n), schema=SCHEMA) for n in names]
    path = f"/catalog/v1/{catalog.wh}/transactions/commit"

    def change(i: int, uuid_: str, value: str) -> dict[str, Any]:
        return {"identifier": {"namespace": [catalog.ns], "name": names[i]},
                "requirements": [{"type": "assert-table-uuid", "uuid": uuid_}],
                "updates": [{"action": "set-properties", "updates": {"k": value}}]}

    def commit() -> None:
        stale = catalog.http.post(path, json={"table-changes": [
            change(0, str(tables[0].metadata.table_uuid), "x"),
            change(1, str(uuid.uuid4()), "x")]})  # one stale requirement: nothing changes
        assert stale.status_code == 409, stale.text
        ok = catalog.http.post(path, json={"table-changes": [
            change(i, str(t.metadata.table_uuid), "v") for i, t in enumerate(tables)]})
        assert ok.status_code == 204, ok.text

    events = collect(catalog, commit, 2)
    assert [e["type"] for e in events] == ["updateTable", "updateTable"]
    assert [(e["num-events"], e["sequence-number"]) for e in events] == [(2, 0), (2, 1)]
    assert [e["name"] for e in events] == names
    assert {e["tabular-id"] for e in events} == {str(t.metadata.table_uuid) for t in tables}
    assert len({e["trace-id"] for e in events}) == 1  # one request
    for i, t in enumerate(tables):
        assert rest.load_table((catalog.ns, names[i])).properties["k"] == "v"
        assert t.metadata.properties.get("k") is None


def test_register_publishes_register_table_and_may_overwrite(catalog: Catalog) -> None:
    rest = _rest(catalog)
    name = f"reg_{uuid.uuid4().hex[:8]}"
    table = rest.create_table((catalog.ns, name), schema=SCHEMA)
    metadata_location = table.metadata_location
    tables = f"/catalog/v1/{catalog.wh}/namespaces/{catalog.ns}"
    assert catalog.http.delete(f"{tables}/tables/{name}").status_code == 204  # files kept

    def register() -> None:
        for overwrite in (False, True):  # the second replaces the first: registerTable only
            resp = catalog.http.post(f"{tables}/register", json={
                "name": name + "_again", "metadata-location": metadata_location,
                "overwrite": overwrite})
            assert resp.status_code == 200, resp.text
            assert resp.json()["metadata-location"] == metadata_location
        again = catalog.http.post(f"{tables}/register", json={
            "name": name + "_again", "metadata-location": metadata_location})
        assert again.status_code == 409, again.text

    events = collect(catalog, register, 2)
    assert [e["type"] for e in events] == ["registerTable", "registerTable"]
    for e in events:
        assert e["data"] is None
        assert (e["name"], e["namespace"]) == (name + "_again", catalog.ns)
        assert e["prefix"] == e["warehouse-id"] == catalog.wh
        assert e["tabular-id"] == str(table.metadata.table_uuid)
    loaded = rest.load_table((catalog.ns, name + "_again"))
    assert loaded.metadata.table_uuid == table.metadata.table_uuid


def _version(sql: str, ns: str) -> dict[str, Any]:
    return {"version-id": 1, "schema-id": -1 if sql.endswith("2") else 0,
            "timestamp-ms": 1_700_000_000_000, "summary": {"engine-name": "test"},
            "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
            "default-namespace": [ns]}


def test_views_publish_create_update_rename_and_drop(catalog: Catalog) -> None:
    name = f"View_{uuid.uuid4().hex[:8]}"
    views = f"/catalog/v1/{catalog.wh}/namespaces/{catalog.ns}/views"
    schema = {"type": "struct", "schema-id": 0,
              "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
    created: dict[str, Any] = {}

    def lifecycle() -> None:
        resp = catalog.http.post(views, json={"name": name, "schema": schema,
                                              "view-version": _version("select 1", catalog.ns),
                                              "properties": {"a": "b"}})
        assert resp.status_code == 200, resp.text
        created.update(resp.json())
        assert catalog.http.post(views, json={  # one tabular per name
            "name": name, "schema": schema,
            "view-version": _version("select 1", catalog.ns)}).status_code == 409
        uuid_ = created["metadata"]["view-uuid"]
        resp = catalog.http.post(f"{views}/{name}", json={
            "requirements": [{"type": "assert-view-uuid", "uuid": uuid_}],
            "updates": [{"action": "add-view-version",
                         "view-version": _version("select 2", catalog.ns)},
                        {"action": "set-current-view-version", "view-version-id": -1}]})
        assert resp.status_code == 200, resp.text
        assert resp.json()["metadata"]["current-version-id"] == 2
        resp = catalog.http.post(f"/catalog/v1/{catalog.wh}/views/rename", json={
            "source": {"namespace": [catalog.ns.upper()], "name": name.lower()},
            "destination": {"namespace": [catalog.ns], "name": name + "_v1"}})
        assert resp.status_code == 204, resp.text
        assert catalog.http.get(f"{views}/{name}_v1").status_code == 200
        assert catalog.http.delete(f"{views}/{name}_v1").status_code == 204
        assert catalog.http.get(f"{views}/{name}_v1").status_code == 404

    events = collect(catalog, lifecycle, 4)
    assert [e["type"] for e in events] == ["createView", "updateView", "renameView", "dropView"]
    create, update, rename, drop = events
    assert {e["tabular-type"] for e in events} == {"View"}
    assert {e["tabular-id"] for e in events} == {created["metadata"]["view-uuid"]}
    assert (create["name"], create["namespace"], create["prefix"]) == (name, catalog.ns,
                                                                       catalog.wh)
    assert create["data"]["name"] == name
    assert create["data"]["properties"] == {"a": "b"}
    assert update["data"]["updates"][1] == {"action": "set-current-view-version",
                                            "view-version-id": -1}
    assert (rename["name"], rename["namespace"], rename["prefix"]) == (
        name.lower(), catalog.ns.upper(), "")
    assert rename["data"] is None
    assert drop["data"] is None
    assert (drop["name"], drop["prefix"]) == (name + "_v1", catalog.wh)
