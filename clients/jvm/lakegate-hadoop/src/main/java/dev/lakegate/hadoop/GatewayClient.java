package dev.lakegate.hadoop;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Asks the node's gateway for a table's credential over loopback HTTP: {@code GET
 * /v1/warehouses/{wh}/namespaces/{ns}/tables/{t}/credentials?access=&kind=generic} with the
 * anti-forgery header and, when configured, the caller's bearer token (a fixed token, or a token
 * file such as a projected service-account token, read again on every call so a rotated token is
 * picked up). Java's HTTP client cannot speak HTTP over a Unix socket, so this uses the
 * gateway's loopback TCP listener. Errors name the table and the HTTP status, never a credential.
 */
public final class GatewayClient implements CredentialSource {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final HttpClient http;
  private final String token;
  private final Path tokenFile;
  private final Duration timeout;

  public GatewayClient(HttpClient http, String token, Path tokenFile, Duration timeout) {
    this.http = http;
    this.token = token;
    this.tokenFile = tokenFile;
    this.timeout = timeout;
  }

  private static String segment(String value) {
    return URLEncoder.encode(value, StandardCharsets.UTF_8).replace("+", "%20");
  }

  static URI credentialsUri(TableKey key) {
    String ns = key.namespace().stream().map(GatewayClient::segment).collect(Collectors.joining("%1F"));
    String base = key.url().endsWith("/") ? key.url().substring(0, key.url().length() - 1) : key.url();
    return URI.create(base + "/v1/warehouses/" + segment(key.warehouse()) + "/namespaces/" + ns
        + "/tables/" + segment(key.table()) + "/credentials?access=" + key.access() + "&kind=generic");
  }

  private String bearer() throws IOException {
    if (tokenFile != null) {
      return Files.readString(tokenFile, StandardCharsets.UTF_8).strip();
    }
    return token;
  }

  @Override
  public TableCredential fetch(TableKey key) throws IOException {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(credentialsUri(key)).timeout(timeout).header("X-Lakegate-Request", "1").GET();
    String bearer = bearer();
    if (bearer != null && !bearer.isEmpty()) {
      request.header("Authorization", "Bearer " + bearer);
    }
    HttpResponse<byte[]> response;
    try {
      response = http.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted asking the gateway for " + key, e);
    }
    if (response.statusCode() != 200) {
      throw new IOException("the gateway answered HTTP " + response.statusCode() + " for " + key
          + ": " + errorMessage(response.body()));
    }
    return parse(response.body());
  }

  private static String errorMessage(byte[] body) {
    try {
      JsonNode message = JSON.readTree(body).path("error").path("message");
      return message.isTextual() ? message.asText() : "(no error message)";
    } catch (IOException e) {
      return "(not JSON)";
    }
  }

  /** The gateway's {@code CredentialsResponse}: the credential covering the table location. */
  static TableCredential parse(byte[] body) throws IOException {
    JsonNode doc = JSON.readTree(body);
    String location = doc.path("location").asText("");
    JsonNode best = null; // the longest prefix covering the location, else the first one
    int bestLength = -1;
    for (JsonNode cred : doc.path("credentials")) {
      String prefix = cred.path("prefix").asText("");
      boolean covers = !prefix.isEmpty() && location.startsWith(prefix);
      if (best == null || (covers && prefix.length() > bestLength)) {
        best = cred;
        bestLength = covers ? prefix.length() : -1;
      }
    }
    if (best == null) {
      throw new IOException("the gateway's answer carries no credential");
    }
    Map<String, String> config = new HashMap<>();
    best.path("config").fields().forEachRemaining(e -> config.put(e.getKey(), e.getValue().asText()));
    return new TableCredential(
        location,
        config,
        doc.hasNonNull("expires_at_ms") ? doc.get("expires_at_ms").asLong() : null,
        doc.hasNonNull("remaining_s") ? doc.get("remaining_s").asDouble() : null,
        doc.hasNonNull("identity_ttl_s") ? doc.get("identity_ttl_s").asDouble() : null);
  }
}
