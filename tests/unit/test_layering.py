"""Import-linter style checks: data flows surfaces → service → cache → upstream, never back.

- surfaces import only service/models/identity/errors/metrics/settings/clock/secrets/logging/
  names and the leaves tuning/concurrency/audit/signing (and each other), never cache/ or
  upstream/;
- cache/ and upstream/ never import the layers above them; signing/ imports no other layer;
- only upstream/transport.py uses aiohttp.ClientSession;
- only settings.py reads os.environ / os.getenv;
- errors.py (a leaf every layer imports) knows no transport library, and cache/ and upstream/
  reach no grpc through any module;
- no import cycles inside `gateway` or `lakegate_client` (function-level and TYPE_CHECKING
  imports count: a cycle dodged by a local import is still a cycle in the design);
- the daemon never imports the dev stack.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"
CLIENT = ROOT / "clients" / "python" / "src" / "lakegate_client"
SURFACE_ALLOWED = {
    "gateway", "gateway.service", "gateway.models", "gateway.errors", "gateway.metrics",
    "gateway.settings", "gateway.clock", "gateway.secrets", "gateway.logging", "gateway.names",
    "gateway.tuning", "gateway.concurrency", "gateway.audit", "gateway.identity",
    "gateway.signing",
}
FORBIDDEN_BELOW = {
    "cache": ("gateway.service", "gateway.surfaces", "gateway.app"),
    "upstream": ("gateway.service", "gateway.surfaces", "gateway.app", "gateway.cache"),
    # pure checks and SigV4 (a leaf like identity): no I/O layer at all
    "signing": ("gateway.service", "gateway.surfaces", "gateway.app", "gateway.cache",
                "gateway.upstream"),
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


# ---- import graph: cycles, leaves, the dev stack ---------------------------------------------


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package_dir: Path) -> dict[str, Path]:
    return {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))
            if "__pycache__" not in p.parts}


def imported_names(path: Path, name: str) -> set[str]:
    """Every module name `path` imports, at any level (relative imports resolved)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """module → the package's modules it imports (`from pkg import mod` points at `pkg.mod`)."""
    mods = package_modules(package_dir)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        edges = set()
        for imported in imported_names(path, name):
            if imported in mods and imported != name:
                edges.add(imported)
        # `from pkg import mod` also names `pkg`; keep only the most specific module.
        graph[name] = {e for e in edges if not any(o.startswith(e + ".") for o in edges)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        if v not in seen:
            seen.add(v)
            todo.extend(graph.get(v, ()))
    return seen


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_resolve_inside_the_package(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import x\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b"]]


def test_no_import_cycles_in_the_gateway() -> None:
    assert cycles(import_graph(GATEWAY)) == []


def test_no_import_cycles_in_the_client() -> None:
    assert cycles(import_graph(CLIENT)) == []


def test_errors_is_a_leaf_without_grpc_and_cache_and_upstream_never_reach_grpc() -> None:
    graph = import_graph(GATEWAY)
    assert graph["gateway.errors"] == set()
    mods = package_modules(GATEWAY)
    for start in [m for m in graph if m.startswith(("gateway.cache", "gateway.upstream"))]:
        for name in reachable(graph, start):
            externals = {i.split(".")[0] for i in imported_names(mods[name], name)}
            assert "grpc" not in externals, f"{start} reaches grpc through {name}"


def test_the_daemon_never_imports_the_dev_stack() -> None:
    users = []
    for name, path in package_modules(GATEWAY).items():
        if any(i.split(".")[0] == "devstack" for i in imported_names(path, name)):
            users.append(name)
    assert users == []


CLIENT_PARTS = ("engine", "tables", "spark", "duckdb", "io")  # the rest: the credential client


def _client_part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in CLIENT_PARTS else "core"


def test_the_client_parts_import_downwards_only() -> None:
    """The client's floors: the credential client (``core``) imports none of the parts above it;
    the write engine imports neither the table I/O that drives it (``tables.readwrite``) nor the
    data source; the table I/O never imports the data source. (``tables/readwrite.py`` used to
    import ``spark/committer.py``.)"""
    graph = import_graph(CLIENT)
    forbidden = {
        "core": ("engine", "tables", "spark", "duckdb", "io"),
        "engine": ("spark", "duckdb", "io"),
        "tables": ("spark", "duckdb", "io"),
        "duckdb": ("engine", "spark", "io"),
    }
    wrong = sorted(
        f"{m} -> {e}"
        for m, edges in graph.items()
        for e in edges
        if _client_part(e) in forbidden.get(_client_part(m), ())
    )
    assert wrong == []
    engine_up = sorted(f"{m} -> {e}" for m, edges in graph.items() for e in edges
                       if _client_part(m) == "engine" and e == "lakegate_client.tables.readwrite")
    assert engine_up == []


def test_no_import_cycles_in_the_dev_stack() -> None:
    assert cycles(import_graph(ROOT / "devstack")) == []
