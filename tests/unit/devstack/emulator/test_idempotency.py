import pytest
from aiohttp import web

from devstack.emulator.errors import ApiError
from devstack.emulator.idempotency import IdempotencyStore


def test_successful_result_is_replayed():
    store = IdempotencyStore(lifetime_s=60)
    scope = ("create_generic_table", "k1")
    assert store.begin(scope) is None
    store.finish(scope, web.json_response({"table": 1}))
    replay = store.begin(scope)
    assert replay is not None
    assert (replay.status, replay.body) == (200, b'{"table": 1}')


def test_failed_result_is_not_remembered():
    store = IdempotencyStore(lifetime_s=60)
    scope = ("drop_generic_table", "k2")
    store.begin(scope)
    store.finish(scope, web.json_response({}, status=404))
    assert store.begin(scope) is None


def test_second_request_while_the_first_runs_is_409():
    store = IdempotencyStore(lifetime_s=60)
    store.begin(("op", "k3"))
    with pytest.raises(ApiError) as info:
        store.begin(("op", "k3"))
    assert (info.value.status, info.value.error_type) == (409, "RequestInProgress")


def test_expired_result_is_forgotten():
    store = IdempotencyStore(lifetime_s=0)
    store.begin(("op", "k4"))
    store.finish(("op", "k4"), web.Response(status=204))
    assert store.begin(("op", "k4")) is None
