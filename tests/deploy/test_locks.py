"""requirements/*.lock: every transitive package pinned with hashes, in step with their inputs.

`make venv` installs requirements/dev.lock with --require-hashes, the image installs
requirements/daemon.lock the same way (`make lock` regenerates both with pip-compile). These
checks catch a lock that went stale after its input changed, an unhashed or unpinned line, an
image that would run versions the tests never ran, and a test venv that drifted from its lock.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from tests.deploy.manifests import REPO_ROOT

pytestmark = pytest.mark.deploy

REQ = REPO_ROOT / "requirements"
LOCKS = {
    "dev": (REQ / "dev.txt", REQ / "dev.lock"),
    "daemon": (REQ / "daemon.in", REQ / "daemon.lock"),
}
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s;\\]+)")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip-compile --generate-hashes output."""
    out: dict[str, tuple[str, list[str]]] = {}
    current: str | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        m = _PIN.match(line)
        if m:
            current = _norm(m.group(1))
            out[current] = (m.group(2), [])
        elif line.strip().startswith("--hash=sha256:") and current is not None:
            out[current][1].append(line.strip().removeprefix("--hash=sha256:").rstrip(" \\"))
        else:
            raise ValueError(f"not a pinned, hashed requirement line: {raw!r}")
    return out


def _input_pins(path: Path) -> dict[str, str]:
    pins = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        m = _PIN.match(raw.split("#", 1)[0].strip())
        if m:
            pins[_norm(m.group(1))] = m.group(2)
    return pins


@pytest.mark.parametrize("kind", sorted(LOCKS))
def test_lock_pins_every_package_with_hashes(kind: str) -> None:
    lock = parse_lock(LOCKS[kind][1].read_text(encoding="utf-8"))
    assert lock
    for name, (_, hashes) in lock.items():
        assert hashes, f"{name} has no hash"
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name


@pytest.mark.parametrize("kind", sorted(LOCKS))
def test_lock_is_not_stale(kind: str) -> None:
    source, lock_path = LOCKS[kind]
    lock = parse_lock(lock_path.read_text(encoding="utf-8"))
    for name, version in _input_pins(source).items():
        assert name in lock, f"{name} is in {source.name} but not in {lock_path.name}: make lock"
        assert lock[name][0] == version, f"{name}: {source.name} {version}, lock {lock[name][0]}"


def test_image_lock_uses_only_tested_versions() -> None:
    dev = parse_lock(LOCKS["dev"][1].read_text(encoding="utf-8"))
    daemon = parse_lock(LOCKS["daemon"][1].read_text(encoding="utf-8"))
    for name, (version, _) in daemon.items():
        assert dev.get(name, ("<absent>",))[0] == version, f"{name}=={version} untested"


def test_image_lock_covers_the_daemon_and_client_dependencies() -> None:
    daemon = parse_lock(LOCKS["daemon"][1].read_text(encoding="utf-8"))
    for pyproject in (REPO_ROOT / "pyproject.toml", REPO_ROOT / "clients/python/pyproject.toml"):
        with pyproject.open("rb") as fh:
            deps = tomllib.load(fh)["project"]["dependencies"]
        for dep in deps:
            name = _norm(re.split(r"[\s<>=!;\[]", dep, maxsplit=1)[0])
            if name != "lakegate-client":
                assert name in daemon, f"{pyproject.name}: {name} is not in daemon.lock"


def test_the_test_venv_is_the_dev_lock() -> None:
    lock = parse_lock(LOCKS["dev"][1].read_text(encoding="utf-8"))
    for name, (version, _) in lock.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is locked but not installed (make venv)")
        assert installed == version, f"{name}: installed {installed}, locked {version}"


def test_lock_parser_rejects_an_unpinned_line() -> None:
    with pytest.raises(ValueError, match="not a pinned"):
        parse_lock("requests>=2\n")
    assert parse_lock("a==1 \\\n    --hash=sha256:" + "0" * 64 + "\n    # via b\n") == {
        "a": ("1", ["0" * 64])
    }
