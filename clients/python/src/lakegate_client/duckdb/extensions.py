"""DuckDB with its extensions loaded offline from the ``duckdb-extension-*`` wheels.

Why offline: executors often have no route to DuckDB's extension repository, and an extension
fetched at run time is not the one the tests ran. The ``[duckdb]`` extra installs ``duckdb`` and
one wheel per extension (``duckdb_extension_<name>/extensions/v<duckdb version>/<name>
.duckdb_extension``), each pinned to that exact DuckDB version. A connection gets its own
``extension_directory``, automatic install/load off, then ``INSTALL '<wheel file>'`` and ``LOAD``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from lakegate_client._errors import ConfigurationError
from lakegate_client.duckdb.sql import literal

if TYPE_CHECKING:
    import duckdb

__all__ = ["DUCKDB_EXTRA", "EXTENSIONS", "connect", "extension_file", "load"]

DUCKDB_EXTRA = "lakegate-client[duckdb]"
# What each table format needs loaded (httpfs reads s3://; avro reads Iceberg manifests).
EXTENSIONS: dict[str, tuple[str, ...]] = {
    "parquet": ("httpfs",),
    "csv": ("httpfs",),
    "json": ("httpfs",),
    "delta": ("httpfs", "delta"),
    "lance": ("httpfs", "lance"),
    "iceberg": ("httpfs", "avro", "iceberg"),
}
# What each object store needs beyond the format's extensions (azure reads az:// with a SAS).
STORAGE_EXTENSIONS: dict[str, tuple[str, ...]] = {"adls": ("azure",)}
EXTENSION_DIR_ENV = "LAKEGATE_DUCKDB_EXTENSION_DIR"


def extension_file(name: str, version: str) -> Path:
    """The ``.duckdb_extension`` file the ``duckdb-extension-<name>`` wheel ships for ``version``.

    Raises:
        ConfigurationError: the wheel is missing or built for another DuckDB version.
    """
    package = f"duckdb_extension_{name}"
    try:
        root = resources.files(package)
    except ModuleNotFoundError:
        raise ConfigurationError(
            f"DuckDB extension {name!r} is not installed: pip install '{DUCKDB_EXTRA}'"
        ) from None
    path = Path(str(root)) / "extensions" / f"v{version}" / f"{name}.duckdb_extension"
    if not path.is_file():
        raise ConfigurationError(
            f"the installed {package.replace('_', '-')} has no build for DuckDB {version}:"
            f" install matching versions (pip install '{DUCKDB_EXTRA}')"
        )
    return path


def default_extension_directory() -> Path:
    """``$LAKEGATE_DUCKDB_EXTENSION_DIR``, else a per-user directory under the temp dir."""
    configured = os.environ.get(EXTENSION_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"lakegate-duckdb-{os.getuid()}"


def load(con: duckdb.DuckDBPyConnection, names: Iterable[str], version: str) -> None:
    """INSTALL each extension from its wheel's file (a no-op when already there), then LOAD it."""
    for name in names:
        con.execute(f"INSTALL {literal(str(extension_file(name, version)))}")
        con.execute(f"LOAD {name}")


def connect(
    database: str = ":memory:",
    *,
    formats: Iterable[str] = ("parquet",),
    extension_directory: str | os.PathLike[str] | None = None,
    storages: Iterable[str] = ("s3",),
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with the extensions the given table formats (and object stores:
    ``s3``, ``adls``) need, loaded offline.

    Raises:
        ConfigurationError: DuckDB or an extension wheel is missing (names the extra).
    """
    try:
        import duckdb
    except ImportError as exc:
        raise ConfigurationError(f"DuckDB is not installed: pip install '{DUCKDB_EXTRA}'") from exc

    directory = Path(extension_directory or default_extension_directory())
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    con = duckdb.connect(
        database,
        config={
            "extension_directory": str(directory),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        },
    )
    wanted: list[str] = []
    needs = [EXTENSIONS.get(fmt, ()) for fmt in formats]
    needs += [STORAGE_EXTENSIONS.get(storage, ()) for storage in storages]
    for names in needs:
        for name in names:
            if name not in wanted:
                wanted.append(name)
    try:
        load(con, wanted, duckdb.__version__)
    except BaseException:
        con.close()
        raise
    return con
