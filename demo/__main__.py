"""``python -m demo``: run the Lakegate demo end to end; exit 0 on success, non-zero with a reason.

Why one process owns everything: the demo starts the local stack (IdP, SeaweedFS, catalog emulator,
gateway) and a Spark session, and must stop all of them on success, failure, Ctrl-C or SIGTERM.
This is the only module that exits.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from demo.progress import Progress
from demo.runtime import STANDALONE
from devstack.processes import EXIT_INTERRUPTED, sigterm_interrupts
from devstack.stack_info import StackInfo

if TYPE_CHECKING:
    from devstack.launcher import Stack

EXIT_OK, EXIT_FAILED = 0, 1
_DESCRIPTION = (
    "Run the Lakegate demo: local stack, a Spark standalone cluster with one gateway per node,"
    " and a PySpark pipeline over it."
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=_DESCRIPTION)
    parser.add_argument(
        "--master", default=STANDALONE,
        help="'standalone' (default: start a local Spark master and --nodes workers, one gateway"
        " per node) or a Spark master URL such as local[2]",
    )
    parser.add_argument("--nodes", type=int, default=2, help="standalone workers (default 2)")
    parser.add_argument("--rows", type=int, default=6000, help="raw order lines (default 6000)")
    parser.add_argument("--files", type=int, default=8, help="raw CSV files (default 8)")
    parser.add_argument(
        "--partitions", type=int, default=40,
        help="write tasks per output table, each writing one file or fragment (default 40)",
    )
    parser.add_argument(
        "--transport", choices=("grpc", "http"), default="grpc",
        help="how tasks reach the gateway: gRPC or HTTP, both over its Unix socket",
    )
    parser.add_argument(
        "--storage", choices=("s3", "adls", "gcs"), default="s3",
        help="where the tables live: s3 (SeaweedFS, default), adls (Azurite) or gcs"
        " (fake-gcs-server behind a token-checking layer); GCS runs no Delta table",
    )
    parser.add_argument("--run-dir", type=Path, default=None, help="stack state (default: temp)")
    parser.add_argument("--summary-json", type=Path, default=None, help="write a JSON summary")
    parser.add_argument(
        "--keep-running", action="store_true",
        help="leave the stack up at the end (stop it with `lakegate-devstack down --dir DIR`);"
        " the Spark cluster and the node gateways are always stopped",
    )
    args = parser.parse_args(argv)
    if args.master == STANDALONE and args.nodes < 2:
        parser.error("--nodes must be at least 2 (the point is several nodes)")
    if args.rows < 100 or not 1 <= args.files <= args.rows:
        parser.error("--rows must be at least 100 and --files between 1 and --rows")
    if not 1 <= args.partitions <= 1000:
        parser.error("--partitions must be between 1 and 1000")
    return args


@contextmanager
def _stack(run_dir: Path, args: argparse.Namespace, say: Progress) -> Iterator[Stack]:
    """Start the local stack (with its own gateway in local mode); always stop it (unless asked
    to keep it)."""
    from devstack.launcher import start_stack, stop_stack

    local = args.master != STANDALONE
    say(f"starting the local stack (state in {run_dir})")
    try:
        storages = ("s3",) if args.storage == "s3" else ("s3", args.storage)
        stack = start_stack(run_dir, with_gateway=local, storages=storages)
        extra = {"adls": ", Azurite (ADLS)", "gcs": ", fake-gcs-server (GCS)"}.get(args.storage, "")
        say("stack ready: IdP, SeaweedFS (S3+STS)" + extra + ", catalog emulator"
            + (", Lakegate gateway" if local else ""))
        yield stack
    finally:
        if args.keep_running:
            say(f"stack left running: stop it with `lakegate-devstack down --dir {run_dir}`")
        else:
            say("stopping the local stack")
            stop_stack(run_dir)


def _environment(info: StackInfo, storage: str) -> None:
    """Settings this process and the Spark processes it starts share (not the gateway URL).

    On ADLS and GCS the local store's endpoint is a client setting (no catalog vends one).
    """
    os.environ["LAKEGATE_WAREHOUSE"] = info.warehouse_for(storage).name
    if storage == "adls" and info.azure is not None:
        os.environ["LAKEGATE_ADLS_ENDPOINT"] = info.azure.blob_endpoint
    if storage == "gcs" and info.gcs is not None:
        os.environ["LAKEGATE_GCS_ENDPOINT"] = info.gcs.endpoint
    os.environ.setdefault("NO_PROXY", "localhost,127.0.0.1")
    os.environ.setdefault("LANCE_LOG", "error")  # Lance warns "will be created" per fragment
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _run(args: argparse.Namespace, say: Progress) -> None:
    from demo import data, duckdb_query, metrics, pipeline, report
    from demo.runtime import runtime
    from devstack.spark_session import spark_session
    from lakegate_client import Client

    temp = args.run_dir is None
    run_dir = Path(tempfile.mkdtemp(prefix="lakegate-demo-")) if temp else args.run_dir.resolve()
    ok = False
    try:
        with _stack(run_dir, args, say) as stack:
            info = stack.info
            _environment(info, args.storage)
            warehouse = info.warehouse_for(args.storage).name
            drop = data.generate(args.rows, args.files)
            with runtime(args.master, info, run_dir, nodes=args.nodes,
                         transport=args.transport, say=say) as rt:
                say(f"starting the Spark application on {rt.master}")
                spark = spark_session(rt.master, conf=rt.conf)
                try:
                    with Client(rt.driver_url) as client:
                        # Iceberg tables: on S3 only (the catalog writes their metadata there)
                        catalog = (next(iter(rt.gateways.values()))  # the driver's node
                                   if args.storage == "s3" else None)
                        run = pipeline.run(spark, client, info.namespace, drop, say,
                                           partitions=args.partitions, catalog_url=catalog,
                                           storage=args.storage)
                    executors = rt.executors_per_node()
                finally:
                    spark.stop()
                node, gateway_url = next(iter(rt.gateways.items()))  # the driver's node
                duck = None
                readable = duckdb_query.readable(run, args.storage)
                if readable:
                    say(f"one DuckDB query over {len(readable)} tables through {node}'s gateway")
                    duck = duckdb_query.run(run, node, gateway_url, warehouse,
                                            lambda: metrics.read_counters(info, rt.gateways),
                                            storage=args.storage)
                else:
                    say("no DuckDB query: DuckDB takes GCS HMAC keys only, never a vended token")
                counters = metrics.read_counters(info, rt.gateways)
            text = report.render(run, counters, info, say.elapsed_s, master=rt.master,
                                 executors=executors, kept_running=args.keep_running,
                                 duckdb=duck, storage=args.storage)
            print(text, flush=True)
            if args.summary_json is not None:
                summary = report.summary(run, counters, rt.master, executors, duck)
                args.summary_json.write_text(json.dumps(summary, indent=1) + "\n")
                say(f"summary written to {args.summary_json}")
            ok = True
    finally:
        if temp and ok and not args.keep_running:
            shutil.rmtree(run_dir, ignore_errors=True)
        elif not ok:
            print(f"logs of the stack are in {run_dir}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    say = Progress()
    try:
        with sigterm_interrupts():
            _run(args, say)
    except KeyboardInterrupt:
        print("\ndemo interrupted; everything it started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the demo's boundary: say why, exit non-zero
        print(f"\ndemo FAILED after {say.elapsed_s:.0f} s: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
