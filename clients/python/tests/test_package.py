"""The distribution: public API (__init__.py's __all__) and no daemon dependencies."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import lakegate_client

PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
FORBIDDEN = ("aiohttp", "prometheus", "pydantic-settings", "uvloop", "cachetools", "pyjwt")


def test_all_lists_exactly_the_public_names() -> None:
    public = {n for n in vars(lakegate_client) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(lakegate_client, n)).__name__ == "module"}
    assert set(lakegate_client.__all__) - {"__version__"} == public - modules
    assert len(lakegate_client.__all__) == len(set(lakegate_client.__all__))
    for name in (
        "Client",
        "AsyncClient",
        "TableCredentials",
        "LakegateError",
        "NotFoundError",
        "PermissionDeniedError",
    ):  # docs/contracts.md section 7
        assert name in lakegate_client.__all__


def test_install_requirements_exclude_the_daemons_server_stack() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    required = [d.lower() for d in project["dependencies"]]
    assert required, "the client must declare its dependencies"
    assert not [d for d in required if d.startswith(FORBIDDEN)]
    assert any(d.startswith("grpcio") for d in required)
    assert any(d.startswith("httpx") for d in required)


def test_importing_the_client_loads_no_server_module() -> None:
    code = (
        "import sys, json, lakegate_client, lakegate_client.credentials;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout)
    bad = [
        m
        for m in loaded
        if m == "gateway"
        or m.startswith(("gateway.", "aiohttp.web", "prometheus_client", "devstack"))
    ]
    assert bad == []
    assert "lakegate_client" in loaded  # the probe itself ran


def test_async_client_uses_aiohttp_client_side_only() -> None:
    code = (
        "import asyncio, sys, json, lakegate_client as l\n"
        "async def main():\n"
        "    c = l.AsyncClient('unix:/nonexistent.sock', warehouse='w', timeout_s=1)\n"
        "    try:\n"
        "        await c.credentials('n', 't')\n"
        "    except l.GatewayConnectionError:\n"
        "        pass\n"
        "    await c.aclose()\n"
        "asyncio.run(main())\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(out.stdout)
    assert "aiohttp" in loaded
    assert not [m for m in loaded if m.startswith(("aiohttp.web", "prometheus_client"))]
