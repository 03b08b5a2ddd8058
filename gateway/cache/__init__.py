"""The caches: credentials (single-flight, serve floor, refresh-ahead, stale-if-error, LRU),
table metadata, warehouse resolutions and the derived credential keys."""

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.credential_keys import CredentialKeys
from gateway.cache.metadata_cache import MetadataCache
from gateway.cache.refresher import RefreshAhead
from gateway.cache.warehouses import WarehouseResolver

__all__ = ["CredentialCache", "CredentialKeys", "MetadataCache", "RefreshAhead",
           "WarehouseResolver"]
