"""Start-up checks: fail closed when the policy limits a caller to read and no read role is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.preflight import read_role_problem, startup_problems
from gateway.settings import Settings
from gateway.surfaces.policy import CallerPolicy, parse_rules

READ_ONLY = "callers:\n  spark:\n    - {warehouse: demo, namespace: '*', table: '*'}\n"
READ_WRITE = ("callers:\n  spark:\n"
              "    - {warehouse: demo, namespace: '*', table: '*', access: [read, write]}\n")


def _settings(policy: Path, **extra: str) -> Settings:
    env = {"LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:9", "LAKEGATE__TOKEN__KIND": "none",
           "LAKEGATE__CALLERS__POLICY_FILE": str(policy)}
    return Settings.load(environ=env | {f"LAKEGATE__{k}": v for k, v in extra.items()})


@pytest.mark.parametrize(
    ("policy", "extra", "refused"),
    [
        (READ_ONLY, {}, True),
        (READ_ONLY, {"UPSTREAM__READ_ROLE_ID": "read-role"}, False),
        (READ_ONLY, {"UPSTREAM__ALLOW_READ_WITHOUT_READ_ROLE": "true"}, False),
        (READ_WRITE, {}, False),
    ],
    ids=["read-only-no-role", "read-role", "opt-in", "read-write"],
)
def test_a_read_limited_caller_needs_the_read_role_or_the_opt_in(
    tmp_path: Path, policy: str, extra: dict[str, str], refused: bool
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    problems = startup_problems(_settings(path, **extra))
    if refused:
        (problem,) = problems
        for name in ("LAKEGATE__CALLERS__POLICY_FILE", "LAKEGATE__UPSTREAM__READ_ROLE_ID",
                     "LAKEGATE__UPSTREAM__ALLOW_READ_WITHOUT_READ_ROLE", "spark"):
            assert name in problem
    else:
        assert problems == []


def test_the_opt_in_is_a_start_warning(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(READ_ONLY)
    warned = _settings(path, UPSTREAM__ALLOW_READ_WITHOUT_READ_ROLE="true").warnings()
    assert any("ALLOW_READ_WITHOUT_READ_ROLE" in w and "read-write" in w for w in warned)
    assert not any("READ_ROLE" in w for w in _settings(path).warnings())


def test_many_limited_callers_are_named_briefly(tmp_path: Path) -> None:
    doc = {"callers": {f"c{i}": [{"access": "read"}] for i in range(9)}}
    problem = read_role_problem(_settings(tmp_path / "p").upstream,
                                CallerPolicy(parse_rules(doc, "t")))
    assert problem is not None
    assert "c0, c1, c2, c3, c4 and 4 more" in problem
