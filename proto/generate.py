"""Generate the lakegate.v1 Python stubs into clients/python/src with grpcio-tools.

`python proto/generate.py` rewrites the committed stubs; `--check` regenerates into a
temporary directory and fails when the committed output differs (run by the test suite).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
OUT_ROOT = PROTO_ROOT.parent / "clients" / "python" / "src"
PACKAGE_DIR = Path("lakegate") / "v1"


def _protos() -> list[Path]:
    return sorted((PROTO_ROOT / PACKAGE_DIR).glob("*.proto"))


def generate(out_root: Path) -> list[Path]:
    """Run protoc for every .proto; return the files written under out_root."""
    from grpc_tools import protoc  # local import: only needed at build time

    include = str(resources.files("grpc_tools") / "_proto")
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(p.relative_to(PROTO_ROOT)) for p in _protos()],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    pkg = out_root / PACKAGE_DIR
    pkg.mkdir(parents=True, exist_ok=True)
    for init in (out_root / "lakegate" / "__init__.py", pkg / "__init__.py"):
        init.touch()
    return sorted(p for p in pkg.iterdir() if p.name.endswith((".py", ".pyi")))


def check() -> int:
    """Return 0 when the committed stubs equal freshly generated ones."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        stale = []
        for f in fresh:
            committed = OUT_ROOT / PACKAGE_DIR / f.name
            if not committed.exists() or not filecmp.cmp(f, committed, shallow=False):
                stale.append(f.name)
        extra = {p.name for p in (OUT_ROOT / PACKAGE_DIR).glob("*_pb2*")} - {f.name for f in fresh}
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
        for f in generate(Path(tmp)):
            shutil.copyfile(f, OUT_ROOT / PACKAGE_DIR / f.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
