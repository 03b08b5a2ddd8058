"""The project's own packaging builds without a warning: `make venv` installs three distributions
editable (the daemon, the client, the dev stack) and the image builds two wheels.

Each build runs setuptools' PEP 517 hooks in a subprocess with every warning an error, offline
(the venv's pinned setuptools, as the image builds with --no-build-isolation). A deprecated
`project.license` table, a data folder setuptools would take for an unlisted package, or an
editable layout that needs setuptools' import-hook finder all fail here with setuptools' message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.manifests import REPO_ROOT

pytestmark = pytest.mark.deploy

PROJECTS = {
    "daemon": REPO_ROOT,
    "client": REPO_ROOT / "clients" / "python",
    "devstack": REPO_ROOT / "devstack",
}

_BUILD = """
import sys, warnings
warnings.simplefilter("error")
from setuptools import build_meta
hook = getattr(build_meta, sys.argv[1])
print(hook(sys.argv[2]))
"""


def _build(project: Path, hook: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BUILD, hook, str(out)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_editable_build_is_warning_free(name: str, tmp_path: Path) -> None:
    done = _build(PROJECTS[name], "build_editable", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    assert list(tmp_path.glob("*.whl")), done.stdout


@pytest.mark.parametrize("name", ["daemon", "client"])
def test_wheel_build_is_warning_free(name: str, tmp_path: Path) -> None:
    done = _build(PROJECTS[name], "build_wheel", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.stat().st_size > 0
