"""The `events` settings: TLS material goes in pairs, and which credentials cross in clear."""

import pytest

from gateway.settings import SettingsError
from tests.fakes.settings import make_settings

NATS = {"EVENTS__NATS_ADDRESS": "nats://127.0.0.1:4222", "EVENTS__NATS_TOPIC": "lk"}


def test_a_client_certificate_needs_its_key() -> None:
    with pytest.raises(SettingsError, match="NATS_TLS_CERT_FILE"):
        make_settings(**NATS, EVENTS__NATS_TLS_CERT_FILE="/c.pem")


@pytest.mark.parametrize(("env", "tls", "in_clear"), [
    ({"EVENTS__NATS_TOKEN": "t"}, False, True),
    ({"EVENTS__NATS_USER": "u", "EVENTS__NATS_PASSWORD": "p"}, False, True),
    ({"EVENTS__NATS_NKEY_SEED_FILE": "/s.nk"}, False, False),  # signs a nonce only
    ({"EVENTS__NATS_CREDS_FILE": "/u.creds"}, False, False),
    ({"EVENTS__NATS_TOKEN": "t", "EVENTS__NATS_TLS_CA_FILE": "/ca.pem"}, True, False),
    ({"EVENTS__NATS_TOKEN": "t", "EVENTS__NATS_ADDRESS": "tls://127.0.0.1:4222"}, True, False),
    ({}, False, False),
])
def test_which_credentials_cross_a_plaintext_connection(
    env: dict[str, str], tls: bool, in_clear: bool
) -> None:
    events = make_settings(**{**NATS, **env}).events
    assert (events.tls, events.secret_in_clear) == (tls, in_clear)


def test_the_half_open_check_defaults_to_seconds() -> None:
    events = make_settings(**NATS).events
    assert (events.max_outstanding_pings + 1) * events.ping_interval_s == 6
