"""Settings for unit tests, built from a dict like the environment (no os.environ reads)."""

from __future__ import annotations

from gateway.settings import Settings
from tests.fakes.catalog import CATALOG_URL, TOKEN_URL


def make_settings(**env: str) -> Settings:
    """Settings with the fake catalog/IdP and small windows; `env` keys drop `LAKEGATE__`."""
    base = {
        "UPSTREAM__URL": CATALOG_URL,
        "TOKEN__KIND": "client_credentials",
        "TOKEN__TOKEN_URL": TOKEN_URL,
        "TOKEN__CLIENT_ID": "gateway",
        "TOKEN__CLIENT_SECRET": "planted-client-secret",
        "UPSTREAM__BACKOFF_BASE_S": "0.1",
        "UPSTREAM__BACKOFF_MAX_S": "1",
    }
    base.update(env)
    return Settings.load(environ={f"LAKEGATE__{k}": v for k, v in base.items()})
