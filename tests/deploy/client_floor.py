"""The runtime versions the committed gRPC stubs need, and the floors the packages declare.

protoc writes `ValidateProtobufRuntimeVersion(<domain>, major, minor, patch, ...)` into every
`*_pb2.py`, and grpcio-tools writes `GRPC_GENERATED_VERSION = 'x.y.z'` into every `*_pb2_grpc.py`:
an older runtime refuses to import them. A package that declares a lower floor than that is
unusable at its own minimum, so the declared floors must be at least these. The client declares
them in its `grpc` extra (the core client needs neither package); the daemon in its dependencies.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.deploy.manifests import REPO_ROOT

CLIENT = REPO_ROOT / "clients" / "python"
STUBS = CLIENT / "src" / "lakegate" / "v1"
# (pyproject, extra holding grpcio/protobuf or None for the required dependencies)
PYPROJECTS = ((CLIENT / "pyproject.toml", "grpc"), (REPO_ROOT / "pyproject.toml", None))

_PB2 = re.compile(
    r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),"
)
_GRPC = re.compile(r"GRPC_GENERATED_VERSION\s*=\s*'([0-9.]+)'")
_FLOOR = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)")

Version = tuple[int, ...]


def parse_version(text: str) -> Version:
    """'7.35.1' -> (7, 35, 1)."""
    return tuple(int(part) for part in text.split("."))


def gencode_floors(stubs: Path = STUBS) -> dict[str, Version]:
    """The highest protobuf and grpcio runtime any committed stub requires."""
    floors: dict[str, Version] = {}
    for path in sorted(stubs.glob("*_pb2*.py")):
        text = path.read_text(encoding="utf-8")
        for m in _PB2.finditer(text):
            floors["protobuf"] = max(floors.get("protobuf", ()), tuple(map(int, m.groups())))
        for m in _GRPC.finditer(text):
            floors["grpcio"] = max(floors.get("grpcio", ()), parse_version(m.group(1)))
    return floors


def declared_floors(pyproject: Path, extra: str | None = None) -> dict[str, Version]:
    """`name>=X` lower bounds of a pyproject's required dependencies (plus one extra's)."""
    with pyproject.open("rb") as fh:
        project = tomllib.load(fh)["project"]
    deps = [*project["dependencies"], *(project["optional-dependencies"][extra] if extra else [])]
    out: dict[str, Version] = {}
    for dep in deps:
        m = _FLOOR.match(dep)
        if m:
            out[m.group(1).lower()] = parse_version(m.group(2))
    return out


def pins_at_floor(
    extra: str | None = None, pyproject: Path = CLIENT / "pyproject.toml"
) -> list[str]:
    """`name==floor` for every required dependency of the client, plus one extra's."""
    floors = declared_floors(pyproject, extra)
    return [f"{name}=={'.'.join(map(str, v))}" for name, v in floors.items()]
