"""``python -m demo``: run the Lakegate demo end to end; exit 0 on success, non-zero with a reason.

Why one process owns everything: the demo starts the local stack (IdP, SeaweedFS, catalog emulator,
gateway) and a Spark session, and must stop all of them on success, failure, Ctrl-C or SIGTERM.
This is the only module that exits.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from demo.progress import Progress

if TYPE_CHECKING:
    from devstack.launcher import Stack

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
_DESCRIPTION = "Run the Lakegate demo: local stack + gateway + a PySpark pipeline over it."


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=_DESCRIPTION)
    parser.add_argument("--workers", type=int, default=2, help="Spark local[N] (default 2)")
    parser.add_argument("--rows", type=int, default=6000, help="raw order lines (default 6000)")
    parser.add_argument("--files", type=int, default=4, help="raw CSV files (default 4)")
    parser.add_argument(
        "--transport", choices=("grpc", "http"), default="grpc",
        help="how tasks reach the gateway: gRPC or HTTP, both over its Unix socket",
    )
    parser.add_argument("--run-dir", type=Path, default=None, help="stack state (default: temp)")
    parser.add_argument(
        "--keep-running", action="store_true",
        help="leave the stack up at the end (stop it with `lakegate devstack down --dir DIR`)",
    )
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error("--workers must be at least 2 (the point is several Python workers)")
    if args.rows < 100 or not 1 <= args.files <= args.rows:
        parser.error("--rows must be at least 100 and --files between 1 and --rows")
    return args


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def _stack(run_dir: Path, keep_running: bool, say: Progress) -> Iterator[Stack]:
    """Start the local stack with the gateway; always stop it (unless asked to keep it)."""
    from devstack.launcher import start_stack, stop_stack

    say(f"starting the local stack and the gateway (state in {run_dir})")
    try:
        stack = start_stack(run_dir, with_gateway=True)
        say("stack ready: IdP, SeaweedFS (S3+STS), catalog emulator, Lakegate gateway")
        yield stack
    finally:
        if keep_running:
            say(f"stack left running: stop it with `lakegate devstack down --dir {run_dir}`")
        else:
            say("stopping the local stack")
            stop_stack(run_dir)


def _gateway_env(info: dict[str, Any], transport: str) -> None:
    """Point this process and the Spark workers it forks at the gateway's Unix sockets."""
    gateway = info["gateway"]
    url = f"grpc+unix:{gateway['grpc_uds']}" if transport == "grpc" else f"unix:{gateway['uds']}"
    os.environ["LAKEGATE_URL"] = url
    os.environ["LAKEGATE_WAREHOUSE"] = info["warehouse"]["name"]
    os.environ.setdefault("NO_PROXY", "localhost,127.0.0.1")
    os.environ.setdefault("LANCE_LOG", "error")  # Lance warns "will be created" per fragment
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def _run(args: argparse.Namespace, say: Progress) -> None:
    from demo import data, metrics, pipeline, report
    from lakegate_client import Client

    temp = args.run_dir is None
    run_dir = Path(tempfile.mkdtemp(prefix="lakegate-demo-")) if temp else args.run_dir.resolve()
    ok = False
    try:
        with _stack(run_dir, args.keep_running, say) as stack:
            info = stack.info
            _gateway_env(info, args.transport)
            drop = data.generate(args.rows, args.files)
            url = os.environ["LAKEGATE_URL"]
            say(f"starting Spark local[{args.workers}]; tasks use LAKEGATE_URL={url}")
            spark = pipeline.spark_session(args.workers)
            try:
                with Client() as client:
                    run = pipeline.run(spark, client, info["namespace"], drop, say)
            finally:
                spark.stop()
            counters = metrics.read_counters(info)
            text = report.render(
                run, counters, info, say.elapsed_s, kept_running=args.keep_running
            )
            print(text, flush=True)
            ok = True
    finally:
        if temp and ok and not args.keep_running:
            shutil.rmtree(run_dir, ignore_errors=True)
        elif not ok:
            print(f"logs of the stack are in {run_dir}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    say = Progress()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        _run(args, say)
    except KeyboardInterrupt:
        print("\ndemo interrupted; everything it started was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the demo's boundary: say why, exit non-zero
        print(f"\ndemo FAILED after {say.elapsed_s:.0f} s: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return EXIT_FAILED
    finally:
        signal.signal(signal.SIGTERM, previous)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
