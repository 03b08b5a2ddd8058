"""`python -m devstack up|down|status`: the dev stack's own entry point (not part of the daemon)."""

from __future__ import annotations

import sys

from devstack.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
