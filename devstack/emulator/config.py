"""Emulator settings, read once from a JSON file written by the launcher (or built in tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

LAKEKEEPER_MAX_BODY_BYTES = 32 * 1024 * 1024


class EmulatorConfig(BaseModel):
    """Everything the emulator process needs to start."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = 8181
    db_path: str = ":memory:"
    # OpenID provider base URL; None = no-auth mode (the Authorization header is ignored).
    openid_provider_uri: str | None = None
    audiences: list[str] = ["urn:lakekeeper"]
    read_role_id: str | None = None
    write_role_id: str | None = None
    max_body_bytes: int = LAKEKEEPER_MAX_BODY_BYTES
    idempotency_lifetime_s: int = 1800
    # Seconds between a drop with purgeRequested and the purge of the table's files
    # (Lakekeeper queues a task; its poll interval defaults to 10 s). None = never purge.
    purge_delay_s: float | None = 2.0
    # Change events (Lakekeeper's LAKEKEEPER__NATS_ADDRESS / NATS_TOPIC): both set = publish.
    nats_address: str | None = None
    nats_topic: str | None = None
    # ADLS SAS scope: `container` (sr=c, enforced by Azurite) or `directory` (sr=d, what
    # Lakekeeper vends; Azurite refuses it, the stack's devstack/adls_guard.py enforces it: the
    # launcher starts the emulator with `directory`).
    adls_sas_scope: Literal["container", "directory"] = "container"

    @classmethod
    def from_file(cls, path: Path) -> EmulatorConfig:
        return cls.model_validate_json(path.read_text())
