"""App lifecycle: bind (TCP port 0, UDS 0660, ports file), serve, drain, close, signal restore."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import stat
import threading
from pathlib import Path

import aiohttp
import pytest

from gateway.app import App, StartupError, State
from gateway.helper_threads import LinuxThreads, batch_available, other_threads
from gateway.serve import run
from tests.unit.app_harness import CREDS, MARK, app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations


async def test_start_binds_free_ports_uds_and_writes_ports_file(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    async with running(app_for(settings_for(tmp_path), fake_ops)) as app:
        ports = json.loads((tmp_path / "ports.json").read_text())
        assert ports == {"http_port": app.http_port, "grpc_port": app.grpc_port}
        assert app.http_port
        assert app.grpc_port
        for name in ("http.sock", "grpc.sock"):
            mode = (tmp_path / name).stat().st_mode
            assert stat.S_ISSOCK(mode)
            assert stat.S_IMODE(mode) == 0o660
        assert fake_ops.started
        conn = aiohttp.UnixConnector(path=str(tmp_path / "http.sock"))
        async with aiohttp.ClientSession(connector=conn) as session:
            async with session.get("http://localhost" + CREDS, headers=MARK) as resp:
                assert resp.status == 200
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{app.http_port}/readyz") as resp:
                assert resp.status == 200
    assert app.state is State.CLOSED
    assert fake_ops.closed
    assert not (tmp_path / "http.sock").exists()


async def test_stale_socket_file_is_replaced(tmp_path: Path, fake_ops: FakeOperations) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / "http.sock"))
    stale.close()  # the file stays, nobody listens: a crashed daemon's leftover
    app = app_for(settings_for(tmp_path), fake_ops)
    await app.start()
    await app.shutdown()
    assert app.state is State.CLOSED


async def test_regular_file_at_socket_path_is_refused(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    (tmp_path / "http.sock").write_text("not a socket")
    app = app_for(settings_for(tmp_path), fake_ops)
    with pytest.raises(StartupError, match="not a socket"):
        await app.start()
    await app.shutdown()
    assert (tmp_path / "http.sock").read_text() == "not a socket"


async def test_live_socket_is_not_stolen(tmp_path: Path, fake_ops: FakeOperations) -> None:
    async with running(app_for(settings_for(tmp_path), fake_ops)):
        second = app_for(settings_for(tmp_path / "x", LAKEGATE__LISTEN__HTTP_UDS=str(
            tmp_path / "http.sock")), FakeOperations())
        with pytest.raises(StartupError, match="another server"):
            await second.start()
        await second.shutdown()


async def test_drain_completes_in_flight_request_then_closes(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    fake_ops.hold = asyncio.Event()
    app = app_for(settings_for(tmp_path), fake_ops)
    serve = asyncio.create_task(app.serve())
    async with asyncio.timeout(10):
        await app.started.wait()
        async with aiohttp.ClientSession() as session:
            pending = asyncio.create_task(
                session.get(f"http://127.0.0.1:{app.http_port}{CREDS}", headers=MARK))
            await fake_ops.entered.wait()
            app.request_stop()
            await app.stopping.wait()
            fake_ops.hold.set()  # the in-flight request may now finish, inside the grace
            resp = await pending
            assert resp.status == 200
            resp.release()
        await serve
    assert app.state is State.CLOSED
    assert fake_ops.closed


async def test_drain_timeout_cancels_a_stuck_request(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    fake_ops.hold = asyncio.Event()  # never set: the request is stuck
    app = app_for(settings_for(tmp_path, LAKEGATE__SHUTDOWN_GRACE_S="0.2"), fake_ops)
    await app.start()
    async with aiohttp.ClientSession() as session:
        pending = asyncio.create_task(
            session.get(f"http://127.0.0.1:{app.http_port}{CREDS}", headers=MARK))
        async with asyncio.timeout(10):
            await fake_ops.entered.wait()
            await app.shutdown()
            with pytest.raises(aiohttp.ClientError):
                await pending
    assert app.state is State.CLOSED
    assert len(app.tasks) == 0


async def test_serve_restores_signal_handlers(tmp_path: Path, fake_ops: FakeOperations) -> None:
    def marker(signum: int, frame: object) -> None:  # pragma: no cover - never delivered
        pass

    previous = signal.signal(signal.SIGTERM, marker)
    try:
        app = app_for(settings_for(tmp_path), fake_ops)
        serve = asyncio.create_task(app.serve())
        async with asyncio.timeout(10):
            await app.started.wait()
            app.request_stop()
            await serve
        assert signal.getsignal(signal.SIGTERM) is marker
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_invalid_settings_exit_2_naming_the_env_var(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("upstream: {url: 'http://127.0.0.1:9'}\ntoken: {kind: none}\n"
                      "cache: {min_remaining_s: 900, refresh_lead_s: 300}\n")
    monkeypatch.delenv("LAKEGATE_CONFIG_FILE", raising=False)
    assert run(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "LAKEGATE__CACHE__REFRESH_LEAD_S" in err


async def test_drain_completes_an_in_flight_grpc_call(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    import grpc

    from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc

    fake_ops.hold = asyncio.Event()
    app = app_for(settings_for(tmp_path), fake_ops)
    await app.start()
    async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
        stub = credentials_pb2_grpc.CredentialServiceStub(channel)
        call = stub.GetTableCredentials(credentials_pb2.GetTableCredentialsRequest(
            table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders")),
            timeout=10)
        async with asyncio.timeout(10):
            await fake_ops.entered.wait()
            stopping = asyncio.create_task(app.shutdown())
            await app.stopping.wait()
            fake_ops.hold.set()
            resp = await call
            await stopping
    assert resp.warehouse_id
    assert app.state is State.CLOSED


@pytest.mark.parametrize(
    ("name", "content", "setting"),
    [
        ("policy.yaml", "callers: [not, a, mapping]", "LAKEGATE__CALLERS__POLICY_FILE"),
        ("tokens.yaml", "[]", "LAKEGATE__CALLERS__TOKENS_FILE"),
    ],
)
async def test_unusable_caller_files_are_startup_errors(
    tmp_path: Path, fake_ops: FakeOperations, name: str, content: str, setting: str
) -> None:
    (tmp_path / name).write_text(content)
    extra = {setting: str(tmp_path / name)}
    if "TOKENS" in setting:
        extra["LAKEGATE__CALLERS__MODE"] = "token"
    app = app_for(settings_for(tmp_path, **extra), fake_ops)
    with pytest.raises(StartupError):
        await app.start()
    assert not fake_ops.started
    await app.shutdown()


async def test_app_is_an_async_context_manager_and_cannot_restart(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    async with app_for(settings_for(tmp_path), fake_ops) as app:
        assert app.started.is_set()
    assert app.state is State.CLOSED
    with pytest.raises(RuntimeError, match="cannot start"):
        await app.start()


def _helper_tasks(app: App) -> list[asyncio.Task[object]]:
    return [t for t in app.tasks.live if t.get_name() == "helper-threads"]


@pytest.mark.skipif(not batch_available(), reason="SCHED_BATCH is Linux only")
async def test_only_the_daemon_samples_for_helper_threads_unless_turned_off(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    async with running(app_for(settings_for(tmp_path / "a"), fake_ops)) as app:
        assert _helper_tasks(app) == []  # tests' Apps leave their process's threads alone
    daemon = App(settings_for(tmp_path / "b"), batch_helpers=True,
                 service_factory=lambda s, m, spawn: fake_ops)  # type: ignore[arg-type,return-value]
    async with running(daemon):
        (task,) = _helper_tasks(daemon)
    assert task.cancelled()  # owned: cancelled on shutdown
    off = App(settings_for(tmp_path / "c", LAKEGATE__LISTEN__GRPC_BATCH_THREADS="false"),
              batch_helpers=True,
              service_factory=lambda s, m, spawn: fake_ops)  # type: ignore[arg-type,return-value]
    async with running(off):
        assert _helper_tasks(off) == []


def _policies(own: int) -> set[int]:
    out = set()
    for tid in other_threads(own):
        with contextlib.suppress(OSError):
            out.add(os.sched_getscheduler(tid))
    return out


@pytest.mark.skipif(not batch_available(), reason="SCHED_BATCH is Linux only")
async def test_the_daemons_other_threads_are_batched_while_grpc_is_busy(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    """The real switch, on this test process's threads (the gRPC server's among them): batched
    while calls crowd in, normal once they are gone, and normal after a shutdown while busy."""
    import grpc

    from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc

    own = threading.get_native_id()
    app = App(settings_for(tmp_path), batch_helpers=True,
              service_factory=lambda s, m, spawn: fake_ops)  # type: ignore[arg-type,return-value]
    request = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse="demo", namespace=["demo_ns"], name="orders"))

    async def until(policy: int) -> None:
        while _policies(own) != {policy}:  # noqa: ASYNC110 - the kernel's state, no event
            await asyncio.sleep(0.02)

    try:
        await app.start()
        async with grpc.aio.insecure_channel(f"unix:{tmp_path / 'grpc.sock'}") as channel:
            stub = credentials_pb2_grpc.CredentialServiceStub(channel)
            async with asyncio.timeout(10):
                for round_ in range(2):
                    fake_ops.hold = asyncio.Event()
                    calls = [stub.GetTableCredentials(request, timeout=10) for _ in range(6)]
                    await until(os.SCHED_BATCH)
                    assert os.sched_getscheduler(own) == os.SCHED_OTHER  # the loop's own
                    if round_ == 1:  # a shutdown while batched: drain, then the threads
                        stopping = asyncio.create_task(app.shutdown())
                        await app.stopping.wait()
                    fake_ops.hold.set()
                    await asyncio.gather(*calls)
                    if round_ == 0:
                        await until(os.SCHED_OTHER)  # idle again
                await stopping
        assert _policies(own) == {os.SCHED_OTHER}
        assert app.state is State.CLOSED
    finally:
        await app.shutdown()
        LinuxThreads(lambda: other_threads(own)).apply(False)


async def test_the_daemon_entry_is_the_one_app_that_batches_helper_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway import serve as serve_module
    from gateway.logging import Redactor

    made: list[dict[str, object]] = []

    class Recorded:
        def __init__(self, settings: object, **kwargs: object) -> None:
            made.append(kwargs)

        async def serve(self) -> None:
            return None

    monkeypatch.setattr(serve_module, "App", Recorded)
    settings = settings_for(tmp_path)
    assert await serve_module._serve(settings, lambda: settings, Redactor()) == 0
    assert made[0]["batch_helpers"] is True
    assert made[0]["freeze_gc"] is True


async def test_only_the_daemon_app_collects_the_young_generation_less_often(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    import gc

    from gateway.tuning import GC_YOUNG_THRESHOLD

    before = gc.get_threshold()
    async with running(app_for(settings_for(tmp_path / "test"), fake_ops)):
        assert gc.get_threshold() == before  # a test's App leaves the process alone
    app = App(settings_for(tmp_path / "daemon"), freeze_gc=True,
              service_factory=lambda s, m, spawn: fake_ops)  # type: ignore[arg-type,return-value]
    try:
        async with running(app):
            assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, before[1], before[2])
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
