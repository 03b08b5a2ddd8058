"""The gateway client of this process, shared by every task it runs.

Why a process-wide cache: PySpark reuses a Python worker for many tasks, and the client's
per-process credential memo only saves gateway round trips if tasks share one client. The client
itself opens its channels lazily per process id, so a cached client inherited across a fork is
still safe in the child.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from lakegate_client import Client, TableCredentials
    from lakegate_client.spark.options import SourceOptions


@lru_cache(maxsize=8)
def client_for(url: str | None) -> Client:
    """The client for ``url`` (``None``: ``$LAKEGATE_URL`` of this node), created once."""
    from lakegate_client import Client

    return Client(url=url)


def table_credentials(
    opts: SourceOptions, access: Literal["read", "write"] = "read",
    expected_location: str | None = None,
) -> TableCredentials:
    """Credentials for the options' table, from this node's gateway (memoized by the client).

    ``expected_location`` is the location the driver planned against: a task then gets that
    table's credential or ``TableIdentityMismatchError``, never a replaced table's old prefix
    (from a node's gateway that has not seen the replacement yet, or from this worker's memo,
    which outlives the job that filled it).
    """
    creds = client_for(opts.url).credentials(
        list(opts.namespace), opts.table, warehouse=opts.warehouse, access=access,
        expected_location=expected_location,
    )
    return creds.with_storage_endpoint(opts.storage_endpoint) if opts.storage_endpoint else creds
