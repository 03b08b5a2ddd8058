"""Parse the Spark options of the ``lakekeeper`` data source into one small, picklable value.

Why: options arrive as a case-insensitive dict of strings on the driver, and every executor task
needs the same parsed view of them. Nothing secret is ever accepted here: credentials are fetched
by each task from its own node's gateway, never shipped through options.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakegate_client.spark.faults import Faults
from lakegate_client.tables import check_format, split_table_name

_SECRET_WORDS = ("secret", "token", "access_key", "password", "credential")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


class OptionsError(ValueError):
    """The data source options do not name a table, or are contradictory."""


@dataclass(frozen=True)
class SourceOptions:
    """Which table to use and how to reach the gateway (``url=None``: each process's default)."""

    namespace: tuple[str, ...]
    table: str
    warehouse: str | None = None
    url: str | None = None
    format: str | None = None
    create: bool = False
    # The gateway's HTTP address for the driver's Iceberg catalog calls (spark/iceberg.py).
    catalog_url: str | None = None
    # Write to a store that ignores conditional PUTs anyway (engine/conditional_writes.py).
    accept_single_writer_risk: bool = False
    # Test-only write faults (spark/faults.py); refused unless $LAKEGATE_TEST_FAULTS=1.
    test_fault: str = ""
    # A local ADLS/GCS endpoint (Azurite, fake-gcs-server) every task's adapters use: no catalog
    # vends one (else $LAKEGATE_ADLS_ENDPOINT / $LAKEGATE_GCS_ENDPOINT of each process).
    storage_endpoint: str | None = None
    # A reused Python worker freezes its long-lived heap after a write task, and the driver's
    # after planning, commit and abort (spark/worker_heap.py); false keeps PySpark's full
    # collection after every call instead.
    freeze_worker_heap: bool = True
    # Schema evolution on write (tables/schema_fit.py): add columns / replace the schema.
    merge_schema: bool = False
    overwrite_schema: bool = False

    @property
    def iceberg(self) -> bool:
        return self.format == "iceberg"

    @property
    def qualified_name(self) -> str:
        return ".".join((*self.namespace, self.table))

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Accept ``table="ns.table"`` / ``"a.b.table"`` or ``namespace="a.b"`` + ``table``."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        for key in opts:
            words = key.replace("-", "_").replace(".", "_")
            if any(word in words for word in _SECRET_WORDS):
                raise OptionsError(
                    f"option {key!r} is not accepted: tasks fetch credentials from the gateway"
                )
        table = opts.get("table") or opts.get("path") or ""
        if not table:
            raise OptionsError("the 'table' option is required, e.g. .option('table', 'ns.t')")
        namespace = opts.get("namespace")
        if namespace:
            ns = tuple(namespace.split("."))
            if not all(ns) or "." in table:
                raise OptionsError("with 'namespace', 'table' must be a plain table name")
            name = table
        else:
            try:
                ns, name = split_table_name(table)
            except ValueError as exc:
                raise OptionsError(str(exc)) from None
        fmt = opts.get("format") or None
        fault = opts.get("test_fault", "")
        try:
            Faults.parse(fault)
        except ValueError as exc:
            raise OptionsError(str(exc)) from None
        return cls(
            namespace=ns,
            table=name,
            warehouse=opts.get("warehouse") or None,
            url=opts.get("url") or None,
            format=_check_format(fmt),
            create=_parse_bool(opts.get("create", "false")),
            catalog_url=opts.get("catalog_url") or None,
            accept_single_writer_risk=_parse_bool(opts.get("accept_single_writer_risk", "false")),
            test_fault=fault,
            storage_endpoint=opts.get("storage_endpoint") or None,
            freeze_worker_heap=_parse_bool(opts.get("freeze_worker_heap", "true")),
            merge_schema=_parse_bool(opts.get("mergeschema", "false")),
            overwrite_schema=_parse_bool(opts.get("overwriteschema", "false")),
        )


def _check_format(fmt: str | None) -> str | None:
    """A generic table's format, or ``iceberg`` for an Iceberg table of the same catalog."""
    if not fmt:
        return None
    if fmt.strip().lower() == "iceberg":
        return "iceberg"
    return check_format(fmt)


def _parse_bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise OptionsError(f"expected true/false, got {value!r}")
