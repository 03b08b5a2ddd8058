"""`python -m tests.deploy.client_min_deps`: the client works at its declared minimum versions.

Builds (once, cached in .venv-min and rebuilt when the floors change) a clean venv holding exactly
the client's declared minimums (`grpcio==<floor>`, `protobuf==<floor>`, `httpx==<floor>` and what
those pull in), then runs tests/deploy/client_min_probe.py there with the client's source on
PYTHONPATH: an import of lakegate_client plus one HTTP and one gRPC call against in-process
fakes. Run by `make client-min-deps`, which `make test` calls.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

from tests.deploy.client_floor import CLIENT, pins_at_floor
from tests.deploy.manifests import REPO_ROOT

VENV = REPO_ROOT / ".venv-min"
STAMP = VENV / ".pins"
PROBE = Path(__file__).with_name("client_min_probe.py")
INSTALL_TIMEOUT_S = 600
PROBE_TIMEOUT_S = 120


def ensure_venv(pins: list[str]) -> Path:
    """The min-deps venv's python, (re)built when the pinned floors differ from the last build."""
    python = VENV / "bin" / "python"
    wanted = "\n".join(pins) + "\n"
    if python.exists() and STAMP.exists() and STAMP.read_text(encoding="utf-8") == wanted:
        return python
    venv.EnvBuilder(clear=True, with_pip=True).create(VENV)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    STAMP.write_text(wanted, encoding="utf-8")
    return python


def main() -> int:
    pins = pins_at_floor()
    python = ensure_venv(pins)
    print("client minimums:", " ".join(pins))
    done = subprocess.run(
        [str(python), "-I", "-c", _RUN, str(CLIENT / "src"), str(PROBE)],
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    return done.returncode


# -I (isolated) ignores PYTHONPATH and the user site, so nothing from the dev venv leaks in; the
# client's source directory is put on sys.path explicitly, then the probe runs as __main__.
_RUN = (
    "import runpy, sys; src, probe = sys.argv[1], sys.argv[2]; sys.path.insert(0, src); "
    "sys.argv = [probe]; runpy.run_path(probe, run_name='__main__')"
)


if __name__ == "__main__":
    sys.exit(main())
