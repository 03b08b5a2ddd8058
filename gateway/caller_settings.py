"""The `callers` settings section: who may ask, and how they prove it.

Kept apart from settings.py (which imports and re-exports both names) so that module stays
within its size budget, as events_settings.py.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.settings_sources import env_name


class CallerMode(StrEnum):
    NONE = "none"
    TOKEN = "token"  # noqa: S105 - a mode name
    JWT = "jwt"


class CallerSettings(BaseModel):
    """Who may ask (deploy/README.md, "Security model")."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: CallerMode = CallerMode.NONE
    tokens_file: Path | None = None
    jwks_url: str | None = None
    # The in-cluster JWKS (https://kubernetes.default.svc/openid/v1/jwks) needs the cluster CA and
    # a bearer token; the token file is re-read per fetch (kubelet rotates it).
    ca_file: Path | None = None
    bearer_token_file: Path | None = None
    issuer: str | None = None
    audience: str | None = None
    name_claim: str = "sub"
    policy_file: Path | None = None
    rate_per_s: float = Field(default=0.0, ge=0)
    burst: int = Field(default=100, ge=1)
    auth_failures_per_s: float = Field(default=2.0, ge=0)  # per token, per peer; 0: off
    auth_failure_burst: int = Field(default=50, ge=1)
    # the longest a request refused for failed authentications waits before its 429
    auth_failure_delay_s: float = Field(default=1.0, ge=0, le=10)
    allow_project_header: bool = False  # false: a project header other than the default -> 403

    @model_validator(mode="after")
    def _check(self) -> CallerSettings:
        if self.mode is CallerMode.TOKEN and not self.tokens_file:
            raise ValueError(
                f"{env_name('callers', 'mode')}=token requires {env_name('callers', 'tokens_file')}"
            )
        if self.mode is CallerMode.JWT:
            missing = [
                env_name("callers", n) for n in ("jwks_url", "audience") if not getattr(self, n)
            ]
            if missing:
                raise ValueError(
                    f"{env_name('callers', 'mode')}=jwt requires {', '.join(missing)}"
                )
        return self
