"""Client and AsyncClient: the public facades over one gateway (blocking for executors, asyncio).

``AsyncClient`` (``_async_client.py``) is the one source; ``Client`` (``_sync_client.py``) is
generated from it by ``clients/python/unasync.py``, so both have the same methods, arguments,
memo rule and errors. What they share at run time is in ``_facade.py``.
"""

from __future__ import annotations

from lakegate_client._async_client import AsyncClient
from lakegate_client._facade import ClientState
from lakegate_client._sync_client import Client

__all__ = ["AsyncClient", "Client", "ClientState"]
