"""Command line: `lakegate serve`, `lakegate check`, `lakegate --version`.

The dev stack has its own entry point, `lakegate-devstack`. The only module that calls sys.exit.
"""

from __future__ import annotations

import argparse
import sys

from gateway import __version__


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="lakegate", description="Lakekeeper credential gateway")
    parser.add_argument("--version", action="version", version=f"lakegate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the gateway daemon", add_help=False)
    sub.add_parser(
        "check", help="check settings, IdP token, catalog and a warehouse", add_help=False
    )
    ns, rest = parser.parse_known_args(argv)
    if ns.command == "check":
        from gateway.check import run_check  # imports the upstream client only when checking

        return run_check(rest)
    from gateway.serve import run

    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
