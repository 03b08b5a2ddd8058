"""The stores the write engine runs on, one module per cloud, all behind one interface.

``base.py``: :class:`~lakegate_client.engine.stores.base.ObjectStore` (conditional PUTs, reads
and listings with ETags, deletes, invisible staging) and the table's address
(:class:`~lakegate_client.engine.stores.base.S3Location`); ``s3.py``, ``adls.py`` and ``gcs.py``
implement it on S3 (multipart uploads), ADLS (uncommitted blocks) and GCS (hidden parts composed
at commit). This module picks the store of a credential (:func:`table_store`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lakegate_client._errors import UnsupportedStorageError
from lakegate_client.engine.stores import s3 as s3_store
from lakegate_client.engine.stores.base import ObjectStore, S3Location, each
from lakegate_client.engine.stores.s3 import S3Store

if TYPE_CHECKING:
    from lakegate_client import TableCredentials

__all__ = ["STAGED_STORAGE", "as_store", "delete_all", "stages", "table_store"]


STAGED_STORAGE = frozenset({"s3", "adls", "gcs"})  # stores with an ObjectStore (``table_store``)


def stages(creds: TableCredentials) -> bool:
    """Whether tasks stage files invisibly on this credential's store, and the plain-table
    commit protocol runs there (S3: multipart uploads; ADLS: uncommitted blocks; GCS: hidden
    part objects composed at commit)."""
    return creds.storage in STAGED_STORAGE


def table_store(creds: TableCredentials) -> ObjectStore:
    """The store of a credential's table, as the write protocols use it: S3 over this
    process's cached boto3 client, ADLS over the Blob REST API with the vended SAS, GCS over the
    JSON API with the vended OAuth token.

    Raises:
        UnsupportedStorageError: the storage has no :class:`ObjectStore` (see ``stages``).
    """
    where = S3Location.parse(creds.location)
    if creds.storage == "s3":
        return S3Store(s3_store.s3_client(creds), where.bucket)
    if creds.storage == "adls":
        from lakegate_client.engine.stores.adls import AzureBlobStore

        return AzureBlobStore.for_credentials(creds)
    if creds.storage == "gcs":
        from lakegate_client.engine.stores.gcs import GcsStore

        return GcsStore.for_credentials(creds)
    raise UnsupportedStorageError(f"the write protocol does not run on {creds.storage} storage")


def delete_all(store: ObjectStore, keys: Sequence[str]) -> None:
    """Delete every key (idempotent): in batches where the store has them (S3), else
    :data:`WORKERS` single deletes at a time."""
    if isinstance(store, S3Store):
        store.delete_many(keys)
    else:
        each(store.delete, list(dict.fromkeys(keys)))


def as_store(store_or_client: Any, bucket: str) -> ObjectStore:
    """``store_or_client`` as a store of ``bucket``: an :class:`ObjectStore` as is, anything
    else (a boto3 S3 client, a test's fake of one) as an :class:`S3Store`."""
    if isinstance(store_or_client, ObjectStore):
        return store_or_client
    return S3Store(store_or_client, bucket)


