package dev.lakegate.hadoop;

import com.google.cloud.hadoop.util.AccessTokenProvider;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import org.apache.hadoop.conf.Configuration;

/**
 * The GCS connector's token: {@code fs.gs.auth.type=ACCESS_TOKEN_PROVIDER} and {@code
 * fs.gs.auth.access.token.provider=dev.lakegate.hadoop.LakegateGcsAccessTokenProvider}. The
 * table's vended OAuth2 token ({@code gcs.oauth2.token}) from the JVM's cache.
 */
public final class LakegateGcsAccessTokenProvider implements AccessTokenProvider {
  private Configuration conf;
  private TableKey key;
  private CredentialSource source;
  private CredentialCache cache;

  @Override
  public void setConf(Configuration configuration) {
    this.conf = configuration;
    this.key = Lakegate.key(configuration);
    this.source = Lakegate.source(configuration);
    this.cache = Lakegate.cache(configuration);
  }

  @Override
  public Configuration getConf() {
    return conf;
  }

  @Override
  public AccessToken getAccessToken() {
    try {
      TableCredential c = cache.get(key, source);
      Instant expiry = c.expiresAtMs() == null ? null : Instant.ofEpochMilli(c.expiresAtMs());
      return new AccessToken(c.require("gcs.oauth2.token"), expiry);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void refresh() throws IOException {
    cache.get(key, source); // the cache refreshes ahead of the floor on its own
  }
}
