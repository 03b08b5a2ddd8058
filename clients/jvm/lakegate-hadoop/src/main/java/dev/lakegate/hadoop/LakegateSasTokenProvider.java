package dev.lakegate.hadoop;

import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.azurebfs.extensions.SASTokenProvider;

/**
 * ABFS's SAS: {@code fs.azure.account.auth.type=SAS} and {@code
 * fs.azure.sas.token.provider.type=dev.lakegate.hadoop.LakegateSasTokenProvider}. The table's vended
 * SAS ({@code adls.sas-token.<account>.<host>}) from the JVM's cache, for every operation (the
 * vended SAS is scoped to the table, its permissions to the access mode).
 */
public final class LakegateSasTokenProvider implements SASTokenProvider {
  private TableKey key;
  private CredentialSource source;
  private CredentialCache cache;

  @Override
  public void initialize(Configuration configuration, String accountName) {
    this.key = Lakegate.key(configuration);
    this.source = Lakegate.source(configuration);
    this.cache = Lakegate.cache(configuration);
  }

  @Override
  public String getSASToken(String account, String fileSystem, String path, String operation)
      throws IOException {
    TableCredential c = cache.get(key, source);
    String prefix = "adls.sas-token.";
    for (var e : c.config().entrySet()) {
      if (e.getKey().startsWith(prefix) && account.startsWith(e.getKey().substring(prefix.length()).split("\\.")[0])) {
        return e.getValue();
      }
    }
    throw new IOException("the gateway's credential for " + key + " has no SAS for account " + account);
  }
}
