"""`lakegate --version`, `lakegate check` against the real local stack, and start-up exits."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway import __version__
from tests.gateway_process import REPO_ROOT, stack_env

pytestmark = pytest.mark.integration


def _lakegate(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LAKEGATE")}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args], cwd=REPO_ROOT, env=clean | env,
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_version() -> None:
    done = _lakegate(["--version"], {})
    assert done.returncode == 0
    assert done.stdout.strip() == f"lakegate {__version__}"


def test_check_passes_every_step_against_the_local_stack(info: dict[str, Any]) -> None:
    env = stack_env(info)
    done = _lakegate(["check", "--warehouse", "demo"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    # a `warn callers:` line (mode none on a host with other users) does not fail the check
    lines = [line for line in done.stdout.splitlines() if not line.startswith("warn ")]
    assert [line.split()[1].rstrip(":") for line in lines] == [
        "settings", "files", "idp", "catalog", "warehouse", "clock",
    ]
    assert all(line.startswith("ok ") for line in lines)
    assert "'demo' resolves to " in lines[-2]
    # The stack's IdP and catalog run on this host's clock: both agree with it.
    assert "catalog +" in lines[-1] or "catalog -" in lines[-1]
    assert "idp " in lines[-1]
    assert env["LAKEGATE__TOKEN__CLIENT_SECRET"] not in done.stdout + done.stderr


def test_check_reads_the_client_secret_from_a_mounted_secrets_dir(
    info: dict[str, Any], tmp_path: Path
) -> None:
    env = stack_env(info)
    secret = env.pop("LAKEGATE__TOKEN__CLIENT_SECRET")
    mounted = tmp_path / "upstream"
    mounted.mkdir()
    (mounted / "LAKEGATE__TOKEN__CLIENT_SECRET").write_text(secret + "\n")
    done = _lakegate(["check", "--warehouse", "demo"],
                     env | {"LAKEGATE_SECRETS_DIR": str(mounted)})
    assert done.returncode == 0, done.stdout + done.stderr
    steps = [line for line in done.stdout.splitlines() if not line.startswith("warn ")]
    assert steps[2].startswith("ok   idp:"), done.stdout
    assert secret not in done.stdout + done.stderr


def test_check_fails_at_the_idp_without_printing_the_secret(info: dict[str, Any]) -> None:
    wrong = "not-the-secret-" + "x" * 20
    env = stack_env(info) | {"LAKEGATE__TOKEN__CLIENT_SECRET": wrong}
    done = _lakegate(["check", "--warehouse", "demo"], env)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("FAIL idp:"), done.stdout
    assert not any(line.split()[1].startswith("catalog") for line in lines)
    assert wrong not in done.stdout + done.stderr


def test_check_fails_on_an_unknown_warehouse(info: dict[str, Any]) -> None:
    done = _lakegate(["check", "--warehouse", "no-such-warehouse"], stack_env(info))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("FAIL catalog:"), done.stdout


_OFFLINE = {
    "LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:9",
    "LAKEGATE__TOKEN__KIND": "none",
}


@pytest.mark.parametrize("command", ["serve", "check"])
@pytest.mark.parametrize("setting", ["TOKENS_FILE", "POLICY_FILE"])
@pytest.mark.parametrize("unusable", ["missing", "unreadable"])
def test_missing_or_unreadable_caller_file_exits_2_naming_the_setting_before_logging(
    command: str, setting: str, unusable: str, tmp_path: Path
) -> None:
    path = tmp_path / "absent.yaml"
    if unusable == "unreadable":  # a directory: unreadable as a file even for root
        path = tmp_path / "a-directory"
        path.mkdir()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text('"a-token": alice\n')
    env = _OFFLINE | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(tokens),
        f"LAKEGATE__CALLERS__{setting}": str(path),
    }
    done = _lakegate([command], env)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"LAKEGATE__CALLERS__{setting}={path}: cannot read" in output
    assert "stopped" not in output
    if command == "serve":  # nothing logged before the refusal: no JSON log line at all
        assert done.stdout == ""
        assert not any(line.startswith("{") for line in done.stderr.splitlines()), done.stderr


def test_unreadable_policy_file_exits_2_naming_the_setting(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("callers: [not, a, mapping]\n")
    done = _lakegate(["serve"], _OFFLINE | {"LAKEGATE__CALLERS__POLICY_FILE": str(policy)})
    assert done.returncode == 2
    assert "LAKEGATE__CALLERS__POLICY_FILE" in done.stderr
    assert "stopped" not in done.stdout + done.stderr


def test_broken_tokens_file_is_named_without_echoing_its_content(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    secret = "s3cr3t-token-value-0123456789"  # noqa: S105 (a test value)
    tokens.write_text(f"- {secret}\n")  # a list, not a token -> name mapping
    env = _OFFLINE | {
        "LAKEGATE__CALLERS__MODE": "token",
        "LAKEGATE__CALLERS__TOKENS_FILE": str(tokens),
    }
    done = _lakegate(["serve"], env)
    assert done.returncode == 2
    assert "LAKEGATE__CALLERS__TOKENS_FILE" in done.stderr
    assert secret not in done.stdout + done.stderr


def test_port_in_use_exits_2_naming_the_setting(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = _OFFLINE | {"LAKEGATE__LISTEN__HTTP_PORT": str(port)}
        done = _lakegate(["serve"], env)
    assert done.returncode == 2
    assert "LAKEGATE__LISTEN__HTTP_PORT" in done.stderr


READ_ONLY_POLICY = "callers:\n  spark:\n    - {warehouse: demo, namespace: '*', table: '*'}\n"


def test_a_read_limited_caller_without_a_read_role_exits_2_naming_both_settings(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(READ_ONLY_POLICY)  # access defaults to read
    done = _lakegate(["serve"], _OFFLINE | {"LAKEGATE__CALLERS__POLICY_FILE": str(policy)})
    assert done.returncode == 2
    assert "LAKEGATE__UPSTREAM__READ_ROLE_ID" in done.stderr
    assert "LAKEGATE__UPSTREAM__ALLOW_READ_WITHOUT_READ_ROLE" in done.stderr
    assert "spark" in done.stderr
    assert "stopped" not in done.stdout + done.stderr


def test_the_explicit_opt_in_lets_the_files_check_pass(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(READ_ONLY_POLICY)
    env = _OFFLINE | {"LAKEGATE__CALLERS__POLICY_FILE": str(policy),
                      "LAKEGATE__UPSTREAM__ALLOW_READ_WITHOUT_READ_ROLE": "true"}
    done = _lakegate(["check"], env)
    assert done.returncode == 1, done.stdout + done.stderr  # only the offline catalog fails
    assert "FAIL files" not in done.stdout
