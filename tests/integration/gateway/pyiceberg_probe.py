"""Run by tests/integration/gateway/test_pyiceberg_signing.py in a subprocess (its s3fs overlay).

pyiceberg, unchanged, with the gateway as its catalog and `remote-signing` delegation: create a
table, append twice, scan it from a fresh load; prints one JSON line (the ids read back, the
FileIO class, the s3fs version, whether any key reached the table's properties).
"""

from __future__ import annotations

import json
import sys

import pyarrow as pa
import s3fs
from pyiceberg.catalog.rest import RestCatalog


def main(gateway_url: str, warehouse: str, namespace: str, name: str) -> None:
    rest = RestCatalog("gw", uri=gateway_url + "/catalog", warehouse=warehouse, token="x",  # noqa: S106
                       **{"header.X-Iceberg-Access-Delegation": "remote-signing",
                          "header.X-Lakegate-Request": "1"})
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"])})
    table = rest.create_table((namespace, name), schema=rows.schema)
    table.append(rows)
    table.append(rows.slice(0, 1))
    loaded = rest.load_table((namespace, name))
    ids = sorted(loaded.scan().to_arrow()["id"].to_pylist())
    keys = [k for k in loaded.io.properties if k.startswith("s3.") and ("key" in k or "token" in k)]
    rest.drop_table((namespace, name))
    print(json.dumps({"ids": ids, "io": type(loaded.io).__name__, "s3fs": s3fs.__version__,
                      "keys": keys}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
