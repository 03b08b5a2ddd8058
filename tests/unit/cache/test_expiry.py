from hypothesis import given
from hypothesis import strategies as st

from gateway.cache.expiry import credential_set, is_expiry_key, parse_expiry_ms, storage_credential

PLAUSIBLE = st.integers(min_value=946_684_800_000, max_value=32_503_680_000_000)
EXPIRY_KEYS = st.sampled_from([
    "s3.session-token-expires-at-ms",
    "expiration-time",
    "gcs.oauth2.token-expires-at",
    "adls.sas-token-expires-at-ms.account.dfs.core.windows.net",
])


@given(st.dictionaries(EXPIRY_KEYS, PLAUSIBLE, min_size=1))
def test_earliest_expiry_key_wins(values):
    config = {k: str(v) for k, v in values.items()}
    config["s3.access-key-id"] = "AK"
    assert parse_expiry_ms(config) == min(values.values())


@given(st.dictionaries(st.text(max_size=30), st.text(max_size=30)))
def test_parse_never_raises_and_ignores_non_expiry_keys(config):
    result = parse_expiry_ms(config)
    expiry_values = [v for k, v in config.items() if is_expiry_key(k)]
    if not expiry_values:
        assert result is None
    else:
        assert result is None or str(result) in [v.strip() for v in expiry_values]


@given(EXPIRY_KEYS, st.one_of(st.text(max_size=20), st.integers(max_value=946_684_799_999)))
def test_garbage_or_implausible_values_give_no_expiry(k, value):
    text = str(value)
    if text.strip().isascii() and text.strip().isdigit() and \
            946_684_800_000 <= int(text.strip()) <= 32_503_680_000_000:
        return
    assert parse_expiry_ms({k: text}) is None


def test_expiry_in_seconds_by_mistake_is_not_trusted():
    assert parse_expiry_ms({"expiration-time": "1800000000"}) is None


def test_set_expiry_is_the_earliest_of_its_credentials():
    a = storage_credential("s3://b/a", {"expiration-time": "1800000100000"})
    b = storage_credential("s3://b/b", {"expiration-time": "1800000050000"})
    c = storage_credential("s3://b/c", {})
    s = credential_set([a, b, c])
    assert s.expires_at_ms == 1_800_000_050_000
    assert s.location == "s3://b/a"


def test_empty_credential_list_has_no_expiry():
    s = credential_set([])
    assert s.expires_at_ms is None
    assert s.credentials == ()
