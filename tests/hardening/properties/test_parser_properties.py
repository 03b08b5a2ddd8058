"""Property-based tests (hypothesis) of the gateway's parsers: hostile input never crashes.

Each parser either returns a valid value or raises its own typed error (a 400 or a start-up
refusal), never an unexpected exception that a surface would turn into a 500. The number of
examples is modest so these stay a small share of `make test`; `python -m hardening` runs the
network-level fuzzers with far more cases.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from gateway.cache.expiry import credential_set, is_expiry_key, parse_expiry_ms, storage_credential
from gateway.errors import GatewayError
from gateway.logging import Redactor
from gateway.models import AccessMode, CacheKey, join_namespace, split_namespace
from gateway.names import fold_namespace, fold_table
from gateway.surfaces.http_codec import (
    NAMESPACE_SEPARATOR,
    decode_segment,
    parse_access,
    parse_bool,
    parse_namespace,
    parse_page_size,
)
from gateway.surfaces.policy import PolicyFileError, parse_rules

PROFILE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MIN_MS = 946_684_800_000
MAX_MS = 32_503_680_000_000

expiry_keys = st.sampled_from(
    [
        "s3.session-token-expires-at-ms",
        "expiration-time",
        "gcs.oauth2.token-expires-at",
        "adls.sas-token-expires-at-ms.acct",
        "s3.access-key-id",
        "s3.secret-access-key",
        "region",
    ]
)
hostile_text = st.text(st.characters(codec="utf-8"), max_size=40) | st.integers(
    -(10**20), 10**20
).map(str)
level = st.text(
    st.characters(codec="utf-8", exclude_characters=NAMESPACE_SEPARATOR), min_size=1, max_size=20
)


# ---- expiry keys (gateway/cache/expiry.py) --------------------------------------------------


@PROFILE
@given(st.dictionaries(expiry_keys | st.text(max_size=30), hostile_text, max_size=8))
@example({"s3.session-token-expires-at-ms": "1755693600000", "expiration-time": "1755693500000"})
@example(
    {"s3.session-token-expires-at-ms": "١٧٥٥٦٩٣٦٠٠٠٠٠"}
)  # Arabic-Indic digits: isdigit() but not ASCII
@example({"s3.session-token-expires-at-ms": " 1755693600000 "})
@example({"s3.session-token-expires-at-ms": "1755693600"})  # seconds, not ms
def test_expiry_is_none_or_the_earliest_plausible_epoch_ms(config: dict[str, str]) -> None:
    result = parse_expiry_ms(config)
    candidates = []
    for key, value in config.items():
        text = value.strip()
        if (
            is_expiry_key(key)
            and text.isascii()
            and text.isdigit()
            and MIN_MS <= int(text) <= MAX_MS
        ):
            candidates.append(int(text))
    assert result == (min(candidates) if candidates else None)
    if result is not None:
        assert MIN_MS <= result <= MAX_MS


@PROFILE
@given(st.lists(st.dictionaries(expiry_keys, hostile_text, max_size=4), max_size=5))
def test_credential_set_never_outlives_any_of_its_credentials(
    configs: list[dict[str, str]],
) -> None:
    creds = [storage_credential("s3://b/t", c) for c in configs]
    result = credential_set(creds)
    for cred in creds:
        if cred.expires_at_ms is not None:
            assert result.expires_at_ms is not None
            assert result.expires_at_ms <= cred.expires_at_ms
    if all(c.expires_at_ms is None for c in creds):
        assert result.expires_at_ms is None


@PROFILE
@given(st.text(max_size=60))
def test_only_expiry_keys_are_recognised_as_expiry(key: str) -> None:
    assume(
        key
        not in {"s3.session-token-expires-at-ms", "expiration-time", "gcs.oauth2.token-expires-at"}
    )
    assume(not key.startswith("adls.sas-token-expires-at-ms."))
    assert not is_expiry_key(key)


# ---- names and namespaces (gateway/models.py, gateway/surfaces/http_codec.py) ---------------


@PROFILE
@given(st.lists(level, min_size=1, max_size=6))
def test_namespace_join_then_split_roundtrips(parts: list[str]) -> None:
    assert split_namespace(join_namespace(parts)) == tuple(parts)


@PROFILE
@given(st.text(max_size=50))
def test_split_namespace_rejects_only_with_value_error(segment: str) -> None:
    try:
        parts = split_namespace(segment)
    except ValueError:
        assert segment == "" or "" in segment.split(NAMESPACE_SEPARATOR)
    else:
        assert all(parts)


@PROFILE
@given(
    st.lists(
        st.text(st.characters(codec="utf-8"), max_size=3)
        | st.sampled_from(["%", "%1F", "%2F", "%FF", "%C3", "%00", "%7"]),
        max_size=30,
    ).map("".join)
)
@example("%FF%FE")
@example("a%1F%1Fb")
@example("%00")
@example("a" * 5000)
def test_path_segment_decoding_raises_only_gateway_errors(raw: str) -> None:
    for what in ("warehouse", "namespace", "table"):
        try:
            value = decode_segment(raw, what)
            if what == "namespace":
                parse_namespace(value)
        except GatewayError as exc:
            status = exc.http_status
            assert status == 400


@PROFILE
@given(st.lists(level, min_size=1, max_size=4), level, st.data())
def test_cache_key_ignores_case_like_lakekeeper(
    namespace: list[str], table: str, data: st.DataObject
) -> None:
    def respell(s: str) -> str:
        flips = data.draw(st.lists(st.booleans(), min_size=len(s), max_size=len(s)))
        return "".join(c.swapcase() if f else c for c, f in zip(s, flips, strict=True))

    a = CacheKey.of(
        project=None,
        warehouse_id="WH-1",
        namespace=tuple(namespace),
        table=table,
        access=AccessMode.READ,
    )
    b_namespace, b_table = tuple(respell(p) for p in namespace), respell(table)
    b = CacheKey.of(
        project=None,
        warehouse_id="wh-1",
        namespace=b_namespace,
        table=b_table,
        access=AccessMode.READ,
    )
    # swapcase is not always fold-stable (e.g. 'ß'), so compare with the one comparison form
    # (gateway.names, as the policy sees names); a respelled ASCII name is always the same.
    same = fold_namespace(namespace) == fold_namespace(b_namespace)
    same = same and fold_table(table, plus_is_space=False) == fold_table(
        b_table, plus_is_space=False)
    assert (a == b) == same
    if table.isascii() and all(p.isascii() for p in namespace):
        assert a == b
    if a == b:
        assert hash(a) == hash(b)


@PROFILE
@given(st.one_of(st.none(), st.text(max_size=12)))
def test_query_parameters_parse_or_raise_400(value: str | None) -> None:
    for parse in (parse_access, lambda v: parse_bool(v, "purge", False), parse_page_size):
        try:
            parse(value)
        except GatewayError as exc:
            status = exc.http_status
            assert status == 400


# ---- caller policy file (gateway/surfaces/policy.py) ------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=10,
)
rule = st.fixed_dictionaries(
    {},
    optional={
        "warehouse": json_values,
        "namespace": json_values,
        "table": json_values,
        "access": json_values | st.sampled_from(["read", "write", ["read", "write"], "READ", []]),
    },
)
policy_doc = json_values | st.fixed_dictionaries(
    {
        "callers": st.dictionaries(
            st.text(max_size=8), st.lists(rule, max_size=3) | json_values, max_size=3
        )
    }
)


@PROFILE
@given(policy_doc)
def test_policy_documents_parse_or_raise_policy_file_error(doc: object) -> None:
    try:
        rules = parse_rules(doc, "policy.yaml")
    except PolicyFileError:
        return
    for caller_rules in rules.values():
        for r in caller_rules:
            assert r.access <= {AccessMode.READ, AccessMode.WRITE}


@pytest.mark.parametrize("access", [None, 5])
def test_scalar_access_in_policy_is_a_policy_file_error(access: object) -> None:
    with pytest.raises(PolicyFileError):
        parse_rules({"callers": {"alice": [{"access": access}]}}, "policy.yaml")


# ---- log redaction (gateway/logging.py) -------------------------------------------------------

secret_text = st.text(string.ascii_letters + string.digits + "-_./+=", min_size=8, max_size=64)
noise = st.text(st.characters(codec="utf-8"), max_size=40)


@PROFILE
@given(secret_text, noise, noise)
def test_registered_secret_never_survives_redaction(secret: str, before: str, after: str) -> None:
    redactor = Redactor((secret,))
    assert secret not in redactor.redact(before + secret + after)


@PROFILE
@given(
    st.from_regex(r"ASIA[A-Z0-9]{16}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9/+]{40}", fullmatch=True),
)
def test_vended_keys_are_redacted_without_registration(key_id: str, secret: str) -> None:
    line = f'fetched {{"s3.access-key-id": "{key_id}", "s3.secret-access-key": "{secret}"}}'
    out = Redactor().redact(line)
    assert key_id not in out
    assert secret not in out


@pytest.mark.parametrize("header", ["Bearer ", "bearer ", "Basic "])
@PROFILE
@given(token=st.text(string.ascii_letters + string.digits + "-._~+/", min_size=8, max_size=80))
def test_authorization_values_are_redacted(header: str, token: str) -> None:
    assume(token not in "upstream call Authorization: failed")  # noqa: S105 - not a password
    assert token not in Redactor().redact(f"upstream call Authorization: {header}{token} failed")
