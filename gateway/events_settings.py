"""The `events` settings section: the catalog's change events (Lakekeeper's NATS sink).

Named like Lakekeeper's own (`LAKEKEEPER__NATS_ADDRESS`, `NATS_TOPIC`, `NATS_USER`,
`NATS_PASSWORD`, `NATS_TOKEN`, `NATS_CREDS_FILE`), under `LAKEGATE__EVENTS__`, plus what
Lakekeeper's publisher does not need and a subscriber does: TLS with a CA file and a client
certificate, an nkey seed, a fast half-open check (pings) and bounds on what an event may cost.
Kept apart from settings.py (which imports it) so that module stays within its size budget.
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
    # A bare nkey seed file (`SU...`): the seed signs the server's nonce and never leaves.
    nats_nkey_seed_file: Path | None = None
    # TLS (`tls://`, or a `nats://` server that requires it): a CA bundle for the server's
    # certificate (default: the system store) and a client certificate and key (mutual TLS).
    nats_tls_ca_file: Path | None = None
    nats_tls_cert_file: Path | None = None
    nats_tls_key_file: Path | None = None
    # A half-open connection is noticed after (max_outstanding_pings + 1) * ping_interval_s
    # (6 s by default; nats-py's own defaults take 6 minutes), and a subscription is confirmed
    # by a flush within flush_timeout_s.
    ping_interval_s: float = Field(default=2.0, gt=0, le=120)
    max_outstanding_pings: int = Field(default=2, ge=1, le=10)
    flush_timeout_s: float = Field(default=2.0, gt=0, le=60)
    # What one event may cost: larger messages are refused unread (and count as a lost event:
    # the short identity TTL applies until resynchronised); events of one table beyond
    # table_events_per_s (burst table_event_burst) are dropped the same way; at most
    # max_pending_events wait for the consumer, more are dropped by the client (counted).
    max_event_bytes: int = Field(default=256 * 1024, ge=1024, le=8 << 20)
    table_events_per_s: float = Field(default=5.0, gt=0, le=10_000)
    table_event_burst: int = Field(default=20, ge=1, le=100_000)
    max_pending_events: int = Field(default=10_000, ge=10, le=1_000_000)
    # All events together beyond events_per_s (burst event_burst) are dropped unread the same
    # way: a flood costs the loop one token-bucket check per message, not a parse each.
    events_per_s: float = Field(default=1_000.0, gt=0, le=1_000_000)
    event_burst: int = Field(default=2_000, ge=1, le=1_000_000)
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
        if bool(self.nats_tls_cert_file) != bool(self.nats_tls_key_file):
            raise ValueError(f"{env_name('events', 'nats_tls_cert_file')} and "
                             f"{env_name('events', 'nats_tls_key_file')} go together")
        return self

    @property
    def tls(self) -> bool:
        """TLS is asked for (a `tls://` address, a CA file or a client certificate)."""
        return bool((self.nats_address or "").startswith("tls://") or self.nats_tls_ca_file
                    or self.nats_tls_cert_file)

    @property
    def secret_in_clear(self) -> bool:
        """A password or token would cross a plaintext `nats://` connection (an nkey or a
        creds file only sign the server's nonce: their secret never leaves)."""
        return not self.tls and (self.nats_password is not None or self.nats_token is not None)
