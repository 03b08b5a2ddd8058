"""TableIdentityLoader: a table's id and location from one metadata load (never an STS call).

The identity check (gateway/cache/identity.py) asks here whether the table behind a cached
credential is still the same. Both loads say `X-Iceberg-Access-Delegation: client-managed`, so
the catalog vends nothing:

- Iceberg: `loadTable` gives `metadata.table-uuid` and `metadata.location`, and answers
  `If-None-Match` with 304 while nothing changed (Lakekeeper's weak `lk2.` ETag), so a
  re-check of an unchanged table moves no metadata.
- Generic tables: the load gives `base-location` but no id (Lakekeeper's load response has
  none); the id is looked up in the namespace listing only when a caller named one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.errors import ProtocolViolationError
from gateway.identity import TableIdentity
from gateway.models import CacheKey, RequestContext
from gateway.upstream.lakekeeper import CatalogClient, _seg, ns_segment
from gateway.upstream.wire import ListGenericTablesResponse, LoadGenericTableResponse

# The namespace listing is paged; an id lookup reads at most this many pages of 1,000.
ID_LOOKUP_MAX_PAGES = 20
_PAGE_SIZE = "1000"
_CLIENT_MANAGED = {"X-Iceberg-Access-Delegation": "client-managed"}
_UNREADABLE = "the catalog sent an unreadable answer to load_table"


@dataclass(frozen=True)
class IdentityAnswer:
    """One identity load: the identity (None: 304, unchanged since `etag`) and the ETag."""

    identity: TableIdentity | None
    etag: str | None = None


def _iceberg_identity(body: bytes) -> TableIdentity:
    try:
        doc: Any = json.loads(body)
        meta = doc["metadata"]
        location = meta["location"]
        table_id = meta.get("table-uuid")
    except (ValueError, KeyError, TypeError):
        raise ProtocolViolationError(_UNREADABLE) from None
    if not isinstance(location, str) or not (table_id is None or isinstance(table_id, str)):
        raise ProtocolViolationError(_UNREADABLE)
    return TableIdentity(table_id=table_id.lower() if table_id else None, location=location)


class TableIdentityLoader:
    """Loads a cached key's table identity from the catalog.

    Args:
        catalog: the upstream client (its retries, deadline and token).
    """

    def __init__(self, catalog: CatalogClient) -> None:
        self._catalog = catalog

    async def load(self, key: CacheKey, ctx: RequestContext, *, etag: str | None = None,
                   want_id: bool = False) -> IdentityAnswer:
        """The identity of `key`'s table now.

        Args:
            etag: the ETag of the last answer for this table (Iceberg only: 304 if unchanged).
            want_id: also find a generic table's id (a listing; only when a caller named one).

        Raises:
            NotFoundError, ForbiddenError, UpstreamError: as the catalog answers.
        """
        ctx = RequestContext(request_id=ctx.request_id, project_id=key.project or None)
        # The folded names, as the credential request sends them (gateway/names.py).
        ns, table = key.namespace, key.table
        if key.kind == "iceberg":
            headers = dict(_CLIENT_MANAGED)
            if etag:
                headers["If-None-Match"] = etag
            resp = await self._catalog.get(
                "load_identity", f"/catalog/v1/{_seg(key.warehouse_id)}/namespaces/"
                f"{ns_segment(ns)}/tables/{_seg(table)}", ctx, headers=headers)
            if resp.status == 304:
                return IdentityAnswer(None, etag)
            return IdentityAnswer(_iceberg_identity(resp.body), resp.headers.get("etag"))
        base = f"/lakekeeper/v1/{_seg(key.warehouse_id)}/namespaces/{ns_segment(ns)}/generic-tables"
        resp = await self._catalog.get("load_identity", f"{base}/{_seg(table)}", ctx,
                                       headers=_CLIENT_MANAGED)
        try:
            loaded = LoadGenericTableResponse.model_validate_json(resp.body)
        except ValueError:
            raise ProtocolViolationError(_UNREADABLE) from None
        table_id = await self._generic_id(base, table, ctx) if want_id else None
        return IdentityAnswer(TableIdentity(table_id, loaded.table.base_location))

    async def _generic_id(self, base: str, table: str, ctx: RequestContext) -> str | None:
        wanted = table.casefold()
        token: str | None = None
        for _ in range(ID_LOOKUP_MAX_PAGES):
            query = {"pageSize": _PAGE_SIZE, **({"pageToken": token} if token else {})}
            resp = await self._catalog.get("list_identity", base, ctx, query=query)
            try:
                page = ListGenericTablesResponse.model_validate_json(resp.body)
            except ValueError:
                raise ProtocolViolationError(
                    "the catalog sent an unreadable answer to list_tables") from None
            for ident in page.identifiers:
                if ident.name.casefold() == wanted and ident.id:
                    return ident.id.lower()
            token = page.next_page_token
            if not token:
                return None
        return None
