"""Malformed client requests log one concise, counted WARNING; real server errors keep theirs."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp.http_exceptions import BadHttpMessage, BadStatusLine

from gateway.server_log import SERVER_LOGGER, MalformedRequestFilter
from tests.fakes.clock import FakeClock
from tests.rawsocket import exchange
from tests.unit.app_harness import app_for, running, settings_for
from tests.unit.surfaces.fake_operations import FakeOperations

PLANTED = "planted-secret-token-value"


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logged():
    """A private logger carrying the filter, and what reached its handler."""
    clock = FakeClock()
    counted: list[int] = []
    logger = logging.getLogger("tests.server_log.private")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = Collect()
    logger.addHandler(handler)
    filt = MalformedRequestFilter(lambda: counted.append(1), clock.monotonic, interval_s=10)
    logger.addFilter(filt)
    yield logger, handler.records, counted, clock
    logger.removeFilter(filt)
    logger.removeHandler(handler)


def log_exception(logger: logging.Logger, exc: Exception) -> None:
    try:
        raise exc
    except Exception:
        logger.exception("Error handling request from %s", "127.0.0.1")


def test_a_parse_error_becomes_one_warning_without_traceback_or_client_bytes(logged):
    logger, records, counted, _ = logged
    log_exception(logger, BadStatusLine(f"GET /x?token={PLANTED} HTTP/1.1 junk"))
    assert counted == [1]
    [record] = records
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    assert record.getMessage() == "malformed HTTP request rejected"
    assert record.error_type == "BadStatusLine"
    assert record.status == 400
    assert PLANTED not in str(vars(record))


def test_a_flood_is_counted_in_full_but_logged_once_per_interval(logged):
    logger, records, counted, clock = logged
    for _ in range(500):
        log_exception(logger, BadHttpMessage("Missing Host header"))
    assert len(counted) == 500
    assert len(records) == 1
    clock.advance(11)
    log_exception(logger, BadHttpMessage("Missing Host header"))
    assert len(records) == 2
    assert records[1].suppressed == 499


def test_a_genuine_server_error_still_logs_with_its_traceback(logged):
    logger, records, counted, _ = logged
    log_exception(logger, RuntimeError("handler bug"))
    assert counted == []
    [record] = records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


async def test_the_gateway_counts_malformed_requests_and_logs_no_error(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger=SERVER_LOGGER)
    settings = settings_for(tmp_path, LAKEGATE__SHUTDOWN_GRACE_S="2")
    async with running(app_for(settings, FakeOperations())) as app:
        assert app.http_port
        for raw in (
            b"GET /livez HTTP/1.1\r\n\r\n",  # no Host header
            f"GET /livez?token={PLANTED} HTTP/1.1 junk\r\nHost: a\r\n\r\n".encode(),
            f"GET /livez HTTP/1.1\r\nHost: a\r\nBad Header: {PLANTED}\r\n\r\n".encode(),
        ):
            assert (await exchange(app.http_port, raw)).startswith(b"HTTP/1.")
        assert app.metrics.registry.get_sample_value(
            "lakegate_ingress_rejected_total", {"reason": "malformed"}) == 3
    server = [r for r in caplog.records if r.name == SERVER_LOGGER]
    assert len(server) == 1
    assert server[0].levelno == logging.WARNING
    assert not any(r.exc_info for r in server)
    assert PLANTED not in caplog.text
    assert not logging.getLogger(SERVER_LOGGER).filters  # removed on shutdown


async def test_a_client_dribbling_its_headers_is_dropped_after_the_idle_timeout(tmp_path):
    settings = settings_for(tmp_path, LAKEGATE__LISTEN__IDLE_TIMEOUT_S="0.3",
                            LAKEGATE__SHUTDOWN_GRACE_S="2")
    async with running(app_for(settings, FakeOperations())) as app:
        assert app.http_port
        reader, writer = await asyncio.open_connection("127.0.0.1", app.http_port)
        try:
            got = b""
            async with asyncio.timeout(10):  # a bound, not a measurement
                for part in (b"GET /livez HTTP/1.1\r\n", b"Host: a\r\n", b"X-Slow: 1\r\n"):
                    writer.write(part)
                    await writer.drain()
                    await asyncio.sleep(0.1)
                while chunk := await reader.read(1024):  # b"" once the server closed it
                    got += chunk
            assert got == b""  # closed without ever answering the incomplete request
        finally:
            writer.close()
