package dev.lakegate.hadoop;

import java.util.Map;

/**
 * One vended credential as the gateway served it: its storage config (secret values inside),
 * its expiry, and what the gateway said about it. {@link #toString} never shows a value.
 *
 * @param location the table location the credential is scoped to
 * @param config the credential's storage keys (for example {@code s3.access-key-id})
 * @param expiresAtMs epoch ms of the expiry, or null when the credential carries none
 * @param servedRemainingS the remaining life the gateway reported, or null
 * @param identityTtlS how long the gateway vouches for the table identity, or null
 */
public record TableCredential(
    String location,
    Map<String, String> config,
    Long expiresAtMs,
    Double servedRemainingS,
    Double identityTtlS) {

  public TableCredential {
    config = Map.copyOf(config);
  }

  /** The value of a required key, or an error naming only the key. */
  public String require(String key) {
    String value = config.get(key);
    if (value == null || value.isEmpty()) {
      throw new IllegalStateException("the gateway's credential has no " + key);
    }
    return value;
  }

  @Override
  public String toString() {
    return "TableCredential[location=" + location + ", keys=" + config.keySet().stream().sorted().toList()
        + ", expiresAtMs=" + expiresAtMs + "]";
  }
}
