"""Generate the lakegate.v1 Python stubs into clients/python/src with a pinned grpcio-tools.

`python proto/generate.py` rewrites the committed stubs; `--check` regenerates into a
temporary directory and fails when the committed output differs (run by the test suite).

Why a pinned, older grpcio-tools in its own tool venv (`.venv-proto`, built once, rebuilt when
TOOL_PINS change) rather than the dev venv's: the stubs carry the runtime floor of the tool that
wrote them (`ValidateProtobufRuntimeVersion(...)` in every `*_pb2.py`, `GRPC_GENERATED_VERSION`
in every `*_pb2_grpc.py`; an older runtime refuses to import them). protobuf's cross-version
runtime guarantee supports gencode of major V on runtimes V and V+1, never an older runtime;
grpcio's generated check needs grpcio >= the tool's version. The daemon pins protobuf 7, so
gencode from major 6 is the widest window that still covers it: grpcio-tools 1.72.1 is the first
usable release bundling protoc 30 (protobuf 6.30), giving stubs for protobuf >=6.30,<8 and
grpcio >=1.72.1 (clients/python/README.md "gRPC extra").
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
OUT_ROOT = REPO_ROOT / "clients" / "python" / "src"
PACKAGE_DIR = Path("lakegate") / "v1"
TOOL_VENV = REPO_ROOT / ".venv-proto"
# The generator and the runtime it was released with (grpcio-tools needs protobuf>=6.30,<7).
TOOL_PINS = ("grpcio-tools==1.72.1", "grpcio==1.72.1", "protobuf==6.30.2")
INSTALL_TIMEOUT_S = 600
PROTOC_TIMEOUT_S = 120


def _protos() -> list[Path]:
    return sorted((PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))


def tool_python() -> Path:
    """The tool venv's python, (re)built when TOOL_PINS differ from the last build."""
    python = TOOL_VENV / "bin" / "python"
    stamp = TOOL_VENV / ".pins"
    wanted = "\n".join(TOOL_PINS) + "\n"
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return python
    venv.EnvBuilder(clear=True, with_pip=True).create(TOOL_VENV)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *TOOL_PINS],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    stamp.write_text(wanted, encoding="utf-8")
    return python


def generate(out_root: Path) -> list[Path]:
    """Run the pinned protoc for every .proto; return the files written under out_root."""
    args = [
        "-m",
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(p.relative_to(PROTO_ROOT)) for p in _protos()],
    ]
    # -I (isolated): nothing from the caller's venv or PYTHONPATH shadows the pinned tools.
    done = subprocess.run(
        [str(tool_python()), "-I", *args], cwd=PROTO_ROOT, timeout=PROTOC_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise SystemExit("protoc failed")
    pkg = out_root / PACKAGE_DIR
    pkg.mkdir(parents=True, exist_ok=True)
    for init in (out_root / "lakegate" / "__init__.py", pkg / "__init__.py"):
        init.touch()
    return sorted(p for p in pkg.iterdir() if p.name.endswith((".py", ".pyi")))


def check() -> int:
    """Return 0 when the committed stubs equal freshly generated ones, byte for byte."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        stale = []
        for f in fresh:
            committed = OUT_ROOT / PACKAGE_DIR / f.name
            if not committed.exists() or not filecmp.cmp(f, committed, shallow=False):
                stale.append(f.name)
        generated = {f.name for f in fresh}
        extra = {p.name for p in (OUT_ROOT / PACKAGE_DIR).glob("*_pb2*")} - generated
        stale.extend(sorted(extra))
    if stale:
        print("stale generated stubs: " + ", ".join(stale) + " (run: make proto)", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed stubs are stale")
    ns = parser.parse_args()
    if ns.check:
        return check()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        for stale in (OUT_ROOT / PACKAGE_DIR).glob("*_pb2*"):
            if stale.name not in {f.name for f in fresh}:
                stale.unlink()
        for f in fresh:
            shutil.copyfile(f, OUT_ROOT / PACKAGE_DIR / f.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
