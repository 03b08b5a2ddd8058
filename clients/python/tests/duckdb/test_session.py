"""duckdb/session.py + extensions.py: a real DuckDB (extensions loaded offline from the wheels) fed
by a Client over a fake transport and a fake clock: the secret is replaced when the memo refreshes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakegate_client import (
    Client,
    ConfigurationError,
    LoadedTable,
    StorageCredential,
    TableCredentials,
)
from lakegate_client._ops import GetCredentials, LoadTable
from lakegate_client.duckdb import connect, connect_table, connect_warehouse
from lakegate_client.duckdb.extensions import extension_file

LOCATION = "s3://warehouse/lakehouse/t1"


def location(table: str) -> str:
    return LOCATION if table == "t" else f"s3://warehouse/lakehouse/{table}"


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_800_000_000.0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


class VendingTransport:
    """Answers loads and vends a new key (AKIA<n>) valid for one hour on every credential call."""

    def __init__(self, clock: FakeClock, fmt: str = "parquet") -> None:
        self.clock = clock
        self.fmt = fmt
        self.vended = 0

    @property
    def connection_id(self) -> str:
        return "fake"

    def send(self, op: Any) -> Any:
        if isinstance(op, LoadTable):
            return LoadedTable(("ns",), op.ref.name, self.fmt, location(op.ref.name))
        assert isinstance(op, GetCredentials)
        where = location(op.ref.name)
        self.vended += 1
        config = {
            "s3.access-key-id": f"AKIA{self.vended}",
            "s3.secret-access-key": "secret",
            "s3.session-token": "token",
            "s3.region": "us-east-1",
            "s3.endpoint": "http://127.0.0.1:9/",
            "s3.path-style-access": "true",
        }
        return TableCredentials.from_parts(
            location=where,
            credentials=[StorageCredential(where, config)],
            expires_at_ms=int((self.clock.t + 3600) * 1000),
            identity_ttl_s=3600.0,  # the table never changes here: the memo keeps it to the floor
        )

    def close(self) -> None:
        pass


@pytest.fixture
def ext_dir(tmp_path: Path) -> Path:
    return tmp_path / "ext"


def installed_key_ids(con: Any) -> list[str]:
    rows = con.execute("SELECT secret_string FROM duckdb_secrets()").fetchall()
    parts = [part for (s,) in rows for part in s.split(";")]
    return [p.split("=", 1)[1] for p in parts if p.startswith("key_id=")]


def test_secret_is_replaced_when_the_memo_refreshes(ext_dir: Path) -> None:
    clock = FakeClock()
    transport = VendingTransport(clock)
    client = Client(
        "http://127.0.0.1:9", warehouse="wh", clock=clock, transport_factory=lambda _: transport
    )
    con = connect(formats=("parquet",), extension_directory=ext_dir)
    with connect_table(client, "ns", "t", con=con) as table:
        assert table.scan == f"read_parquet('{LOCATION}/**/*.parquet')"
        assert installed_key_ids(con) == ["AKIA1"]
        assert table.refresh() is False  # memo hit: same credential, nothing replaced
        clock.t += 3000  # 600 s left: still above the memo floor (300 s)
        assert table.refresh() is False
        assert transport.vended == 1
        clock.t += 400  # 200 s left: the memo asks the gateway again
        assert table.refresh() is True
        assert transport.vended == 2
        assert installed_key_ids(con) == ["AKIA2"]  # replaced, not added beside the old one
        assert table.secret_replacements == 1


def test_tables_on_one_connection_keep_one_scoped_secret_each(ext_dir: Path) -> None:
    """Connections made and dropped in a loop (as the demo does) must not overwrite each other's
    secret: each table's scope keeps its own key."""
    clock = FakeClock()
    client = Client(
        "http://127.0.0.1:9", warehouse="wh", clock=clock,
        transport_factory=lambda _: VendingTransport(clock),
    )
    con = connect(formats=("parquet",), extension_directory=ext_dir)
    try:
        scans = [connect_table(client, "ns", name, con=con).scan for name in ("a", "b", "c")]
        assert len(set(scans)) == 3
        scopes = sorted(
            s[0] for (s,) in con.execute("SELECT scope FROM duckdb_secrets()").fetchall()
        )
        assert scopes == [location(n) for n in ("a", "b", "c")]
    finally:
        con.close()


def test_extensions_install_from_the_wheels_into_the_given_directory(ext_dir: Path) -> None:
    import duckdb

    con = connect(formats=("delta",), extension_directory=ext_dir)
    try:
        loaded = {
            name
            for (name,) in con.execute(
                "SELECT extension_name FROM duckdb_extensions() WHERE loaded"
            ).fetchall()
        }
        assert {"httpfs", "delta"} <= loaded
        assert sorted(p.name for p in ext_dir.rglob("*.duckdb_extension")) == [
            "delta.duckdb_extension",
            "httpfs.duckdb_extension",
        ]
        assert extension_file("delta", duckdb.__version__).is_file()
    finally:
        con.close()


def test_an_extension_built_for_another_duckdb_names_the_extra() -> None:
    with pytest.raises(ConfigurationError, match=r"lakegate-client\[duckdb\]"):
        extension_file("iceberg", "0.0.1")
    with pytest.raises(ConfigurationError, match=r"lakegate-client\[duckdb\]"):
        extension_file("nosuchext", "1.5.5")


def test_warehouse_needs_a_tcp_http_gateway() -> None:
    client = Client("unix:/run/lakegate/http.sock", warehouse="wh")
    with pytest.raises(ConfigurationError, match="TCP"):
        connect_warehouse(client)
