package dev.lakegate.hadoop;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.time.Instant;
import org.apache.hadoop.conf.Configuration;
import software.amazon.awssdk.auth.credentials.AwsCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;

/**
 * S3A's credentials: {@code fs.s3a.aws.credentials.provider=dev.lakegate.hadoop.LakegateS3CredentialsProvider}.
 * Each call is answered from the JVM's cache (the AWS SDK asks before every request it signs),
 * so a refreshed STS credential is picked up without reopening the filesystem.
 */
public final class LakegateS3CredentialsProvider implements AwsCredentialsProvider {
  private final TableKey key;
  private final CredentialSource source;
  private final CredentialCache cache;

  /** S3A's constructor: the bucket URI and the (per-bucket resolved) configuration. */
  public LakegateS3CredentialsProvider(URI uri, Configuration conf) {
    this(Lakegate.key(conf), Lakegate.source(conf), Lakegate.cache(conf));
  }

  LakegateS3CredentialsProvider(TableKey key, CredentialSource source, CredentialCache cache) {
    this.key = key;
    this.source = source;
    this.cache = cache;
  }

  @Override
  public AwsCredentials resolveCredentials() {
    TableCredential c;
    try {
      c = cache.get(key, source);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    AwsSessionCredentials.Builder b = AwsSessionCredentials.builder()
        .accessKeyId(c.require("s3.access-key-id"))
        .secretAccessKey(c.require("s3.secret-access-key"))
        .sessionToken(c.require("s3.session-token"));
    if (c.expiresAtMs() != null) {
      b.expirationTime(Instant.ofEpochMilli(c.expiresAtMs()));
    }
    return b.build();
  }

  @Override
  public String toString() {
    return "LakegateS3CredentialsProvider[" + key + "]";
  }
}
