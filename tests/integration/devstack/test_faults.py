"""The emulator's fault-injection and counter hooks."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

pytestmark = pytest.mark.integration


def test_next_n_calls_fail_with_retry_after_then_recover(catalog, hooks):
    name = f"f_{uuid.uuid4().hex[:8]}"
    assert catalog.create(name).status_code == 200
    hooks.set_faults(
        status=503, count=2, retry_after=7, operations=["load_generic_table_credentials"]
    )
    url = f"{catalog.tables_path()}/{name}/credentials"
    assert catalog.http.get(catalog.tables_path()).status_code == 200  # other ops unaffected
    for _ in range(2):
        resp = catalog.http.get(url)
        assert resp.status_code == 503
        assert resp.headers["Retry-After"] == "7"
        assert resp.json()["error"]["code"] == 503
    assert catalog.http.get(url).status_code == 200
    stats = hooks.stats()
    assert stats["load_generic_table_credentials"] == 3
    assert stats["faults_injected"] == 2
    assert stats["sts_assume_role"] == 1


def test_dropped_connection_gives_no_response(catalog, hooks):
    hooks.set_faults(drop_connection=True, count=1, operations=["list_generic_tables"])
    with pytest.raises(httpx.TransportError):
        catalog.http.get(catalog.tables_path())
    assert catalog.http.get(catalog.tables_path()).status_code == 200


def test_latency_is_added(catalog, hooks):
    hooks.set_faults(latency_ms=300, operations=["list_generic_tables"])
    start = time.monotonic()
    assert catalog.http.get(catalog.tables_path()).status_code == 200
    assert time.monotonic() - start >= 0.3


def test_probability_one_fails_every_call_and_clear_restores(catalog, hooks):
    hooks.set_faults(status=500, probability=1.0, operations=["list_generic_tables"])
    assert catalog.http.get(catalog.tables_path()).status_code == 500
    hooks.clear_faults()
    assert catalog.http.get(catalog.tables_path()).status_code == 200


def test_reset_zeroes_counters(catalog, hooks):
    catalog.http.get(catalog.tables_path())
    assert hooks.stats()["list_generic_tables"] == 1
    hooks.reset()
    stats = hooks.stats()
    assert stats["list_generic_tables"] == 0
    for key in (
        "load_generic_table",
        "load_generic_table_credentials",
        "create_generic_table",
        "drop_generic_table",
        "rename_generic_table",
        "sts_assume_role",
    ):
        assert stats[key] == 0


def test_invalid_fault_spec_is_refused(hooks):
    resp = httpx.post(f"{hooks.url}/_emulator/faults", json={"status": 200})
    assert resp.status_code == 400


def test_sts_fault_surfaces_as_412_short_term_credential_error(catalog, hooks):
    name = f"sts_{uuid.uuid4().hex[:8]}"
    catalog.create(name)
    hooks.set_faults(status=503, count=1, operations=["sts_assume_role"])
    url = f"{catalog.tables_path()}/{name}/credentials"
    failed = catalog.http.get(url)
    assert failed.status_code == 412
    assert failed.json()["error"]["type"] == "ShortTermCredentialError"
    assert catalog.http.get(url).status_code == 200  # errors are not cached
    assert hooks.stats()["sts_assume_role"] == 2


def test_replica_lag_makes_reads_answer_the_table_of_a_moment_ago(catalog, hooks):
    name = f"lag_{uuid.uuid4().hex[:8]}"
    assert catalog.create(name).status_code == 200
    url = f"{catalog.tables_path()}/{name}"
    old = catalog.http.get(url).json()["table"]["base-location"]
    hooks.set_faults(replica_lag_ms=1500)
    assert hooks.faults()["replica_lag_ms"] == 1500
    changed = time.monotonic()
    assert catalog.http.delete(url).status_code == 204
    assert catalog.create(name).status_code == 200  # the primary has the new table at once
    # Loads and credentials read the replica: still the old table.
    assert catalog.http.get(url).json()["table"]["base-location"] == old
    creds = catalog.http.get(f"{url}/credentials").json()["storage-credentials"]
    assert creds[0]["prefix"] == old
    while time.monotonic() - changed < 1.6:
        time.sleep(0.1)
    new = catalog.http.get(url).json()["table"]["base-location"]
    assert new != old
    hooks.clear_faults()
