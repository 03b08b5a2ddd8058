package dev.lakegate.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class GatewayClientTest {
  @Test
  void theCredentialsUriEncodesEveryNameAndJoinsLevelsWithUnitSeparators() {
    TableKey key = new TableKey("http://127.0.0.1:8765/", "my wh", List.of("a", "b c"), "t/1", "write");
    assertEquals("http://127.0.0.1:8765/v1/warehouses/my%20wh/namespaces/a%1Fb%20c/tables/t%2F1"
        + "/credentials?access=write&kind=generic", GatewayClient.credentialsUri(key).toString());
  }

  @Test
  void parsesTheCredentialCoveringTheLocation() throws IOException {
    String body = "{\"location\": \"s3://b/wh/t\", \"expires_at_ms\": 1800000000000, \"remaining_s\": 890.5,"
        + " \"identity_ttl_s\": 21.5, \"credentials\": [{\"prefix\": \"s3://b/other\", \"config\": {\"k\": \"x\"}},"
        + " {\"prefix\": \"s3://b/wh/t\", \"config\": {\"k\": \"y\"}}]}";
    TableCredential c = GatewayClient.parse(body.getBytes(StandardCharsets.UTF_8));
    assertEquals("y", c.config().get("k"));
    assertEquals(1800000000000L, c.expiresAtMs());
    assertEquals(890.5, c.servedRemainingS());
    assertEquals(21.5, c.identityTtlS());
  }

  @Test
  void anAnswerWithoutCredentialsIsAnError() {
    assertThrows(IOException.class,
        () -> GatewayClient.parse("{\"credentials\": []}".getBytes(StandardCharsets.UTF_8)));
  }
}
