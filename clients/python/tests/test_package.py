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
    assert any(d.startswith("httpx") for d in required)


def test_core_client_depends_on_httpx_alone_and_grpc_is_an_extra() -> None:
    """Executor images pin their own protobuf/grpcio: the core client must not require any."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert [d.split(">")[0] for d in project["dependencies"]] == ["httpx"]
    grpc_extra = {d.split(">")[0] for d in project["optional-dependencies"]["grpc"]}
    assert grpc_extra == {"grpcio", "protobuf"}


# Run in a child where importing grpc or google.protobuf fails, as in an image without them.
_NO_GRPC = (
    "import sys, json\n"
    "sys.modules['grpc'] = None; sys.modules['google.protobuf'] = None\n"
    "import lakegate_client as l, lakegate_client.credentials, lakegate_client.refresh\n"
    "from lakegate_client._ops import GetCredentials, ListPage\n"
    "from lakegate_client._models import TableRef\n"
    "GetCredentials(TableRef('w', ('n',), 't'), 'read').http()\n"
    "ListPage('w', ('n',), None).http()\n"
    "c = l.Client('http://127.0.0.1:9', warehouse='w', timeout_s=1)\n"
    "try:\n"
    "    c.credentials('n', 't')\n"
    "except l.GatewayConnectionError:\n"
    "    pass\n"
    "out = {'loaded': sorted(k for k, m in sys.modules.items() if m is not None)}\n"
    "try:\n"
    "    l.Client('grpc://127.0.0.1:9', warehouse='w', timeout_s=1).credentials('n', 't')\n"
    "except l.ConfigurationError as exc:\n"
    "    out['grpc_error'] = str(exc)\n"
    "print(json.dumps(out))\n"
)


def test_core_client_works_without_grpc_and_a_grpc_url_names_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NO_GRPC], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "lakegate_client._http" in out["loaded"]  # the HTTP call really went through a transport
    assert not [m for m in out["loaded"] if m.startswith(("grpc", "google.protobuf", "lakegate."))]
    assert "pip install 'lakegate-client[grpc]'" in out["grpc_error"]


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


# Run in a child where the write engine, the table I/O and the data source cannot be imported.
_NO_ENGINE = (
    "import sys, json\n"
    "for name in ('lakegate_client.engine', 'lakegate_client.tables', 'lakegate_client.spark',\n"
    "             'boto3', 'pyarrow', 'pyspark'):\n"
    "    sys.modules[name] = None\n"
    "import lakegate_client as l, lakegate_client.credentials, lakegate_client.refresh\n"
    "c = l.Client('http://127.0.0.1:9', warehouse='w', timeout_s=1)\n"
    "try:\n"
    "    c.credentials('n', 't')\n"
    "except l.GatewayConnectionError:\n"
    "    pass\n"
    "print(json.dumps(sorted(k for k, m in sys.modules.items() if m is not None)))\n"
)


def test_the_credential_client_imports_and_calls_without_the_write_engine() -> None:
    """The thin client stays thin: transports, memo and engine shapes load and call without the
    write engine (the ``engine`` extra), the table I/O or the data source."""
    done = subprocess.run(
        [sys.executable, "-c", _NO_ENGINE], capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "lakegate_client._http" in loaded
    assert not [m for m in loaded if m.startswith(("lakegate_client.engine",
                                                   "lakegate_client.tables",
                                                   "lakegate_client.spark"))]


def test_the_write_engine_is_an_extra_the_spark_extra_covers() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    engine = {d.split(">")[0] for d in extras["engine"]}
    assert engine == {"pyarrow", "boto3"}
    assert engine <= {d.split(">")[0] for d in extras["spark"]}
