"""SIGHUP reload: new caller tokens and policy swap in whole, a broken file keeps the last good."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import aiohttp
import pytest

from gateway.app import App
from gateway.settings import Settings
from tests.unit.app_harness import CREDS, MARK, app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations

ALLOW_DEMO = "    - {warehouse: demo, namespace: '*', table: '*'}\n"


def _write(tmp_path: Path, tokens: str, policy: str) -> None:
    (tmp_path / "tokens.yaml").write_text(tokens)
    (tmp_path / "policy.yaml").write_text(policy)


def _settings(tmp_path: Path, **extra: str) -> Settings:
    return settings_for(
        tmp_path,
        LAKEGATE__CALLERS__MODE="token",
        LAKEGATE__CALLERS__TOKENS_FILE=str(tmp_path / "tokens.yaml"),
        LAKEGATE__CALLERS__POLICY_FILE=str(tmp_path / "policy.yaml"),
        LAKEGATE__UPSTREAM__READ_ROLE_ID="read-role",  # the policies below grant read only
        **extra,
    )


def _app(tmp_path: Path, ops: FakeOperations) -> App:
    return app_for(_settings(tmp_path), ops)


async def _status(session: aiohttp.ClientSession, app: App, token: str) -> int:
    headers = {**MARK, "Authorization": f"Bearer {token}"}
    async with session.get(f"http://127.0.0.1:{app.http_port}{CREDS}", headers=headers) as r:
        return r.status


def _reloads(app: App, result: str) -> float:
    value = app.metrics.registry.get_sample_value(
        "lakegate_config_reloads_total", {"result": result}
    )
    return value or 0.0


async def test_reload_swaps_tokens_and_policy_and_keeps_the_last_good_set(
    tmp_path: Path, fake_ops: FakeOperations, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path, '"token-a": alice\n', "callers:\n  alice:\n" + ALLOW_DEMO)
    app = _app(tmp_path, fake_ops)
    await app.start()
    assert app.reloader is not None
    try:
        async with aiohttp.ClientSession() as session:
            assert await _status(session, app, "token-a") == 200
            # New tokens (a -> alice, b -> bob) and a policy that now only grants bob.
            tokens = '"token-a": alice\n"token-b": bob\n'
            _write(tmp_path, tokens, "callers:\n  bob:\n" + ALLOW_DEMO)
            assert await app.reloader.reload() is True
            assert await _status(session, app, "token-b") == 200
            assert await _status(session, app, "token-a") == 403  # alice lost her grant
            assert _reloads(app, "ok") == 1
            # A broken tokens file: nothing changes, the error is logged and counted.
            (tmp_path / "tokens.yaml").write_text("- not-a-mapping\n")
            with caplog.at_level(logging.ERROR, logger="lakegate.reload"):
                assert await app.reloader.reload() is False
            assert "keeping the last good configuration" in caplog.text
            assert "not-a-mapping" not in caplog.text
            assert await _status(session, app, "token-b") == 200
            assert await _status(session, app, "token-a") == 403
            assert await _status(session, app, "token-c") == 401
            assert _reloads(app, "error") == 1
            # A broken policy file is refused the same way.
            _write(tmp_path, '"token-c": carol\n', "callers: [broken]\n")
            assert await app.reloader.reload() is False
            assert await _status(session, app, "token-c") == 401
            assert await _status(session, app, "token-b") == 200
            assert _reloads(app, "error") == 2
    finally:
        await app.shutdown()


async def test_reload_applies_the_log_level_from_the_source(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    _write(tmp_path, '"token-a": alice\n', "callers:\n  alice:\n" + ALLOW_DEMO)
    level = {"value": "INFO"}
    app = App(
        _settings(tmp_path),
        service_factory=lambda s, m, spawn: fake_ops,  # type: ignore[arg-type,return-value]
        reload_source=lambda: _settings(tmp_path, LAKEGATE__LOG__LEVEL=level["value"]),
    )
    root = logging.getLogger()
    before = root.level
    await app.start()
    try:
        assert app.reloader is not None
        level["value"] = "DEBUG"
        assert await app.reloader.reload() is True
        assert root.level == logging.DEBUG
    finally:
        root.setLevel(before)
        await app.shutdown()


async def test_sighup_reloads_through_serve_without_stopping(
    tmp_path: Path, fake_ops: FakeOperations
) -> None:
    _write(tmp_path, '"token-a": alice\n', "callers:\n  alice:\n" + ALLOW_DEMO)
    app = _app(tmp_path, fake_ops)
    serving = asyncio.create_task(app.serve())
    await asyncio.wait_for(app.started.wait(), timeout=10)
    try:
        async with aiohttp.ClientSession() as session:
            _write(tmp_path, '"token-b": bob\n', "callers:\n  bob:\n" + ALLOW_DEMO)
            os.kill(os.getpid(), signal.SIGHUP)
            for _ in range(200):  # bounded: at most ~10 s
                if _reloads(app, "ok") >= 1:
                    break
                await asyncio.sleep(0.05)
            assert _reloads(app, "ok") == 1
            assert await _status(session, app, "token-b") == 200
            assert await _status(session, app, "token-a") == 401
            assert not serving.done()
    finally:
        app.request_stop()
        await asyncio.wait_for(serving, timeout=30)


async def test_a_reload_that_would_limit_a_caller_to_read_without_a_read_role_is_refused(
    tmp_path: Path, fake_ops: FakeOperations, caplog: pytest.LogCaptureFixture
) -> None:
    read_write = "    - {warehouse: demo, namespace: '*', table: '*', access: [read, write]}\n"
    _write(tmp_path, '"token-a": alice\n', "callers:\n  alice:\n" + read_write)
    settings = settings_for(
        tmp_path,
        LAKEGATE__CALLERS__MODE="token",
        LAKEGATE__CALLERS__TOKENS_FILE=str(tmp_path / "tokens.yaml"),
        LAKEGATE__CALLERS__POLICY_FILE=str(tmp_path / "policy.yaml"),
    )  # no read role: the running catalog client fetches every credential read-write
    async with running(app_for(settings, fake_ops)) as app:
        assert app.reloader is not None
        _write(tmp_path, '"token-a": alice\n"token-b": bob\n',
               "callers:\n  alice:\n" + read_write + "  bob:\n" + ALLOW_DEMO)
        with caplog.at_level(logging.ERROR, logger="lakegate.reload"):
            assert await app.reloader.reload() is False
        (record,) = [r for r in caplog.records if r.name == "lakegate.reload"]
        assert "LAKEGATE__UPSTREAM__READ_ROLE_ID" in record.error  # type: ignore[attr-defined]
        assert _reloads(app, "error") == 1
        async with aiohttp.ClientSession() as session:
            assert await _status(session, app, "token-a") == 200  # the last good set stays
            assert await _status(session, app, "token-b") == 401
