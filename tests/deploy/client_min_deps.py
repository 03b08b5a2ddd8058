"""Clean venvs holding the client as executor images do (`python -m tests.deploy.client_min_deps`).

Two installs, each built once into its own venv and rebuilt only when its pins or the client's
pyproject change (a `.pins` stamp), every pip run bounded by a timeout:

- `core` (.venv-min-core): `pip install clients/python` next to the protobuf and grpcio that
  executor images pin today (EXECUTOR_PINS) and httpx at the client's floor. The install itself
  fails if the core client requires newer protobuf/grpcio.
- `grpc` (.venv-min-grpc): `pip install clients/python[grpc]` with every declared floor pinned
  (`grpcio==<floor>`, `protobuf==<floor>`, `httpx==<floor>`).
- `spark35` (.venv-min-spark35): the core client next to PySpark 3.5 (no Python Data Source API),
  for the documented `mapInArrow` / `mapPartitions` pattern (spark35_probe.py).

`make client-min-deps` (called by `make test`) builds both; the integration test
tests/integration/client/test_client_min_installs.py then runs client_min_probe.py in each
against the real gateway of the local stack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import venv
from dataclasses import dataclass
from pathlib import Path

from tests.deploy.client_floor import CLIENT, pins_at_floor
from tests.deploy.manifests import REPO_ROOT

PROBE = Path(__file__).with_name("client_min_probe.py")
SPARK35_PROBE = Path(__file__).with_name("spark35_probe.py")
# What Spark 3.5, TensorFlow/Ray and google-cloud images pin today.
EXECUTOR_PINS = ("protobuf==4.25.*", "grpcio==1.62.*")
# A Spark 3.5 executor image's Python side (PySpark 3.5 predates numpy 2).
SPARK35_PINS = ("pyspark==3.5.9", "pyarrow==15.0.2", "pandas==2.2.3", "numpy==1.26.4")
INSTALL_TIMEOUT_S = 600
PROBE_TIMEOUT_S = 300


@dataclass(frozen=True)
class Install:
    """One clean venv: what it pins and which form of the client it installs."""

    name: str
    pins: tuple[str, ...]
    requirement: str
    probe: Path = PROBE

    @property
    def venv(self) -> Path:
        return REPO_ROOT / f".venv-min-{self.name}"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def stamp(self) -> str:
        """What the venv was built from: its pins and the client's declared dependencies (the
        required ones and every extra), so any other pyproject edit keeps the cache."""
        with (CLIENT / "pyproject.toml").open("rb") as fh:
            project = tomllib.load(fh)["project"]
        declared = json.dumps(
            [project["dependencies"], project.get("optional-dependencies", {})], sort_keys=True
        )
        return "\n".join([*self.pins, self.requirement, declared]) + "\n"


def installs() -> dict[str, Install]:
    return {
        "core": Install("core", (*pins_at_floor(), *EXECUTOR_PINS), str(CLIENT)),
        "grpc": Install("grpc", tuple(pins_at_floor("grpc")), f"{CLIENT}[grpc]"),
        "spark35": Install(
            "spark35", (*pins_at_floor(), *SPARK35_PINS), str(CLIENT), SPARK35_PROBE
        ),
    }


def ensure_venv(install: Install) -> Path:
    """The install's python, (re)built when its stamp differs from the last build."""
    stamp = install.venv / ".pins"
    wanted = install.stamp()
    if install.python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return install.python
    venv.EnvBuilder(clear=True, with_pip=True).create(install.venv)
    subprocess.run(
        [str(install.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         *install.pins, install.requirement],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    stamp.write_text(wanted, encoding="utf-8")
    return install.python


def run_probe(install: Install, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the install's probe in its venv with this checkout's client source first on sys.path
    (the venv's installed copy proves the install; the source is what is tested).

    -I (isolated) ignores PYTHONPATH and the user site, so nothing from the dev venv leaks in.
    """
    return subprocess.run(
        [str(ensure_venv(install)), "-I", "-c", _RUN, str(CLIENT / "src"), str(install.probe),
         *args],
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "NO_PROXY": "localhost,127.0.0.1",
            **{k: os.environ[k] for k in ("HOME", "JAVA_HOME") if k in os.environ},
        },
    )


_RUN = (
    "import runpy, sys; src, probe = sys.argv[1], sys.argv[2]; sys.path.insert(0, src); "
    "sys.argv = [probe, *sys.argv[3:]]; runpy.run_path(probe, run_name='__main__')"
)


def main() -> int:
    for install in installs().values():
        ensure_venv(install)
        print(f"client install {install.name}: {install.venv.name} ({' '.join(install.pins)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
