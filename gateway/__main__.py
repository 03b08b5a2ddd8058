"""Command line: `lakegate serve` (the dev stack has its own entry point, `lakegate-devstack`).

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
    _ns, rest = parser.parse_known_args(argv)
    from gateway.app import run  # "serve" is the only command

    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
