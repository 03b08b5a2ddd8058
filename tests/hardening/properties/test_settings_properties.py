"""Property-based tests of settings loading: any environment either loads or is refused cleanly.

A refusal is a SettingsError whose message names env vars and never echoes a secret value.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.settings import Settings, SettingsError

PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIELDS = [
    "LAKEGATE__UPSTREAM__URL",
    "LAKEGATE__UPSTREAM__TIMEOUT_S",
    "LAKEGATE__UPSTREAM__DEADLINE_S",
    "LAKEGATE__UPSTREAM__MAX_RETRIES",
    "LAKEGATE__TOKEN__KIND",
    "LAKEGATE__TOKEN__TOKEN_URL",
    "LAKEGATE__TOKEN__CLIENT_ID",
    "LAKEGATE__TOKEN__AUTH_METHOD",
    "LAKEGATE__LISTEN__HOST",
    "LAKEGATE__LISTEN__HTTP_PORT",
    "LAKEGATE__CACHE__MIN_REMAINING_S",
    "LAKEGATE__CACHE__REFRESH_LEAD_S",
    "LAKEGATE__CACHE__MAX_ENTRIES",
    "LAKEGATE__CALLERS__MODE",
    "LAKEGATE__CALLERS__RATE_PER_S",
    "LAKEGATE__CALLERS__BURST",
    "LAKEGATE__LOG__LEVEL",
    "LAKEGATE__SHUTDOWN_GRACE_S",
]
values = (
    st.sampled_from(
        [
            "",
            "0",
            "-1",
            "1e309",
            "nan",
            "inf",
            "http://127.0.0.1:1",
            "none",
            "token",
            "jwt",
            "0.0.0.0",  # noqa: S104 - a hostile setting value, never bound
            "::1",
            "{}",
            "[]",
            "\x00",
        ]
    )
    | st.integers(-(10**12), 10**12).map(str)
    | st.text(max_size=20)
)
secret = st.text(string.ascii_letters + string.digits, min_size=12, max_size=40)


@PROFILE
@given(st.dictionaries(st.sampled_from(FIELDS), values, max_size=10), secret)
def test_any_environment_loads_or_is_refused_without_echoing_secrets(
    env: dict[str, str], client_secret: str
) -> None:
    environ = {
        **env,
        "LAKEGATE__TOKEN__CLIENT_SECRET": client_secret,
        "LAKEGATE__TOKEN__TOKEN": client_secret + "x",
    }
    try:
        loaded = Settings.load(environ=environ)
    except SettingsError as exc:
        message = str(exc)
        assert client_secret not in message
        assert "LAKEGATE__" in message
        return
    # Whatever loaded satisfies the documented invariants.
    assert loaded.cache.refresh_lead_s > loaded.cache.min_remaining_s
    assert loaded.upstream.timeout_s <= loaded.upstream.deadline_s
    assert client_secret not in repr(loaded)
    assert loaded.listen.is_loopback or loaded.callers.mode.value != "none"
