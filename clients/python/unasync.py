"""Generate the blocking ``Client`` from the asyncio ``AsyncClient`` (one source, as httpcore does).

`python clients/python/unasync.py` rewrites ``lakegate_client/_sync_client.py`` from
``lakegate_client/_async_client.py``; ``--check`` fails when the committed file differs from what
it would write (run by ``make test`` and clients/python/tests/test_unasync.py).

Why generated rather than written twice: the two facades had the same methods, arguments and
docstrings, and every change (the memo's identity rule, a new argument) had to be made twice
and kept in step by hand. The rules are plain word substitutions, in order; a line the rules
would get wrong gets its own entry in ``PHRASES``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent / "src" / "lakegate_client"
SOURCE = PACKAGE / "_async_client.py"
TARGET = PACKAGE / "_sync_client.py"

HEADER = '''"""Client, the blocking facade: GENERATED from ``_async_client.py`` by
``clients/python/unasync.py`` (``make unasync``). Do not edit: edit ``_async_client.py``.
"""
'''

# Whole phrases first (docstrings), then words.
PHRASES: tuple[tuple[str, str], ...] = (
    ("Asyncio client: every method is awaited, ``async with`` or ``aclose()`` releases it.",
     "Blocking client for executors and drivers: ``with`` or ``close()`` releases it."),
)
WORDS: tuple[tuple[str, str], ...] = (
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\bAsyncClient\b", "Client"),
    (r"\bAsyncTransport\b", "SyncTransport"),
    (r"\bAsyncTablePager\b", "TablePager"),
    (r"\bAsyncHttpTransport\b", "SyncHttpTransport"),
    (r"\bAsyncGrpcTransport\b", "SyncGrpcTransport"),
    (r"\baclose\b", "close"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
)
_MODULE_DOCSTRING = re.compile(r'\A"""(?:.|\n)*?"""\n')


def unasync(source: str) -> str:
    """The blocking module for the asyncio module ``source``."""
    body = _MODULE_DOCSTRING.sub("", source, count=1)
    for phrase, replacement in PHRASES:
        if phrase not in body:
            raise SystemExit(f"unasync: phrase no longer in {SOURCE.name}: {phrase!r}")
        body = body.replace(phrase, replacement)
    for pattern, replacement in WORDS:
        body = re.sub(pattern, replacement, body)
    return HEADER + body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help=f"fail when {TARGET.name} is not what would be generated")
    args = parser.parse_args(argv)
    wanted = unasync(SOURCE.read_text(encoding="utf-8"))
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != wanted:
            print(f"{TARGET} is stale: run `make unasync` (python clients/python/unasync.py)",
                  file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
