"""Import-linter style checks: data flows surfaces → service → cache → upstream, never back.

- surfaces import only service/models/errors/metrics/settings/clock/secrets/logging (and each
  other), never cache/ or upstream/;
- cache/ and upstream/ never import the layers above them;
- only upstream/transport.py uses aiohttp.ClientSession;
- only settings.py reads os.environ / os.getenv.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
SURFACE_ALLOWED = {
    "gateway", "gateway.service", "gateway.models", "gateway.errors", "gateway.metrics",
    "gateway.settings", "gateway.clock", "gateway.secrets", "gateway.logging",
}
FORBIDDEN_BELOW = {
    "cache": ("gateway.service", "gateway.surfaces", "gateway.app"),
    "upstream": ("gateway.service", "gateway.surfaces", "gateway.app", "gateway.cache"),
}


def modules() -> list[Path]:
    return sorted(p for p in GATEWAY.rglob("*.py") if "__pycache__" not in p.parts)


def gateway_imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("gateway")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gateway"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out


def rel(path: Path) -> str:
    return path.relative_to(GATEWAY).as_posix()


def test_the_checks_see_the_package() -> None:
    names = {rel(p) for p in modules()}
    assert {"app.py", "surfaces/http_app.py", "settings.py"} <= names


@pytest.mark.parametrize("path", [p for p in modules() if p.parent.name == "surfaces"], ids=rel)
def test_surfaces_import_only_allowed_layers(path: Path) -> None:
    bad = set()
    for name in gateway_imports(ast.parse(path.read_text())):
        parts = name.split(".")
        if name == "gateway" or parts[1].startswith("__") or parts[1] == "surfaces":
            continue  # `from gateway import __version__`, or a sibling surface module
        if ".".join(parts[:2]) not in SURFACE_ALLOWED:
            bad.add(name)
    assert not bad, f"{rel(path)} imports {sorted(bad)}"


@pytest.mark.parametrize("layer", sorted(FORBIDDEN_BELOW))
def test_lower_layers_never_import_upwards(layer: str) -> None:
    for path in modules():
        if path.parent.name != layer:
            continue
        names = gateway_imports(ast.parse(path.read_text()))
        up = {n for n in names if n.startswith(FORBIDDEN_BELOW[layer])}
        assert not up, f"{rel(path)} imports upwards: {sorted(up)}"


def test_only_transport_uses_aiohttp_client_session() -> None:
    users = set()
    for path in modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "aiohttp" and any(
                a.name == "ClientSession" for a in node.names
            ):
                users.add(rel(path))
            if isinstance(node, ast.Attribute) and node.attr == "ClientSession":
                users.add(rel(path))
    assert users <= {"upstream/transport.py"}, sorted(users)


def test_only_settings_reads_the_environment() -> None:
    readers = set()
    for path in modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv", "environb"}:
                readers.add(rel(path))
            if isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                a.name in {"environ", "getenv"} for a in node.names
            ):
                readers.add(rel(path))
    assert readers <= {"settings.py"}, sorted(readers)
