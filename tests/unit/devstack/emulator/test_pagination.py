import base64
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devstack.emulator.errors import ApiError
from devstack.emulator.pagination import Cursor, clamp_page_size, decode_token, encode_token


@given(st.integers(min_value=0, max_value=2**62), st.uuids())
def test_token_round_trips(created, ident):
    cursor = Cursor(created, str(ident))
    assert decode_token(encode_token(cursor)) == cursor


def test_token_is_lakekeeper_shaped_urlsafe_base64_without_padding():
    ident = str(uuid.uuid4())
    token = encode_token(Cursor(123, ident))
    assert "=" not in token
    raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    assert raw == f"1&123&{ident}"


@pytest.mark.parametrize(
    "token",
    [
        "not-base64!!",
        base64.urlsafe_b64encode(b"2&1&x").decode(),
        base64.urlsafe_b64encode(b"1&abc&" + str(uuid.uuid4()).encode()).decode(),
        base64.urlsafe_b64encode(b"1&1&not-a-uuid").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
def test_undecodable_tokens_are_400(token):
    with pytest.raises(ApiError) as info:
        decode_token(token)
    assert (info.value.status, info.value.error_type) == (400, "InvalidPaginationToken")


@pytest.mark.parametrize(
    ("raw", "size"), [(None, 100), ("", 100), ("0", 1), ("-5", 1), ("7", 7), ("5000", 1000)]
)
def test_page_size_is_clamped_with_default_100(raw, size):
    assert clamp_page_size(raw) == size
