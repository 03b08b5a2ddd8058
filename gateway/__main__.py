"""Command line: `lakegate serve` and `lakegate devstack up|down`.

The only module that calls sys.exit.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="lakegate", description="Lakekeeper credential gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the gateway daemon", add_help=False)
    sub.add_parser("devstack", help="start/stop the local stack", add_help=False)
    ns, rest = parser.parse_known_args(argv)
    if ns.command == "serve":
        from gateway.app import run

        return run(rest)
    from devstack.launcher import cli

    return cli(rest)


if __name__ == "__main__":
    sys.exit(main())
