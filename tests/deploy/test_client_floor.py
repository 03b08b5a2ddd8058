"""The client's declared protobuf/grpcio floors are ones its committed stubs can run on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.client_floor import (
    PYPROJECTS,
    declared_floors,
    gencode_floors,
    parse_version,
    pins_at_floor,
)

pytestmark = pytest.mark.deploy


def test_the_stubs_name_their_runtime_requirements() -> None:
    floors = gencode_floors()
    assert set(floors) == {"protobuf", "grpcio"}


@pytest.mark.parametrize(
    ("pyproject", "extra"), PYPROJECTS, ids=[p.parent.name or "root" for p, _ in PYPROJECTS]
)
@pytest.mark.parametrize("package", ["protobuf", "grpcio"])
def test_declared_floor_is_at_least_what_the_stubs_need(
    pyproject: Path, extra: str | None, package: str
) -> None:
    need = gencode_floors()[package]
    declared = declared_floors(pyproject, extra)[package]
    assert declared >= need, (
        f"{pyproject}: {package}>={'.'.join(map(str, declared))} but the committed stubs need "
        f">={'.'.join(map(str, need))} (regenerate with older tools or raise the floor)"
    )


def test_gencode_parser_reads_both_markers(tmp_path: Path) -> None:
    (tmp_path / "a_pb2.py").write_text(
        "_runtime_version.ValidateProtobufRuntimeVersion(\n"
        "    _runtime_version.Domain.PUBLIC,\n    5,\n    27,\n    2,\n    '',\n    'a.proto'\n)\n"
    )
    (tmp_path / "b_pb2.py").write_text(
        "_runtime_version.ValidateProtobufRuntimeVersion(\n"
        "    _runtime_version.Domain.PUBLIC,\n    6,\n    31,\n    0,\n    '',\n    'b.proto'\n)\n"
    )
    (tmp_path / "a_pb2_grpc.py").write_text("GRPC_GENERATED_VERSION = '1.66.2'\n")
    assert gencode_floors(tmp_path) == {"protobuf": (6, 31, 0), "grpcio": (1, 66, 2)}


def test_floor_pins_cover_every_required_dependency() -> None:
    assert {p.split("==")[0] for p in pins_at_floor()} == {"httpx"}
    pins = pins_at_floor("grpc")
    assert {p.split("==")[0] for p in pins} == {"protobuf", "grpcio", "httpx"}
    assert all(parse_version(p.split("==")[1]) for p in pins)


def test_the_grpc_floor_is_the_oldest_the_stubs_allow() -> None:
    """Not raised past what the stubs need: executor images pin old protobuf/grpcio."""
    floors = declared_floors(PYPROJECTS[0][0], "grpc")
    assert floors["protobuf"] == gencode_floors()["protobuf"]
    assert floors["grpcio"] == gencode_floors()["grpcio"]
