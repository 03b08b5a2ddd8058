package dev.lakegate.hadoop;

import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * One table's credential at one gateway: (gateway URL, warehouse, namespace levels, table, access),
 * names case-folded as Lakekeeper matches them, as the Python client's memo key.
 */
public final class TableKey {
  private final String url;
  private final String warehouse;
  private final List<String> namespace;
  private final String table;
  private final String access;

  public TableKey(String url, String warehouse, List<String> namespace, String table, String access) {
    if (!"read".equals(access) && !"write".equals(access)) {
      throw new IllegalArgumentException("access must be read or write, not " + access);
    }
    if (namespace.isEmpty() || table.isEmpty() || warehouse.isEmpty()) {
      throw new IllegalArgumentException("warehouse, namespace and table are required");
    }
    this.url = url;
    this.warehouse = warehouse;
    this.namespace = List.copyOf(namespace);
    this.table = table;
    this.access = access;
  }

  public String url() {
    return url;
  }

  public String warehouse() {
    return warehouse;
  }

  public List<String> namespace() {
    return namespace;
  }

  public String table() {
    return table;
  }

  public String access() {
    return access;
  }

  private List<Object> folded() {
    return List.of(
        url,
        warehouse.toLowerCase(Locale.ROOT),
        namespace.stream().map(p -> p.toLowerCase(Locale.ROOT)).toList(),
        table.toLowerCase(Locale.ROOT),
        access);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof TableKey other && folded().equals(other.folded());
  }

  @Override
  public int hashCode() {
    return Objects.hash(folded());
  }

  @Override
  public String toString() {
    return warehouse + "/" + String.join(".", namespace) + "/" + table + " (" + access + ")";
  }
}
