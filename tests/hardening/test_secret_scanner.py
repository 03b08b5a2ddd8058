"""The log secret scanner: every secret shape is found, redacted forms are not, values
never leak."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hardening.secret_scanner import SecretScanner, fingerprint

SECRET_40 = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # noqa: S105 - AWS docs example
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0."
    "eyJzdWIiOiJnYXRld2F5IiwiYXVkIjoidXJuOmxha2VrZWVwZXIifQ."
    "c2lnbmF0dXJlLWJ5dGVzLWFyZS1oZXJlLWFuZC1sb25n"
)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("vended key ASIAQWERTYUIOPASDFGH for table", "aws_access_key_id"),
        ("static AKIAIOSFODNN7EXAMPLE", "aws_access_key_id"),
        (f'{{"s3.secret-access-key": "{SECRET_40}"}}', "aws_secret_access_key"),
        (f"SecretAccessKey={SECRET_40}", "aws_secret_access_key"),
        (f"token {JWT}", "jwt"),
        ("Authorization: Bearer abcdef0123456789xyz", "bearer_token"),
        ('{"s3.session-token": "FwoGZXIvYXdzEJr//////////wEaDK9"}', "session_token"),
        ('{"Token": "IQoJb3JpZ2luX2VjEJr0123456789abcdef"}', "session_token"),
        ("client_secret=s3cr3t-value-123", "client_secret"),
        ('"client-secret": "gateway-secret-xyz"', "client_secret"),
    ],
)
def test_each_secret_shape_is_found(line: str, kind: str) -> None:
    kinds = [k for k, _ in SecretScanner().scan_line(line)]
    assert kind in kinds


@pytest.mark.parametrize(
    "line",
    [
        "Authorization: Bearer ***",
        "Authorization: Bearer <redacted>",
        '{"client_secret": "**********"}',
        '{"s3.secret-access-key": "***redacted***"}',
        "client_secret=<redacted>",
        "GET /v1/warehouses/demo/namespaces/demo_ns/tables/orders/credentials 200 1.2ms",
        '{"event": "refresh", "outcome": "hit", "remaining_s": 2890.4}',
        "token_url=http://127.0.0.1:4000/token",
    ],
)
def test_redacted_and_ordinary_lines_are_not_findings(line: str) -> None:
    assert list(SecretScanner().scan_line(line)) == []


def test_planted_values_are_found_in_any_shape() -> None:
    scanner = SecretScanner(planted=["caller-token-alice-0001"])
    findings = scanner.scan_text("debug: header x=caller-token-alice-0001;", "gw.log")
    assert [(f.kind, f.line) for f in findings] == [("planted", 1)]


def test_short_planted_values_are_ignored_to_avoid_accidental_matches() -> None:
    scanner = SecretScanner(planted=["abc"])
    assert scanner.planted_count == 0
    assert scanner.scan_text("abc abc") == []


def test_findings_never_contain_the_secret_itself(tmp_path: Path) -> None:
    log = tmp_path / "gateway.log"
    log.write_text(
        json.dumps({"msg": "fetched", "key": "ASIAQWERTYUIOPASDFGH", "secret_key": SECRET_40})
        + "\n"
    )
    files, findings = SecretScanner(planted=[SECRET_40]).scan_paths([tmp_path])
    assert files == 1
    assert {f.kind for f in findings} == {"aws_access_key_id", "planted"}
    rendered = " ".join(f.describe() for f in findings)
    assert SECRET_40 not in rendered
    assert "ASIAQWERTYUIOPASDFGH" not in rendered
    assert fingerprint(SECRET_40) in rendered


def test_scan_paths_reads_only_log_like_files_recursively(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.log").write_text("Bearer abcdef0123456789xyz\n")
    (tmp_path / "a" / "data.parquet").write_bytes(b"Bearer abcdef0123456789xyz")
    files, findings = SecretScanner().scan_paths([tmp_path])
    assert files == 1
    assert len(findings) == 1
    assert findings[0].path.endswith("x.log")


def test_one_value_matched_by_two_detectors_is_reported_once() -> None:
    scanner = SecretScanner(planted=[JWT])
    assert [k for k, _ in scanner.scan_line(f"Bearer {JWT}")] == ["planted"]
