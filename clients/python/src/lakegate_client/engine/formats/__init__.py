"""One module per table format, each implementing
:class:`~lakegate_client.engine.protocol.CommitProtocol`; :func:`protocol_for` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lakegate_client.engine.protocol import CommitProtocol

__all__ = ["PLAIN_FORMATS", "protocol_for"]

PLAIN_FORMATS = ("parquet", "csv", "json")


def protocol_for(fmt: str) -> CommitProtocol:
    """The commit protocol of a table format (``parquet``, ``csv``, ``json``: the plain one).

    Raises:
        ValueError: the format has no commit protocol here (Iceberg's is the catalog's).
    """
    if fmt == "delta":
        from lakegate_client.engine.formats.delta import DELTA

        return DELTA
    if fmt == "lance":
        from lakegate_client.engine.formats.lance import LANCE

        return LANCE
    if fmt in PLAIN_FORMATS:
        from lakegate_client.engine.formats.plain import PLAIN

        return PLAIN
    raise ValueError(f"no commit protocol for {fmt!r} tables")
