"""Caller-security warnings at start (issue #28: finding 5, and the JWT issuer suspicion)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from gateway.caller_warnings import caller_warnings, other_local_users, shared_host_warning
from gateway.check import run_check
from gateway.settings import Settings

BASE = {"LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:9", "LAKEGATE__TOKEN__KIND": "none"}


def test_mode_none_on_a_host_with_other_users_is_warned() -> None:
    settings = Settings.load(environ=BASE)
    warning = shared_host_warning(settings, lambda: ["bob", "uid 1001"])
    assert warning is not None
    assert "LAKEGATE__CALLERS__MODE=none" in warning
    assert "127.0.0.1:8765" in warning
    assert "bob, uid 1001" in warning


def test_no_warning_alone_on_the_host_or_with_caller_auth(tmp_path: Path) -> None:
    assert shared_host_warning(Settings.load(environ=BASE), list) is None
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text('{"t-123456": "alice"}')
    token_mode = Settings.load(environ=BASE | {"LAKEGATE__CALLERS__MODE": "token",
                                               "LAKEGATE__CALLERS__TOKENS_FILE": str(tokens)})
    assert shared_host_warning(token_mode, lambda: ["bob"]) is None


def test_other_users_are_seen_in_proc(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a fake process entry to another uid")
    proc = tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    (proc / "1").mkdir()
    (proc / "self").mkdir()
    os.chown(proc / "4242", 4321, 4321)
    found = other_local_users(proc)
    assert "uid 4321" in found
    assert f"uid {os.geteuid()}" not in found


def test_lakegate_check_prints_the_warning_without_failing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gateway.check

    monkeypatch.setattr(gateway.check, "caller_warnings",
                        lambda s: caller_warnings(s, lambda: ["bob"]))
    for key, value in BASE.items():
        monkeypatch.setenv(key, value)
    out = io.StringIO()
    run_check([], out)  # the catalog step fails (no warehouse): the warn line comes before
    warn = [line for line in out.getvalue().splitlines() if line.startswith("warn ")]
    assert len(warn) == 1
    assert warn[0].startswith("warn callers: LAKEGATE__CALLERS__MODE=none")


def test_jwt_mode_without_an_issuer_is_warned() -> None:
    """Issue #28 (suspected): a token of any issuer was accepted, silently."""
    env = BASE | {"LAKEGATE__CALLERS__MODE": "jwt",
                  "LAKEGATE__CALLERS__JWKS_URL": "http://127.0.0.1:1/j",
                  "LAKEGATE__CALLERS__AUDIENCE": "lakegate"}
    warnings = caller_warnings(Settings.load(environ=env), list)
    assert any("LAKEGATE__CALLERS__ISSUER" in w for w in warnings)
    with_issuer = Settings.load(environ=env | {"LAKEGATE__CALLERS__ISSUER": "https://issuer"})
    assert caller_warnings(with_issuer, list) == []
