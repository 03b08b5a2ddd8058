"""HTTP request parsing (gateway/surfaces/http_codec.py): raw segments, queries, bodies."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidRequestError
from gateway.surfaces.http_codec import (
    decode_segment,
    namespace_list,
    parse_namespace,
    parse_page_size,
    rename_pair,
    split_target,
)


def test_split_target_keeps_segments_encoded() -> None:
    assert split_target("/v1/a%2Fb/c?x=1") == (["v1", "a%2Fb", "c"], "x=1")
    assert split_target("/") == ([], "")


def test_percent_encoded_slash_and_unit_separator() -> None:
    assert decode_segment("a%2Fb", "table") == "a/b"
    assert parse_namespace(decode_segment("a%1Fb", "namespace")) == ("a", "b")


@pytest.mark.parametrize(
    ("raw", "what"),
    [("%FF", "table"), ("", "table"), ("a%2Fb", "warehouse"), ("%2E%2E", "table"),
     ("a%00b", "table")],
)
def test_bad_segments_are_400(raw: str, what: str) -> None:
    with pytest.raises(InvalidRequestError):
        decode_segment(raw, what)


@pytest.mark.parametrize("decoded", ["a\x1f\x1fb", "a.b", "\x1f", "a\x1fb\x1fc\x1fd\x1fe\x1ff"])
def test_bad_namespaces_are_400(decoded: str) -> None:
    with pytest.raises(InvalidRequestError):
        parse_namespace(decoded)


@pytest.mark.parametrize("value", [None, "a", [], [1], ["ok", ""], {"a": 1}])
def test_json_namespaces_must_be_arrays_of_names(value: object) -> None:
    with pytest.raises(InvalidRequestError):
        namespace_list(value)


def test_page_size_is_parsed_here_and_bounded_by_the_service() -> None:
    assert parse_page_size(None) is None
    assert parse_page_size("5000") == 5000
    with pytest.raises(InvalidRequestError):
        parse_page_size("ten")


def test_rename_pair_checks_both_names() -> None:
    body = {"source": {"namespace": ["a"], "name": "t"},
            "destination": {"namespace": ["b"], "name": "u"}}
    assert rename_pair(body) == ((("a",), "t"), (("b",), "u"))
    for bad in ({"source": 1, "destination": {}},
                {**body, "destination": {"namespace": ["b"], "name": ".."}},
                {**body, "source": {"namespace": "a", "name": "t"}}):
        with pytest.raises(InvalidRequestError):
            rename_pair(bad)
