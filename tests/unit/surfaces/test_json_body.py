"""The one JSON body parser (gateway/surfaces/json_body.py): explicit limits, 400/413, no crash."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidRequestError, PayloadTooLargeError
from gateway.surfaces.json_body import MAX_DEPTH, MAX_ITEMS, parse_json, parse_json_object


def nested(depth: int) -> bytes:
    return b'{"a":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 100_000, "nested deeper"),
        (b'{"a":' * 50_000, "nested deeper"),
        (nested(MAX_DEPTH + 1), "nested deeper"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": -Infinity}', "Infinity"),
        (b'{"a": 1e999}', "out of range"),
        (b'{"a": ' + b"9" * 5000 + b"}", "out of range"),
        (b'{"a": 18446744073709551616}', "out of range"),
        (b'{"a": -9223372036854775809}', "out of range"),
        (b'{"a": 1, "a": 2}', "duplicate keys"),
        (b'{"a": "\xff"}', "UTF-8"),
        ('{"a": 1}'.encode("utf-16"), "UTF-8"),
        (b'{"a": "\\ud800"}', "UTF-8"),
        (b'{"a": [' + b"0," * MAX_ITEMS + b"0]}", f"more than {MAX_ITEMS}"),
        (b"{" + b",".join(b'"k%d":0' % i for i in range(MAX_ITEMS + 1)) + b"}",
         f"more than {MAX_ITEMS}"),
        (b"\xef\xbb\xbf{}", "not valid JSON"),
        (b'{"a": "' + b'\\"' * 10_000, "not valid JSON"),
        (b"", "not valid JSON"),
    ],
    ids=["100k-[", "50k-{a:", "depth+1", "nan", "-inf", "1e999", "5000-digits", "2**64",
         "-2**63-1", "duplicate-keys", "invalid-utf8", "utf16", "lone-surrogate", "items+1",
         "keys+1", "bom", "unterminated", "empty"],
)
def test_hostile_documents_are_invalid_requests(raw: bytes, message: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        parse_json(raw)
    assert message in info.value.message
    assert info.value.status == 400


@pytest.mark.parametrize("raw", [b"[]", b"null", b"1", b'"s"', b"true"])
def test_a_body_must_be_an_object(raw: bytes) -> None:
    assert not isinstance(parse_json(raw), dict)  # valid JSON, just not an object
    with pytest.raises(InvalidRequestError, match="JSON object"):
        parse_json_object(raw, 1024)


def test_the_limits_themselves_are_accepted() -> None:
    value, depth = parse_json(nested(MAX_DEPTH)), 0
    while isinstance(value, (dict, list)):
        value, depth = (value["a"] if isinstance(value, dict) else (value or [None])[0]), depth + 1
    assert depth == MAX_DEPTH
    doc = parse_json_object(b'{"name": "t\\u00e9", "n": [-9223372036854775808, '
                            b'18446744073709551615, 1.5, true, null], '
                            b'"emoji": "\\ud83d\\ude00"}', 1024)
    assert doc == {"name": "té", "n": [-(2**63), 2**64 - 1, 1.5, True, None], "emoji": "😀"}
    assert len(parse_json(b"[" + b"0," * (MAX_ITEMS - 1) + b"0]")) == MAX_ITEMS


def test_a_body_over_the_size_limit_is_413() -> None:
    with pytest.raises(PayloadTooLargeError) as info:
        parse_json_object(b'{"a": "' + b"x" * 100 + b'"}', 64)
    assert info.value.status == 413
