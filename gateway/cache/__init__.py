"""The credential cache: single-flight, serve floor, refresh-ahead, stale-if-error, LRU."""

from gateway.cache.credential_cache import CredentialCache
from gateway.cache.refresher import RefreshAhead, TokenBucket
from gateway.cache.singleflight import SingleFlight

__all__ = ["CredentialCache", "RefreshAhead", "SingleFlight", "TokenBucket"]
