import pytest
from aiohttp import web

from devstack.emulator.errors import ApiError
from devstack.emulator.idempotency import IdempotencyStore

SCOPE = ("wh1", "k1")


def _finished(op: str, response: web.Response, *, lifetime_s: float = 60) -> IdempotencyStore:
    """A store in which `op` ran under SCOPE (a fresh key) and answered `response`."""
    store = IdempotencyStore(lifetime_s=lifetime_s)
    assert store.begin(SCOPE, op) is None
    store.finish(SCOPE, op, response)
    return store


def test_successful_result_is_replayed():
    store = _finished("create_generic_table", web.json_response({"table": 1}))
    replay = store.begin(SCOPE, "create_generic_table")
    assert replay is not None
    assert (replay.status, replay.body) == (200, b'{"table": 1}')


def test_failed_result_is_not_remembered():
    store = _finished("drop_generic_table", web.json_response({}, status=404))
    assert store.begin(SCOPE, "drop_generic_table") is None


def test_second_request_while_the_first_runs_is_409():
    store = IdempotencyStore(lifetime_s=60)
    store.begin(SCOPE, "op")
    with pytest.raises(ApiError) as info:
        store.begin(SCOPE, "op")
    assert (info.value.status, info.value.error_type) == (409, "RequestInProgress")


def test_expired_result_is_forgotten():
    store = _finished("op", web.Response(status=204), lifetime_s=0)
    assert store.begin(SCOPE, "op") is None


def test_key_reused_for_another_operation_is_400():
    store = _finished("create_generic_table", web.json_response({"table": 1}))
    with pytest.raises(ApiError) as info:
        store.begin(SCOPE, "drop_generic_table")
    assert (info.value.status, info.value.error_type) == (400, "IdempotencyKeyReused")


def test_keys_are_scoped_by_warehouse():
    store = _finished("drop_generic_table", web.Response(status=204))
    assert store.begin(("wh2", SCOPE[1]), "create_generic_table") is None
