"""JSON log lines with request ids; secrets masked whatever path they take."""

from __future__ import annotations

import io
import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.logging import (
    MASK,
    JsonFormatter,
    Redactor,
    configure_logging,
    mask_shapes,
    request_id_var,
)

PLANTED = {
    "client secret": "cs-9f8e7d6c5b4a",
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXBhcnQ",
    "access key": "ASIAIOSFODNN7EXAMPLE",
    "session token": "FwoGZXIvYXdzE" + "A" * 200,
}


@pytest.fixture
def capture() -> tuple[io.StringIO, logging.Handler]:
    stream = io.StringIO()
    redactor = Redactor(("cs-9f8e7d6c5b4a",))
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    handler = configure_logging("DEBUG", "json", redactor, stream)
    yield stream, handler
    root.removeHandler(handler)
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_has_fields_request_id_and_extras(capture) -> None:
    stream, _ = capture
    token = request_id_var.set("req-42")
    try:
        logging.getLogger("lakegate.test").info("hello %s", "world", extra={"table": "t1"})
    finally:
        request_id_var.reset(token)
    (doc,) = lines(stream)
    assert doc["msg"] == "hello world"
    assert doc["level"] == "INFO"
    assert doc["logger"] == "lakegate.test"
    assert doc["request_id"] == "req-42"
    assert doc["table"] == "t1"
    assert doc["ts"].endswith("+00:00")


@pytest.mark.parametrize("what", sorted(PLANTED))
def test_planted_secrets_never_reach_the_output(capture, what: str) -> None:
    stream, _ = capture
    secret = PLANTED[what]
    log = logging.getLogger("lakegate.test")
    log.warning("value %s", secret)
    log.warning("in extra", extra={"detail": f"Authorization: Bearer {secret}"})
    try:
        raise ValueError(f"client_secret={secret}")
    except ValueError:
        log.exception("boom")
    out = stream.getvalue()
    assert secret not in out
    assert MASK in out


@pytest.mark.parametrize(
    "text",
    [
        "client_secret=abc123xyz&grant_type=client_credentials",
        '{"s3.secret-access-key": "wJalrXUtnFEMI/K7MDENG"}',
        "Authorization: Basic dXNlcjpwYXNz",
        "token=opaque-caller-token",
    ],
)
def test_secret_shapes_are_masked(text: str) -> None:
    out = Redactor().redact(text)
    for secret in ("abc123xyz", "wJalrXUtnFEMI/K7MDENG", "dXNlcjpwYXNz", "opaque-caller-token"):
        assert secret not in out


@pytest.mark.parametrize(
    "text",
    [
        "GET /v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials 200",
        "location s3://warehouse/lakehouse/68b406d7-dbcb-4862-b6dd-a57f322a2642/"
        "9d7536a3-791f-463f-b49a-b0c7148de7cd/cae49bec-ca0e-413c-ba70-f144a0fcf4a3",
        "next_page_token=3",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor().redact(text) == text


def test_formatter_is_usable_without_handler_filter() -> None:
    record = logging.LogRecord("x", logging.INFO, "f", 1, "tok %s", ("cs-9f8e7d6c5b4a",), None)
    out = JsonFormatter(Redactor(("cs-9f8e7d6c5b4a",))).format(record)
    assert "cs-9f8e7d6c5b4a" not in out


_FRAGMENTS = [
    "Bearer abc.def", "basic dXNlcjpwYXNz", "eyJhbGciOi.eyJzdWIiOi.sig_-x", "client_secret=s3cr3t",
    '"session_token": "FwoGZXIvYXdz"', "ASIAQWERTYUIOPASDFGH", "AKIA1234567890ABCD", "token=t0k",
    "x-amz-security-token: Zm9v", "A" * 85, "a/b" * 30, "next_page_token=3", "password: hunter2",
    " ", "\n", '"', "=", ":", "&", "access", "token", "secret", "ey", "AKIA",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=12))
def test_the_cheap_check_never_changes_what_is_masked(parts: list[str]) -> None:
    """Redactor skips the substitutions when its cheap check finds no possible secret shape;
    that must give exactly what running every substitution gives."""
    text = "".join(parts)
    assert Redactor().redact(text) == mask_shapes(text)
