"""``python -m demo.long_job``: a Spark job whose tasks outlive their first credential.

Why: the field's best-known failure is a long write that dies with ``ExpiredToken`` when the
credential it started with expires. This job runs on the same standalone cluster as the demo
(one gateway per node) against the real stack, whose SeaweedFS enforces STS expiry (900 s at
least). Each task streams one object per engine (pyarrow and boto3 Parquet, deltalake, Lance)
until well after its first credential expired, refreshing through the library's own mechanism.
Takes about 17 minutes. Exit 0 only with 0 failed tasks, 0 retries, 0 expired errors and the
right rows in every table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from demo.progress import Progress
from demo.streams import DEFAULT_ENGINES, ENGINES, EXPIRED, StreamSpec
from devstack.processes import EXIT_INTERRUPTED, sigterm_interrupts
from devstack.stack_info import StackInfo

STS_LIFETIME_S = 900  # SeaweedFS's minimum, and what the warehouse asks for
# Gateway cache for 900 s credentials: refresh ahead at 420 s left (the catalog re-issues an
# STS credential after half its validity, 450 s), never serve one with less than 300 s left.
GATEWAY_ENV = {"LAKEGATE__CACHE__REFRESH_LEAD_S": "420", "LAKEGATE__CACHE__MIN_REMAINING_S": "300"}
EXIT_OK, EXIT_FAILED = 0, 1


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo.long_job", description=__doc__)
    parser.add_argument("--nodes", type=int, default=2, help="standalone workers (default 2)")
    parser.add_argument("--engines", default=",".join(DEFAULT_ENGINES),
                        help=f"comma-separated subset of {','.join(ENGINES)} (*-static: the"
                        " baseline without refresh, expected to fail)")
    parser.add_argument("--baseline", action="store_true",
                        help="report each task's error instead of failing the job at the first")
    parser.add_argument("--margin-s", type=float, default=120.0,
                        help="keep streaming this long after the first credential expired")
    parser.add_argument("--stream-s", type=float, default=0.0,
                        help="smoke run: stream this long instead (does not outlive anything)")
    parser.add_argument("--interval-s", type=float, default=30.0, help="seconds between chunks")
    parser.add_argument("--chunk-rows", type=int, default=400_000, help="rows per chunk (16 B)")
    parser.add_argument("--run-dir", type=Path, default=None, help="stack state (default: temp)")
    parser.add_argument("--summary-json", type=Path, default=None, help="write a JSON summary")
    args = parser.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(args.engines) - set(ENGINES)
    if unknown or not args.engines:
        parser.error(f"--engines: unknown {sorted(unknown)}; choose from {sorted(ENGINES)}")
    if args.nodes < 1 or args.interval_s <= 0 or args.chunk_rows < 1 or args.margin_s < 0:
        parser.error("--nodes, --interval-s and --chunk-rows must be positive")
    return args


def _specs(args: argparse.Namespace, client: Any, info: StackInfo) -> list[StreamSpec]:
    """One catalog table per engine (created by the driver) and the task that streams into it."""
    namespace, warehouse = info.namespace, info.warehouse.name
    suffix = f"{int(time.time())}"
    specs = []
    for engine in args.engines:
        table = f"long_{engine.replace('-', '_')}_{suffix}"
        loaded = client.create(namespace, table, format=ENGINES[engine])
        specs.append(StreamSpec(
            engine=engine, namespace=namespace, table=table, location=loaded.base_location,
            warehouse=warehouse, region=info.s3.region, endpoint=info.s3.endpoint,
            chunk_rows=args.chunk_rows, interval_s=args.interval_s, margin_s=args.margin_s,
            stream_s=args.stream_s, max_s=STS_LIFETIME_S + args.margin_s + 300,
            raise_errors=not args.baseline,
        ))
    return specs


def _rows(client: Any, spec: StreamSpec) -> tuple[int, int]:
    """(rows, data objects) read back with a fresh credential, as another reader would."""
    creds = client.credentials(spec.namespace, spec.table, access="read")
    if spec.format == "parquet":
        import pyarrow.fs
        import pyarrow.parquet as pq

        # List, then open the files: a read credential may not allow HeadObject on the prefix.
        fs = creds.pyarrow_filesystem()
        selector = pyarrow.fs.FileSelector(spec.location.removeprefix("s3://"), recursive=True)
        files = [f.path for f in fs.get_file_info(selector) if f.path.endswith(".parquet")]
        return sum(pq.read_metadata(f, filesystem=fs).num_rows for f in files), len(files)
    if spec.format == "delta":
        from deltalake import DeltaTable

        table = DeltaTable(spec.location, storage_options=creds.delta_storage_options())
        return table.to_pyarrow_dataset().count_rows(), len(table.file_uris())
    import lance

    dataset = lance.dataset(spec.location, storage_options=creds.lance_storage_options())
    return dataset.count_rows(), sum(len(f.data_files()) for f in dataset.get_fragments())


def _stage_counts(spark: Any, group: str) -> tuple[int, int, int]:
    """(tasks, failed task attempts, tasks not completed) of the job group, from Spark."""
    tracker = spark.sparkContext.statusTracker()
    tasks = failed = completed = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else ():
            stage = tracker.getStageInfo(stage_id)
            if stage:
                tasks += stage.numTasks
                failed += stage.numFailedTasks
                completed += stage.numCompletedTasks
    return tasks, failed, tasks - completed


def _expired_in_logs(run_dir: Path) -> int:
    """Expired-credential errors the executors logged (also ones a library retried away)."""
    count = 0
    for path in run_dir.glob("node-*/work/*/*/stderr"):
        count += len(EXPIRED.findall(path.read_text(errors="replace")))
    return count


def _run(args: argparse.Namespace, say: Progress) -> dict[str, Any]:
    from demo import metrics
    from devstack.launcher import start_stack, stop_stack
    from devstack.spark_cluster import SparkCluster
    from devstack.spark_session import spark_session
    from lakegate_client import Client

    run_dir = (args.run_dir or Path(tempfile.mkdtemp(prefix="lakegate-long-"))).resolve()
    say(f"starting the local stack with {STS_LIFETIME_S} s STS credentials (state in {run_dir})")
    stack = start_stack(run_dir, with_gateway=False, sts_validity_s=STS_LIFETIME_S)
    try:
        info = stack.info
        os.environ["LAKEGATE_WAREHOUSE"] = info.warehouse.name
        cores = -(-len(args.engines) // args.nodes)  # every task runs at once
        with SparkCluster(run_dir, info, workers=args.nodes, cores_per_worker=cores,
                          transport="tcp", gateway_env=dict(GATEWAY_ENV)) as cluster:
            os.environ["LAKEGATE_URL"] = cluster.nodes[0].lakegate_url
            conf = dict(cluster.spark_conf(), **{"spark.task.maxFailures": "1"})
            spark = spark_session(cluster.master_url, "lakegate-long-job", conf)
            try:
                with Client(cluster.nodes[0].lakegate_url) as client:
                    specs = _specs(args, client, info)
                    say(f"{len(specs)} tasks, one per engine ({', '.join(args.engines)}), each"
                        " streaming one object until its first credential has expired"
                        if args.stream_s <= 0 else f"smoke: streaming {args.stream_s:.0f} s")
                    from demo.streams import run_stream

                    group = "long-job"
                    spark.sparkContext.setJobGroup(group, "streams across credential expiry")
                    t0 = time.monotonic()
                    error = ""
                    results: list[dict[str, Any]] = []
                    try:
                        rdd = spark.sparkContext.parallelize(specs, len(specs))
                        results = rdd.map(run_stream).collect()
                    except Exception as exc:  # noqa: BLE001 - counted and reported below
                        error = str(exc)
                    duration = time.monotonic() - t0
                    tasks, attempts_failed, not_completed = _stage_counts(spark, group)
                    say(f"job done in {duration:.0f} s; reading every table back")
                    failed = {r["engine"] for r in results if r["error"]}
                    checks = {s.engine: _rows(client, s) for s in specs
                              if s.engine not in failed} if not error else {}
            finally:
                spark.stop()
            nodes = metrics.read_counters(info, {n.name: n.gateway_http_url
                                                 for n in cluster.nodes}).nodes
        return _summary(args, results, checks, error, duration, tasks, attempts_failed,
                        not_completed, _expired_in_logs(run_dir), nodes)
    finally:
        stop_stack(run_dir)


def _summary(args: argparse.Namespace, results: list[dict[str, Any]],
             checks: dict[str, tuple[int, int]], error: str, duration: float, tasks: int,
             attempts_failed: int, not_completed: int, expired_logged: int,
             nodes: Any) -> dict[str, Any]:
    rows_ok = bool(results) and all(
        checks.get(r["engine"], (-1, 0))[0] == r["rows"] for r in results
    ) and len(results) == len(args.engines)
    return {
        "duration_s": round(duration, 1),
        "credential_lifetime_s": min((r["lifetime_s"] for r in results), default=0),
        "max_task_s": round(max((r["ended"] - r["started"] for r in results), default=0.0), 1),
        "tasks": tasks,
        "failed_tasks": not_completed,
        "task_retries": max(0, attempts_failed - not_completed),
        "expired_errors": expired_logged + len(EXPIRED.findall(error))
        + sum(len(EXPIRED.findall(r["error"])) for r in results),
        "formats": sorted({r["format"] for r in results}),
        "rows_ok": rows_ok,
        "streams": [
            {"engine": r["engine"], "format": r["format"], "node": r["node"],
             "task_s": round(r["ended"] - r["started"], 1),
             "first_credential_left_s": round(r["first_expiry"] - r["started"], 1),
             "outlived_first_credential": r["ended"] > r["first_expiry"],
             "rows": r["rows"], "chunks": r["chunks"],
             "rows_read": checks.get(r["engine"], (-1, 0))[0],
             "data_objects": checks.get(r["engine"], (-1, 0))[1],
             "error": r["error"]}
            for r in results
        ],
        "gateways": [
            {"name": n.name, "credential_requests": n.credential_requests,
             "upstream_credential_calls": n.upstream_credential_calls}
            for n in nodes
        ],
        "error": re.sub(r"\s+", " ", error)[:2000],
    }


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    say = Progress()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        with sigterm_interrupts():
            summary = _run(args, say)
    except KeyboardInterrupt:
        print("\nlong job interrupted; everything it started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    text = json.dumps(summary, indent=1)
    print(text, flush=True)
    if args.summary_json is not None:
        args.summary_json.write_text(text + "\n")
    ok = (summary["rows_ok"] and summary["failed_tasks"] == 0 and summary["task_retries"] == 0
          and summary["expired_errors"] == 0 and not summary["error"])
    if args.stream_s <= 0:
        ok = ok and all(s["outlived_first_credential"] for s in summary["streams"])
    say("long job OK" if ok else "long job FAILED")
    return EXIT_OK if ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
