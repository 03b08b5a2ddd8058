package dev.lakegate.hadoop;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;

/**
 * The executor JVM's credential cache: every provider instance of every filesystem asks here
 * first, so a task asking in a tight loop never leaves the JVM and one gateway call serves the
 * whole JVM for a credential's lifetime.
 *
 * <p>The rules are the Python client's memo ({@code lakegate_client/_memo.py}):
 *
 * <ul>
 *   <li>An entry is served only while it has more than {@code floorS} left (the floor the gateway
 *       serves with), and only while the gateway's word on its table identity holds
 *       ({@code identity_ttl_s} of the answer, counted from when the request was sent; 5 s when the
 *       gateway does not say). After that the gateway is asked again.
 *   <li>The remaining life is fixed when an entry is stored (the smaller of the gateway's
 *       {@code remaining_s} and the expiry against the local wall clock) and then counted down on
 *       the monotonic clock, so a wall-clock step can neither serve an expired credential nor
 *       drop a valid one. A credential without an expiry, or with no more than the floor left, is
 *       returned but never stored.
 *   <li>When the gateway cannot be reached, an entry whose identity lapsed but whose credential
 *       is still above the floor is served (what the gateway itself serves while its catalog is
 *       down); below the floor the error is raised, never an expiring credential served.
 * </ul>
 *
 * <p>Beyond the memo: once an entry has less than {@code floorS + refreshAheadS} left, the first
 * caller to see it starts one background refresh (on {@code refresher}) and is served the current
 * credential meanwhile, so tasks do not all stall on the gateway at the floor. Misses are
 * single-flight per key. Bounded LRU. Thread-safe.
 */
public final class CredentialCache {
  public static final double DEFAULT_IDENTITY_TTL_S = 5.0;
  private static final double NANOS = 1e9;

  private final Clock clock;
  private final double floorS;
  private final double refreshAheadS;
  private final int maxEntries;
  private final Executor refresher;
  private final Map<TableKey, Entry> entries;
  private final Map<TableKey, Object> locks = new ConcurrentHashMap<>();
  private final Set<TableKey> refreshing = ConcurrentHashMap.newKeySet();

  private record Entry(TableCredential credential, long deadlineNanos, long identityDeadlineNanos) {}

  public CredentialCache(
      Clock clock, double floorS, double refreshAheadS, int maxEntries, Executor refresher) {
    if (floorS < 0 || refreshAheadS < 0 || maxEntries < 1) {
      throw new IllegalArgumentException("floor and refresh-ahead must be >= 0, entries >= 1");
    }
    this.clock = clock;
    this.floorS = floorS;
    this.refreshAheadS = refreshAheadS;
    this.maxEntries = maxEntries;
    this.refresher = refresher;
    this.entries = new LinkedHashMap<>(16, 0.75f, true);
  }

  /** The credential for {@code key}: from the cache while it is good, else from {@code source}. */
  public TableCredential get(TableKey key, CredentialSource source) throws IOException {
    Entry entry = lookup(key);
    long now = clock.monotonicNanos();
    if (entry != null && now < entry.identityDeadlineNanos) {
      if (leftS(entry, now) <= floorS + refreshAheadS) {
        refreshAhead(key, source);
      }
      return entry.credential;
    }
    Object lock = locks.computeIfAbsent(key, k -> new Object());
    synchronized (lock) {
      Entry again = lookup(key);
      now = clock.monotonicNanos();
      if (again != null && now < again.identityDeadlineNanos) {
        return again.credential; // another thread fetched it while this one waited
      }
      try {
        return fetchAndStore(key, source);
      } catch (IOException e) {
        Entry stale = lookup(key);
        if (stale != null) {
          return stale.credential; // still above the floor: the identity's age is all that lapsed
        }
        throw e;
      }
    }
  }

  private TableCredential fetchAndStore(TableKey key, CredentialSource source) throws IOException {
    long asked = clock.monotonicNanos();
    TableCredential fetched = source.fetch(key);
    put(key, fetched, asked);
    return fetched;
  }

  private void refreshAhead(TableKey key, CredentialSource source) {
    if (!refreshing.add(key)) {
      return;
    }
    try {
      refresher.execute(
          () -> {
            try {
              fetchAndStore(key, source);
            } catch (IOException | RuntimeException e) {
              // The current entry stays until the floor; the next caller past it fetches again.
            } finally {
              refreshing.remove(key);
            }
          });
    } catch (RejectedExecutionException e) {
      refreshing.remove(key);
    }
  }

  private static double leftS(Entry entry, long nowNanos) {
    return (entry.deadlineNanos - nowNanos) / NANOS;
  }

  /** The entry if it is still above the floor (an entry at or below it is dropped). */
  private Entry lookup(TableKey key) {
    long now = clock.monotonicNanos();
    synchronized (entries) {
      Entry entry = entries.get(key);
      if (entry == null) {
        return null;
      }
      if (leftS(entry, now) <= floorS) {
        entries.remove(key);
        return null;
      }
      return entry;
    }
  }

  /** Remember {@code credential}, fetched by a request sent at {@code askedNanos}, if worth it. */
  void put(TableKey key, TableCredential credential, long askedNanos) {
    if (credential.expiresAtMs() == null) {
      return;
    }
    double remaining = (credential.expiresAtMs() - clock.nowMillis()) / 1000.0;
    if (credential.servedRemainingS() != null) {
      remaining = Math.min(remaining, credential.servedRemainingS());
    }
    if (remaining <= floorS) {
      return;
    }
    long now = clock.monotonicNanos();
    double ttl =
        credential.identityTtlS() == null ? DEFAULT_IDENTITY_TTL_S : Math.max(0.0, credential.identityTtlS());
    long asked = Math.min(askedNanos, now);
    Entry entry = new Entry(credential, now + (long) (remaining * NANOS), asked + (long) (ttl * NANOS));
    synchronized (entries) {
      entries.put(key, entry);
      while (entries.size() > maxEntries) {
        TableKey eldest = entries.keySet().iterator().next();
        entries.remove(eldest);
      }
    }
  }

  /** How many entries are held (for tests and metrics; never their contents). */
  public int size() {
    synchronized (entries) {
      return entries.size();
    }
  }
}
