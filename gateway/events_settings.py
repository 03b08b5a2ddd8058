"""The `events` settings section: the catalog's change events (Lakekeeper's NATS sink).

Named like Lakekeeper's own (`LAKEKEEPER__NATS_ADDRESS`, `NATS_TOPIC`, `NATS_USER`,
`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_CREDS_FILE`), under `LAKEGATE__EVENTS__`. Kept apart from
settings.py (which imports it) so that module stays within its size budget.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from gateway.settings_sources import env_name


class EventsSettings(BaseModel):
    """Subscribe to the catalog's change events; on when address and topic are both set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nats_address: str | None = None
    nats_topic: str | None = None
    nats_user: str | None = None
    nats_password: SecretStr | None = None
    nats_token: SecretStr | None = None
    nats_creds_file: Path | None = None
    # The identity TTL while the subscription is up (events invalidate at once; this bounds what
    # a lost event leaves). While it is down, `cache.identity_ttl_s` applies.
    identity_ttl_s: float = Field(default=300.0, gt=0, le=3600)

    @property
    def enabled(self) -> bool:
        return bool(self.nats_address and self.nats_topic and self.nats_topic.strip())

    @model_validator(mode="after")
    def _check(self) -> EventsSettings:
        if self.nats_address and not self.nats_address.startswith(("nats://", "tls://")):
            raise ValueError(f"{env_name('events', 'nats_address')} must be a nats:// URL")
        if bool(self.nats_user) != bool(self.nats_password):
            raise ValueError(f"{env_name('events', 'nats_user')} and "
                             f"{env_name('events', 'nats_password')} go together")
        return self
