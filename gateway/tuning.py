"""Tuning knobs of the daemon that are not settings: named, documented, in one place.

Why constants and not settings: each is either a bound that keeps memory or work finite for any
input (nobody should need to raise it), or a timing that follows from the design (retry
pacing, coalescing windows). A value an operator should be able to change belongs in
`gateway/settings.py` instead. This module imports nothing of the gateway (a leaf).
"""

from __future__ import annotations

# ---- bounded memos (entries) -----------------------------------------------------------------
KEY_MEMO_MAX = 1024
"""Credential requests whose derived cache key is memoized (warehouse resolved, key built)."""

WAREHOUSE_KNOWN_MAX = 1024
"""Warehouse resolutions held (fresh ones, last known ones, and unknown names each)."""

MATCH_CACHE_SIZE = 1024
"""HTTP (method, target) → parsed route matches memoized by the surfaces."""

MATCH_CACHE_MAX_TARGET = 1024
"""Longer request targets are parsed every time, never memoized (a flood cannot pin memory)."""

DECISION_MEMO_SIZE = 4096
"""Policy decisions memoized per (caller, warehouse as given, namespace, table, access)."""

EVENT_RATE_TABLES_MAX = 10_000
"""Tables whose change events are rate-limited at once (a per-table bucket each, LRU)."""

# ---- warehouse resolution ----------------------------------------------------------------------
WAREHOUSE_STALE_RETRY_S = 5.0
"""While a lapsed warehouse mapping is served stale, how often a refresh is tried."""

WAREHOUSE_STALE_WAIT_S = 1.0
"""How long a caller holding a lapsed mapping waits for its refresh before using it."""

# ---- table identity ----------------------------------------------------------------------------
EVENTS_CALLER_IDENTITY_TTL_S = 2.0
"""While change events are up, the longest a caller (the client's per-process memo) may keep an
answer's table identity without asking again: an event reaches this gateway within about this
long, a caller never, so the caller's bound follows the gateway's by at most this much."""

# ---- readiness ---------------------------------------------------------------------------------
HEALTH_TTL_S = 2.0
"""A readiness answer is reused this long (probes of several kubelets cost one check)."""

# ---- credential expiry -------------------------------------------------------------------------
MAX_CLOCK_SKEW_S = 60.0
"""Plausible disagreement between two clocks (local wall, catalog `Date`, IdP `Date`). Beyond
it the clocks disagree: the earliest deadline wins unless the two other clocks agree that its
clock is ahead (cache/policy.expiry_deadline), and the disagreement is warned about."""

DATE_RESOLUTION_S = 1.0
"""The HTTP `Date` header has one-second resolution: the sender's clock may be up to 1 s later."""

CLOCK_REFERENCE_MAX_AGE_S = 7200.0
"""A remote `Date` carried forward on the monotonic clock is a witness this long at most
(monotonic time stops while a host is suspended, so an older one may have fallen behind)."""

CLOCK_SKEW_WARN_INTERVAL_S = 300.0
"""At most one clock-disagreement WARNING per remote clock per this interval."""

# ---- credential refresh-ahead -----------------------------------------------------------------
REFRESH_RETRY_BASE_S = 1.0
"""First backoff after a failed (or unchanged) background credential refresh."""

REFRESH_RETRY_CAP_S = 60.0
"""Longest backoff between background refresh attempts of one key."""

REFRESH_MAX_IDLE_WAIT_S = 5.0
"""Longest sleep of the refresher between scans, so idle eviction happens in time."""

REFRESH_MIN_WAIT_S = 0.01
"""Shortest sleep of the refresher (and of a token-bucket wait)."""

REFRESH_ERROR_PAUSE_S = 1.0
"""Pause after a failed refresher iteration (the loop must outlive any bad scan)."""

REFRESH_MIN_SCAN_INTERVAL_S = 0.2
"""Wake-ups from a burst of stores coalesce into one scan per this interval."""

# ---- upstream session token --------------------------------------------------------------------
TOKEN_DEFAULT_LIFETIME_S = 300.0
"""Assumed token lifetime when neither `expires_in` nor a JWT `exp` says otherwise."""

TOKEN_EXPIRY_MARGIN_S = 1.0
"""A token this close to expiry would die in flight: it is not used."""

TOKEN_MIN_FORCED_INTERVAL_S = 10.0
"""A catalog that 401s everything must not hammer the IdP: forced refreshes at most this often."""

TOKEN_MIN_REFRESH_INTERVAL_S = 5.0
"""Floor of a token's refresh interval (and of its usable lifetime): a token that arrives
already expired (a skewed IdP's JWT `exp`, no `expires_in`) is used this long and not asked for
again sooner, so the IdP sees at most one grant per this interval, never a spin."""

TOKEN_REFRESH_JITTER = 0.05
"""± fraction of the token lifetime around its refresh point (a fleet does not ask together)."""

# ---- listeners ---------------------------------------------------------------------------------
LISTEN_BACKLOG = 4096
"""Listen backlog: aiohttp's default of 128 overflows when thousands of executors connect at
once (the kernel caps it at net.core.somaxconn)."""

FAILED_LOG_INTERVAL_S = 60.0
"""At most one WARNING per this interval for requests that fail the same way."""

# ---- single-flight waiters -----------------------------------------------------------------------
WAIT_DEADLINE_GRANULARITY_S = 0.05
"""Waiters of one shared fetch whose deadlines fall in the same slot of this width share one
timer (deadlines are rounded up, never down), so a herd of K waiters costs O(1) timers."""

# ---- catalog answers ---------------------------------------------------------------------------
UPSTREAM_MAX_RETRY_AFTER_S = 300.0
"""A catalog's `Retry-After` beyond this is capped (a typo upstream must not stall a node)."""

UPSTREAM_MAX_ERROR_MESSAGE = 500
"""Characters of a catalog error message passed on to the caller."""

UPSTREAM_MAX_RESPONSE_BYTES = 64 << 20
"""A catalog answer larger than this is refused unread (memory stays bounded)."""

UPSTREAM_HEALTH_TIMEOUT_S = 2.0
"""The readiness check of the catalog waits at most this long (a probe must answer quickly)."""

UPSTREAM_MAX_HEADER_VALUE = 200
"""Longest caller-supplied header value (request id, project id, idempotency key) sent on."""

MALFORMED_LOG_INTERVAL_S = 10.0
"""At most one concise line per this interval for malformed HTTP requests (aiohttp's parser)."""

# ---- AWS container credentials --------------------------------------------------------------
AWS_SDK_MIN_LEFT_S = 15 * 60 + 60.0
"""The AWS surface renews a cached credential with less left than this before answering:
botocore refreshes 15 min before `Expiration` (10 min: on every call), so an answer with less
would make an SDK ask again on each call until the gateway's own refresh-ahead ran."""

GC_YOUNG_THRESHOLD = 7000
"""Container allocations (net) between two young collections of the daemon's cyclic GC (Python's
default is 700). A cold herd keeps every waiter's objects alive until its one fill answers, so
each young collection promotes them and the older generations are walked again and again for
nothing: 10,000 waiters took 1.4-1.8 s at the default, 0.6 s here (0.5 s with the GC off). The
cost: up to this many young objects wait a little longer for their cycles to be found."""
