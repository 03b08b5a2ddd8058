package dev.lakegate.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The cache's rules (the Python memo's floor rules plus refresh-ahead), on a fake clock. */
class CredentialCacheTest {
  static final double FLOOR_S = 300;
  static final double AHEAD_S = 300;
  static final TableKey KEY = new TableKey("http://127.0.0.1:1", "demo", List.of("ns"), "t", "read");

  static final class FakeClock implements Clock {
    long mono = 1_000_000_000L;
    long wall = 1_800_000_000_000L;

    void advance(double seconds) {
      mono += (long) (seconds * 1e9);
      wall += (long) (seconds * 1000);
    }

    @Override
    public long monotonicNanos() {
      return mono;
    }

    @Override
    public long nowMillis() {
      return wall;
    }
  }

  /** A gateway that vends a fresh credential (key "n" = call number) with a given life. */
  static final class FakeGateway implements CredentialSource {
    final FakeClock clock;
    double lifeS = 3600;
    Double servedRemainingS;
    Double identityTtlS = 60.0;
    boolean down;
    int calls;

    FakeGateway(FakeClock clock) {
      this.clock = clock;
    }

    @Override
    public TableCredential fetch(TableKey key) throws IOException {
      if (down) {
        throw new IOException("gateway down");
      }
      calls++;
      return new TableCredential("s3://b/t", Map.of("n", String.valueOf(calls), "s3.secret-access-key", "SECRET"),
          clock.wall + (long) (lifeS * 1000), servedRemainingS, identityTtlS);
    }
  }

  final FakeClock clock = new FakeClock();
  final FakeGateway gateway = new FakeGateway(clock);
  final List<Runnable> queued = new ArrayList<>();
  final CredentialCache cache = new CredentialCache(clock, FLOOR_S, AHEAD_S, 8, queued::add);

  String n() throws IOException {
    return cache.get(KEY, gateway).config().get("n");
  }

  @Test
  void servesFromTheCacheUntilTheIdentityTtlThenAsksAgain() throws IOException {
    assertEquals("1", n());
    clock.advance(59);
    assertEquals("1", n());
    assertEquals(1, gateway.calls);
    clock.advance(1);
    assertEquals("2", n());
  }

  @Test
  void neverServesACredentialAtOrBelowTheFloor() throws IOException {
    gateway.identityTtlS = 1e9;
    assertEquals("1", n());
    clock.advance(3600 - FLOOR_S - 1);
    assertEquals("1", n()); // 301 s left (a background refresh was queued, not run)
    clock.advance(1);
    assertEquals("2", n()); // 300 s left: at the floor, dropped and fetched
  }

  @Test
  void aCredentialWithNoMoreThanTheFloorLeftIsReturnedButNotStored() throws IOException {
    gateway.lifeS = FLOOR_S;
    assertEquals("1", n());
    assertEquals("2", n());
    assertEquals(0, cache.size());
  }

  @Test
  void theGatewaysRemainingCountsWhenSmallerThanTheWallClockExpiry() throws IOException {
    gateway.identityTtlS = 1e9;
    gateway.servedRemainingS = FLOOR_S + 10; // the wall clock says 3600 s; the gateway says less
    assertEquals("1", n());
    clock.advance(10);
    assertEquals("2", n());
  }

  @Test
  void aWallClockStepNeitherServesAnExpiredCredentialNorDropsAValidOne() throws IOException {
    gateway.identityTtlS = 1e9;
    assertEquals("1", n());
    clock.wall += 10_000_000L; // +10 000 s wall step
    assertEquals("1", n());
    clock.wall -= 20_000_000L;
    clock.advance(3600 - FLOOR_S);
    assertEquals("2", n());
  }

  @Test
  void aCredentialWithoutExpiryIsNeverStored() throws IOException {
    CredentialSource noExpiry = k -> {
      gateway.calls++;
      return new TableCredential("s3://b/t", Map.of(), null, null, null);
    };
    cache.get(KEY, noExpiry);
    cache.get(KEY, noExpiry);
    assertEquals(2, gateway.calls);
  }

  @Test
  void servesALapsedIdentityWhileTheGatewayIsDownButNeverBelowTheFloor() throws IOException {
    assertEquals("1", n());
    clock.advance(120); // identity lapsed
    gateway.down = true;
    assertEquals("1", n());
    clock.advance(3600 - FLOOR_S - 120);
    assertThrows(IOException.class, this::n);
  }

  @Test
  void refreshesAheadOnceInTheBackgroundAndServesTheCurrentMeanwhile() throws IOException {
    gateway.identityTtlS = 1e9;
    assertEquals("1", n());
    clock.advance(3600 - FLOOR_S - AHEAD_S + 1); // inside the refresh-ahead window
    assertEquals("1", n());
    assertEquals("1", n());
    assertEquals(1, queued.size()); // one refresh, however many callers saw the window
    queued.remove(0).run();
    assertEquals("2", n());
    assertEquals(2, gateway.calls);
  }

  @Test
  void keysFoldNamesButNotAccess() {
    TableKey upper = new TableKey("http://127.0.0.1:1", "DEMO", List.of("NS"), "T", "read");
    assertEquals(KEY, upper);
    assertFalse(KEY.equals(new TableKey("http://127.0.0.1:1", "demo", List.of("ns"), "t", "write")));
    assertThrows(IllegalArgumentException.class,
        () -> new TableKey("http://127.0.0.1:1", "demo", List.of("ns"), "t", "admin"));
  }

  @Test
  void aCredentialNeverPrintsItsValues() throws IOException {
    TableCredential c = cache.get(KEY, gateway);
    assertFalse(c.toString().contains("SECRET"));
    assertTrue(c.toString().contains("s3.secret-access-key"));
    assertSame(c, cache.get(KEY, gateway));
  }
}
