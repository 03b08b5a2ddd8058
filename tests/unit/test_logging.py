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
    TextFormatter,
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
    "&sig=abc%2B", "%26sig%3Dx", "ya29.a0Af", "-----BEGIN PRIVATE KEY-----", "AccountKey=k==",
    "api_key=1", "X-Goog-Signature=ab", "-----END PRIVATE KEY-----", "sig", "private", "%3D",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=12))
def test_the_cheap_check_never_changes_what_is_masked(parts: list[str]) -> None:
    """Redactor skips the substitutions when its cheap check finds no possible secret shape;
    that must give exactly what running every substitution gives."""
    text = "".join(parts)
    assert Redactor().redact(text) == mask_shapes(text)


# ---- identifiers and unsafe characters (issue #28, finding 6) ----------------------------------

LONG_TABLE = "CustomerOrdersHistoricalSnapshotPartitionedByRegionAndDateWithExtraColumnsForAuditV2"
STS_TOKEN = "FwoGZXIvYXdzEJr//////////wEaDHqa0AP1n2Rk5KiY9CKwAc" + "Xy7Zq9K3bLm" * 8


def _audit_record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("lakegate.audit", logging.INFO, "f", 1, "credential hit", (), None)
    for key, value in {"audit": "credential", "caller": "alice", "warehouse": "demo",
                       "namespace": "a.b", "table": "orders", **extra}.items():
        setattr(record, key, value)
    return record


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_a_long_mixed_case_table_name_is_not_hidden(fmt: str) -> None:
    assert len(LONG_TABLE) >= 80  # the blob shape: masked before
    redactor = Redactor()
    formatter = JsonFormatter(redactor) if fmt == "json" else TextFormatter(redactor)
    out = formatter.format(_audit_record(table=LONG_TABLE, namespace=LONG_TABLE))
    assert out.count(LONG_TABLE) == 2
    assert MASK not in out


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_real_secrets_are_still_hidden_next_to_identifiers(fmt: str) -> None:
    redactor = Redactor(("cs-9f8e7d6c5b4a",))
    formatter = JsonFormatter(redactor) if fmt == "json" else TextFormatter(redactor)
    out = formatter.format(_audit_record(table="t-cs-9f8e7d6c5b4a", detail=STS_TOKEN,
                                         header="Authorization: Bearer abc.def"))
    assert STS_TOKEN not in out
    assert "abc.def" not in out
    assert "cs-9f8e7d6c5b4a" not in out  # a known secret is masked even in an identifier
    assert "t-***" in out


@pytest.mark.parametrize("char", ["\x85", "\x9b", "\u2028", "\u2029", "\u202e", "\u2066", "\u200b"])
def test_c1_bidi_and_separators_are_escaped_in_json_lines(char: str) -> None:
    out = JsonFormatter(Redactor()).format(_audit_record(caller=f"ev{char}il", path=f"/x{char}"))
    assert char not in out
    assert f"\\u{ord(char):04x}" in out
    doc = json.loads(out)
    assert (doc["caller"], doc["path"]) == (f"ev{char}il", f"/x{char}")  # still the same JSON


@pytest.mark.parametrize("char", ["\n", "\r", "\x1b", "\x85", "\u2028", "\u202e"])
def test_text_lines_cannot_be_split_or_disguised(char: str) -> None:
    out = TextFormatter(Redactor()).format(_audit_record(caller=f"ev{char}il", path=f"/x{char}"))
    assert char not in out
    assert "\n" not in out


def test_the_text_audit_line_names_the_caller_and_the_table() -> None:
    out = TextFormatter(Redactor()).format(_audit_record(access="read", outcome="hit"))
    for part in ('caller="alice"', 'warehouse="demo"', 'namespace="a.b"', 'table="orders"',
                 'access="read"', 'outcome="hit"'):
        assert part in out


# ---- every kind of storage secret, at DEBUG and INFO (issue 50, item 7) -------------------------

SAS_SIG = "Zm9vYmFyYmF6cXV4cXV1eA%2B%2Fk7Xq9Lp3%3D"
ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")
GOOGLE_TOKEN = "ya29.a0AfB_byC3xq9Lp3Zm9vYmFyYmF6"  # noqa: S105 - planted, not a secret
URL_SIGNATURE = "4f1b2c3d" * 8
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
# (what is logged, the secret part that must not appear)
STORAGE_SECRETS = {
    "sas in a blob url": (
        "GET http://127.0.0.1:10000/devstoreaccount1/warehouse/t/part-0.parquet"
        f"?sv=2024-08-04&sr=d&sdd=2&sp=rl&se=2026-12-08T00%3A00%3A00Z&sig={SAS_SIG} 200",
        SAS_SIG),
    "sas percent-encoded inside a query": (
        f"redirect=https%3A%2F%2Fa.blob%2Fc%3Fsv%3D2024%26sig%3D{SAS_SIG}", SAS_SIG),
    "sas in a config map": (
        f"{{'adls.sas-token.devstoreaccount1.127.0.0.1': 'sv=2024-08-04&sr=c&sig={SAS_SIG}'}}",
        SAS_SIG),
    "azure account key": (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={ACCOUNT_KEY[:40]};",
        ACCOUNT_KEY[:40]),
    "google access token": (f"{{'gcs.oauth2.token': '{GOOGLE_TOKEN}'}}", GOOGLE_TOKEN),
    "google token in a header": (f"x-goog-token {GOOGLE_TOKEN}", GOOGLE_TOKEN),
    "s3 presigned url": (
        "https://s3/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAIOSFODNN7EXAMPLE"
        f"%2F20261208%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature={URL_SIGNATURE}",
        URL_SIGNATURE),
    "gcs signed url": (f"https://storage/b/k?X-Goog-Signature={URL_SIGNATURE}", URL_SIGNATURE),
    "private key": (
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        f'{PEM_BODY}\\n-----END PRIVATE KEY-----\\n"}}', PEM_BODY),
    "api key": ("api_key=k-31f9a0b7c2d4", "k-31f9a0b7c2d4"),
}


@pytest.mark.parametrize("level", [logging.DEBUG, logging.INFO])
@pytest.mark.parametrize("fmt", ["json", "text"])
@pytest.mark.parametrize("what", sorted(STORAGE_SECRETS))
def test_no_storage_secret_reaches_the_output(level: int, fmt: str, what: str) -> None:
    """A planted secret of each kind, through the message, its args, an extra field and a
    traceback, on the gateway's logger and on a library's (httpx and aiohttp log URLs)."""
    text, secret = STORAGE_SECRETS[what]
    stream = io.StringIO()
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    handler = configure_logging(logging.getLevelName(level), fmt, Redactor(), stream)
    try:
        for name in ("lakegate.test", "httpx", "aiohttp.client"):
            log = logging.getLogger(name)
            log.log(level, text)
            log.log(level, "request %s", text)
            log.log(level, "request", extra={"url": text})
            try:
                raise RuntimeError(text)
            except RuntimeError:
                log.log(level, "failed", exc_info=True)
    finally:
        root.removeHandler(handler)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
    out = stream.getvalue()
    assert out.count("\n") >= 12
    assert secret not in out
    assert MASK in out
