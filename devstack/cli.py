"""`lakegate-devstack up|down|status` / `python -m devstack` (not dispatched by the daemon)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from devstack.errors import DevstackError
from devstack.gateway_proc import gateway_available
from devstack.launcher import Stack, start_stack, stop_stack
from devstack.runstate import running_processes


def _summary(stack: Stack) -> str:
    i = stack.info
    lines = [
        f"local stack up in {i.startup_s}s (state in {stack.run_dir})",
        f"  IdP       {i.idp.issuer}  (clients: {', '.join(i.idp.clients)})",
        f"  S3 + STS  {i.s3.endpoint}  bucket {i.s3.bucket}",
        f"  catalog   {i.catalog.url}  auth={'on' if i.catalog.auth else 'off'}",
        f"  warehouse {i.warehouse.name} = {i.warehouse.id}",
        f"  namespace {i.namespace}",
    ]
    if i.gateway is not None:
        lines.append(f"  gateway   {i.gateway.http_url}  grpc {i.gateway.grpc_target}")
    lines.append(f"  details   {stack.run_dir / 'stack.json'}; stop with `python -m devstack down`")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """`lakegate-devstack up|down|status`; returns the exit code."""
    parser = argparse.ArgumentParser(prog="lakegate-devstack")
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start the local stack")
    up.add_argument("--dir", type=Path, default=Path(".devstack"))
    up.add_argument("--no-gateway", action="store_true", help="do not start the gateway")
    up.add_argument("--token-ttl", type=int, default=3600, help="IdP access-token lifetime (s)")
    up.add_argument("--sts-validity", type=int, default=3600, help="vended credential lifetime (s)")
    up.add_argument("--no-auth", action="store_true", help="catalog emulator without authn")
    up.add_argument("--soft-delete", action="store_true", help="soft delete profile")
    up.add_argument(
        "--storage", action="append", choices=("adls", "gcs"), default=[],
        help="also run Azurite (adls) or fake-gcs-server (gcs), each with its warehouse",
    )
    down = sub.add_parser("down", help="stop the local stack")
    down.add_argument("--dir", type=Path, default=Path(".devstack"))
    status = sub.add_parser("status", help="show what runs")
    status.add_argument("--dir", type=Path, default=Path(".devstack"))
    args = parser.parse_args(list(argv))
    try:
        if args.action == "up":
            with_gateway = not args.no_gateway
            if with_gateway and not gateway_available():
                print("gateway package not importable; starting without it", file=sys.stderr)
                with_gateway = False
            stack = start_stack(
                args.dir,
                with_gateway=with_gateway,
                token_ttl_s=args.token_ttl,
                sts_validity_s=args.sts_validity,
                catalog_auth=not args.no_auth,
                soft_delete=args.soft_delete,
                storages=("s3", *dict.fromkeys(args.storage)),
            )
            print(_summary(stack))
            return 0
        if args.action == "down":
            stopped = stop_stack(args.dir)
            print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
            return 0
        alive = running_processes(args.dir)
        print(json.dumps({n: r.pid for n, r in alive.items()}))
        return 0 if alive else 1
    except DevstackError as exc:
        print(f"devstack: {exc}", file=sys.stderr)
        return 1


def console_main() -> int:
    """The `lakegate-devstack` console script (its wrapper passes the result to sys.exit)."""
    return main(sys.argv[1:])
