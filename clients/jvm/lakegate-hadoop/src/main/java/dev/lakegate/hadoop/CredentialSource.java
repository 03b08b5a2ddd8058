package dev.lakegate.hadoop;

import java.io.IOException;

/** Where a cache miss goes: the node's gateway ({@link GatewayClient}), or a fake in tests. */
@FunctionalInterface
public interface CredentialSource {
  TableCredential fetch(TableKey key) throws IOException;
}
