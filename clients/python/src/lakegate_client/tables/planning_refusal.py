"""A write refused at planning leaves the catalog as it found it.

Why: some refusals can only be decided once the table's storage is known: deltalake cannot take
the store's credential (GCS's OAuth token), the store ignores conditional PUTs, the caller may
not write there. The catalog assigns a new table's location, and no catalog call tells a
warehouse's storage before a table exists, so those checks run on the table a write with
``create`` has just registered. Without this, the refused write keeps the name: a retry in
another format fails with "has format 'delta'". Every refusal that needs no store (a read-only
format, schema options the format does not have) is decided before the create instead.

:func:`undone_on_refusal` wraps planning's refusals: when the write created the table (and
nothing has been written under it yet), a refusal drops it again before the error goes up.
A process killed between the create and the drop leaves the empty table registered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["undone_on_refusal"]
log = logging.getLogger(__name__)
T = TypeVar("T")


@contextmanager
def undone_on_refusal(created: Sequence[T], drop: Callable[[T], object]) -> Iterator[None]:
    """Run planning's refusals; a refusal drops every table this write created (``created``,
    filled by the create's ``on_create`` hook) with ``drop``, then raises. A failing drop is
    logged and the refusal still raised."""
    try:
        yield
    except BaseException:
        for table in created:
            try:
                drop(table)
            except Exception:  # the refusal is the error the caller must see
                log.warning("could not drop the table a refused write created",
                            exc_info=True)
        raise
