"""The signing scenario's scans (`python loadtest/signing_scan.py SPEC_JSON`, in the s3fs overlay).

pyiceberg 0.12 with FsspecFileIO scans tables through the gateway, three ways interleaved round
by round (the order rotates each round, so drift on the shared machine lands on all three):
`vended` (the STS warehouse's table, vended keys), `local` (the same table, `remote-signing`:
the node signs) and `forwarded` (a copy of it on the signing-only warehouse: the catalog
signs). It creates and fills both tables first (the signing-only one can only be written
through a signer). Every scan's rows are counted and checked; prints one JSON line of per-round
seconds.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog

from devstack.metrics_scrape import delta, scrape

FSSPEC = "pyiceberg.io.fsspec.FsspecFileIO"


def _catalog(spec: dict[str, Any], warehouse: str, delegation: str) -> RestCatalog:
    return RestCatalog("bench", uri=spec["gateway_url"] + "/catalog", warehouse=warehouse,
                       token="x", **{"py-io-impl": FSSPEC,  # noqa: S106 - the bench gateway's callers are open
                                     "header.X-Iceberg-Access-Delegation": delegation,
                                     "header.X-Lakegate-Request": "1"})


def _fill(catalog: RestCatalog, ident: tuple[str, str], files: int, rows_per_file: int) -> None:
    """Create the table and append `files` data files of `rows_per_file` rows."""
    ids = pa.array(range(rows_per_file), pa.int64())
    payload = pa.array([f"row-{i:08d}" for i in range(rows_per_file)])
    data = pa.table({"id": ids, "payload": payload})
    table = catalog.create_table(ident, schema=data.schema)
    for _ in range(files):
        table.append(data)


def main(raw: str) -> None:
    spec = json.loads(raw)
    files, per_file = spec["files"], spec["rows_per_file"]
    # The STS table with vended keys, its copy on the signing-only warehouse through the
    # node's signer (the only way to its data).
    _fill(_catalog(spec, spec["sts_warehouse"], "vended-credentials"), tuple(spec["sts_table"]),
          files, per_file)
    _fill(_catalog(spec, spec["signing_warehouse"], "remote-signing"),
          tuple(spec["signing_table"]), files, per_file)
    modes = {
        "vended": (_catalog(spec, spec["sts_warehouse"], "vended-credentials"), spec["sts_table"]),
        "local": (_catalog(spec, spec["sts_warehouse"], "remote-signing"), spec["sts_table"]),
        "forwarded": (_catalog(spec, spec["signing_warehouse"], "remote-signing"),
                      spec["signing_table"]),
    }
    order = list(modes)
    before = scrape(spec["gateway_url"])
    out: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for r in range(spec["warmup"] + spec["rounds"]):
        for mode in order[r % 3:] + order[:r % 3]:
            catalog, ident = modes[mode]
            t0 = time.perf_counter()
            table = catalog.load_table(tuple(ident))
            t1 = time.perf_counter()
            rows = table.scan().to_arrow().num_rows
            t2 = time.perf_counter()
            if rows != spec["rows"]:
                raise SystemExit(f"{mode}: scanned {rows} rows, expected {spec['rows']}")
            if r >= spec["warmup"]:
                out[mode].append({"load_s": t1 - t0, "scan_s": t2 - t1})
    after = scrape(spec["gateway_url"])
    scans = spec["warmup"] + spec["rounds"]
    signatures = {m: delta(before, after, "lakegate_sign_requests_total", mode=m) / scans
                  for m in ("local", "forwarded")}
    print(json.dumps({"rounds": out, "signatures_per_scan": signatures}))


if __name__ == "__main__":
    main(sys.argv[1])
