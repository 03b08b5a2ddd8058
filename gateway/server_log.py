"""Malformed client input on aiohttp's server logger: one counted, rate-limited WARNING line.

aiohttp logs every request it cannot parse (bad request line, missing Host, bad header,
bad Content-Length, a body whose chunking or Content-Encoding does not decode) at ERROR with a
full traceback, and the exception text quotes the raw request line or header, which may carry
a token. That is client noise, not a server fault, and anyone who can connect can flood the
log with it. Genuine server errors (any other
exception on that logger) pass through untouched, traceback included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from gateway.tuning import MALFORMED_LOG_INTERVAL_S

SERVER_LOGGER = "aiohttp.server"



class MalformedRequestFilter(logging.Filter):
    """Counts every malformed request; lets at most one concise line per interval through.

    The line names the parse error's type and status only (never its message, which quotes
    the client's bytes), and how many more were suppressed since the previous line.

    Args:
        on_malformed: called once per malformed request (the ingress-rejected counter).
        monotonic: time source for the rate limit.
        interval_s: at most one line per this many seconds.
    """

    def __init__(self, on_malformed: Callable[[], None], monotonic: Callable[[], float], *,
                 interval_s: float = MALFORMED_LOG_INTERVAL_S) -> None:
        super().__init__()
        self._on_malformed = on_malformed
        self._monotonic = monotonic
        self._interval_s = interval_s
        self._next_line_mono = float("-inf")
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RequestPayloadError):  # a body the client framed or encoded badly
            cause = exc.__cause__
            exc = cause if isinstance(cause, HttpProcessingError) else HttpProcessingError(code=400)
        if not isinstance(exc, HttpProcessingError):
            return True
        self._on_malformed()
        now = self._monotonic()
        if now < self._next_line_mono:
            self._suppressed += 1
            return False
        self._next_line_mono = now + self._interval_s
        level = min(record.levelno, logging.WARNING)  # aiohttp logs some at DEBUG already
        record.levelno, record.levelname = level, logging.getLevelName(level)
        record.msg = "malformed HTTP request rejected"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        record.error_type = type(exc).__name__
        record.status = exc.code
        record.suppressed = self._suppressed
        self._suppressed = 0
        return True
