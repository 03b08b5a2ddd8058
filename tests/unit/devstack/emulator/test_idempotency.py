import pytest
from aiohttp import web

from devstack.emulator.errors import ApiError
from devstack.emulator.idempotency import IdempotencyStore


def test_successful_result_is_replayed():
    store = IdempotencyStore(lifetime_s=60)
    scope = ("wh1", "k1")
    assert store.begin(scope, "create_generic_table") is None
    store.finish(scope, "create_generic_table", web.json_response({"table": 1}))
    replay = store.begin(scope, "create_generic_table")
    assert replay is not None
    assert (replay.status, replay.body) == (200, b'{"table": 1}')


def test_failed_result_is_not_remembered():
    store = IdempotencyStore(lifetime_s=60)
    scope = ("wh1", "k2")
    store.begin(scope, "drop_generic_table")
    store.finish(scope, "drop_generic_table", web.json_response({}, status=404))
    assert store.begin(scope, "drop_generic_table") is None


def test_second_request_while_the_first_runs_is_409():
    store = IdempotencyStore(lifetime_s=60)
    store.begin(("wh1", "k3"), "op")
    with pytest.raises(ApiError) as info:
        store.begin(("wh1", "k3"), "op")
    assert (info.value.status, info.value.error_type) == (409, "RequestInProgress")


def test_expired_result_is_forgotten():
    store = IdempotencyStore(lifetime_s=0)
    store.begin(("wh1", "k4"), "op")
    store.finish(("wh1", "k4"), "op", web.Response(status=204))
    assert store.begin(("wh1", "k4"), "op") is None


def test_key_reused_for_another_operation_is_400():
    store = IdempotencyStore(lifetime_s=60)
    store.begin(("wh1", "k5"), "create_generic_table")
    store.finish(("wh1", "k5"), "create_generic_table", web.json_response({"table": 1}))
    with pytest.raises(ApiError) as info:
        store.begin(("wh1", "k5"), "drop_generic_table")
    assert (info.value.status, info.value.error_type) == (400, "IdempotencyKeyReused")


def test_keys_are_scoped_by_warehouse():
    store = IdempotencyStore(lifetime_s=60)
    store.begin(("wh1", "k6"), "drop_generic_table")
    store.finish(("wh1", "k6"), "drop_generic_table", web.Response(status=204))
    assert store.begin(("wh2", "k6"), "create_generic_table") is None
