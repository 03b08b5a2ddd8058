package dev.lakegate.hadoop;

import java.net.http.HttpClient;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.hadoop.conf.Configuration;

/**
 * The Hadoop configuration a provider reads, and the JVM-wide cache every provider shares.
 *
 * <p>Keys (per read or write: {@code spark.read.options(...)} puts them into that read's Hadoop
 * configuration; {@code lakegate_client.spark.hadoop.hadoop_options} writes them):
 *
 * <ul>
 *   <li>{@code fs.lakegate.url}: the node's gateway, e.g. {@code http://127.0.0.1:8765}
 *   <li>{@code fs.lakegate.warehouse}, {@code fs.lakegate.namespace} (levels joined by {@code
 *       \u001f}, or a single level), {@code fs.lakegate.table}
 *   <li>{@code fs.lakegate.access}: {@code read} (default) or {@code write}
 *   <li>{@code fs.lakegate.token} or {@code fs.lakegate.token.file}: the caller's token, if the
 *       gateway asks for one (a file is read again at every gateway call)
 *   <li>{@code fs.lakegate.floor.seconds} (300), {@code fs.lakegate.refresh-ahead.seconds} (300)
 * </ul>
 *
 * <p>Why one JVM-wide cache (a static): Hadoop builds providers by reflection, one per filesystem
 * instance, and with the filesystem cache off (per-table credentials, see the README) there is one
 * instance per {@code FileSystem.get}; the cache is what makes them all share one gateway call.
 */
public final class Lakegate {
  public static final String PREFIX = "fs.lakegate.";
  public static final double DEFAULT_FLOOR_S = 300.0;
  public static final double DEFAULT_REFRESH_AHEAD_S = 300.0;
  private static final int MAX_ENTRIES = 1024;
  private static final HttpClient HTTP =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).version(HttpClient.Version.HTTP_1_1).build();
  private static final ExecutorService REFRESHER =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t = new Thread(r, "lakegate-credential-refresh");
            t.setDaemon(true);
            return t;
          });
  private static volatile CredentialCache cache;

  private Lakegate() {}

  static CredentialCache cache(Configuration conf) {
    CredentialCache c = cache;
    if (c == null) {
      synchronized (Lakegate.class) {
        if (cache == null) {
          cache = new CredentialCache(
              Clock.SYSTEM,
              conf.getDouble(PREFIX + "floor.seconds", DEFAULT_FLOOR_S),
              conf.getDouble(PREFIX + "refresh-ahead.seconds", DEFAULT_REFRESH_AHEAD_S),
              MAX_ENTRIES,
              REFRESHER);
        }
        c = cache;
      }
    }
    return c;
  }

  private static String required(Configuration conf, String name) {
    String value = conf.getTrimmed(PREFIX + name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("missing Hadoop option " + PREFIX + name);
    }
    return value;
  }

  /** The table the configuration names. */
  public static TableKey key(Configuration conf) {
    List<String> namespace = Arrays.asList(required(conf, "namespace").split("\u001f", -1));
    return new TableKey(required(conf, "url"), required(conf, "warehouse"), namespace,
        required(conf, "table"), conf.getTrimmed(PREFIX + "access", "read"));
  }

  /** The gateway client the configuration describes. */
  public static CredentialSource source(Configuration conf) {
    String file = conf.getTrimmed(PREFIX + "token.file");
    return new GatewayClient(HTTP, conf.getTrimmed(PREFIX + "token"),
        file == null || file.isEmpty() ? null : Path.of(file), Duration.ofSeconds(30));
  }
}
