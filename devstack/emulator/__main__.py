"""`python -m devstack.emulator --config emulator.json`: run the catalog emulator."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from aiohttp import web

from devstack.emulator.app import create_app
from devstack.emulator.config import EmulatorConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="devstack.emulator")
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args(argv)
    config = EmulatorConfig.from_file(args.config)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    auth = "on" if config.openid_provider_uri else "off"
    print(f"catalog emulator on http://{config.host}:{config.port} auth={auth}", flush=True)
    web.run_app(
        create_app(config),
        host=config.host,
        port=config.port,
        access_log=None,
        print=None,
        shutdown_timeout=2.0,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
