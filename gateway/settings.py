"""Configuration: loaded once at the edge into one typed, validated object, then passed down.

This and gateway/settings_sources.py are the only modules that read the environment or a config
file. Precedence: defaults < YAML file (`--config` / `LAKEGATE_CONFIG_FILE`) < secrets directory
(`LAKEGATE_SECRETS_DIR`: one file per setting, named as its env var) <
`LAKEGATE__<SECTION>__<FIELD>` env.
Every error names the env var to fix, so an operator never has to map a pydantic `loc` by hand.
"""

from __future__ import annotations

import ipaddress
import os
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from gateway.caller_settings import CallerMode as CallerMode  # re-exported, as is
from gateway.caller_settings import CallerSettings as CallerSettings  # the section
from gateway.events_settings import EventsSettings
from gateway.settings_sources import (
    CONFIG_FILE_ENV,
    ENV_PREFIX,
    SECRETS_DIR_ENV,
    GivenEnvSource,
    SourceError,
    YamlFileSource,
    format_validation_error,
    read_config_file,
    secrets_source,
)
from gateway.settings_sources import env_name as env_name  # re-exported: every layer uses it


class SettingsError(Exception):
    """Invalid configuration; the message names the env var(s) to fix (no secret values)."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UpstreamSettings(_Section):
    """The Lakekeeper catalog the gateway talks to."""

    url: str
    project_id: str | None = None
    read_role_id: str | None = None
    write_role_id: str | None = None
    timeout_s: float = Field(default=10.0, gt=0)
    deadline_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    backoff_base_s: float = Field(default=0.1, gt=0)
    backoff_max_s: float = Field(default=5.0, gt=0)
    pool_size: int = Field(default=100, ge=1)
    # Page sizes every surface accepts for list calls: 1..max_page_size (Lakekeeper's own
    # LAKEKEEPER__PAGINATION_SIZE_MAX defaults to 1000).
    max_page_size: int = Field(default=1000, ge=1)
    # TLS to the catalog and the IdP: a private CA bundle, and a client certificate (mTLS).
    ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    # HTTP(S)_PROXY / NO_PROXY from the environment apply to upstream calls.
    trust_env: bool = True
    # Fail closed: a caller the policy limits to read needs read_role_id (else its credential is
    # vended with the gateway's own read-write permission); true accepts that, with a warning.
    allow_read_without_read_role: bool = False

    @model_validator(mode="after")
    def _check(self) -> UpstreamSettings:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"{env_name('upstream', 'url')} must be an http(s) URL")
        if self.client_key_file is not None and self.client_cert_file is None:
            raise ValueError(
                f"{env_name('upstream', 'client_key_file')} requires "
                f"{env_name('upstream', 'client_cert_file')}"
            )
        return self

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")


class TokenKind(StrEnum):
    NONE = "none"
    STATIC = "static"
    FILE = "file"
    CLIENT_CREDENTIALS = "client_credentials"


class AuthMethod(StrEnum):
    CLIENT_SECRET_BASIC = "client_secret_basic"  # noqa: S105 - a method name, not a secret
    CLIENT_SECRET_POST = "client_secret_post"  # noqa: S105


class TokenSettings(_Section):
    """How the gateway obtains its ONE upstream session token."""

    kind: TokenKind = TokenKind.CLIENT_CREDENTIALS
    token_url: str | None = None
    client_id: str | None = None
    client_secret: SecretStr | None = None
    # The secret from a file (a mounted Secret) instead of the environment.
    client_secret_file: Path | None = None
    auth_method: AuthMethod = AuthMethod.CLIENT_SECRET_BASIC
    scope: str | None = None
    audience: str | None = None
    resource: str | None = None
    token: SecretStr | None = None
    path: Path | None = None
    refresh_fraction: float = Field(default=0.8, gt=0.1, lt=1.0)
    timeout_s: float = Field(default=10.0, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    file_check_s: float = Field(default=1.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> TokenSettings:
        if self.client_secret is None and self.client_secret_file is not None:
            try:
                secret = self.client_secret_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ValueError(
                    f"{env_name('token', 'client_secret_file')}={self.client_secret_file}: "
                    f"cannot read ({type(exc).__name__})"
                ) from exc
            object.__setattr__(self, "client_secret", SecretStr(secret) if secret else None)
        missing: list[str] = []
        if self.kind is TokenKind.CLIENT_CREDENTIALS:
            for name in ("token_url", "client_id", "client_secret"):
                if not getattr(self, name):
                    missing.append(env_name("token", name))
        elif self.kind is TokenKind.STATIC and not self.token:
            missing.append(env_name("token", "token"))
        elif self.kind is TokenKind.FILE and not self.path:
            missing.append(env_name("token", "path"))
        if missing:
            raise ValueError(
                f"{env_name('token', 'kind')}={self.kind.value} requires {', '.join(missing)}"
            )
        return self


class ListenSettings(_Section):
    """Where the HTTP and gRPC surfaces listen."""

    _HOSTS: ClassVar[str] = r"^\s*([\w-][\w.-]*(\s*,\s*[\w-][\w.-]*)*)?\s*$"  # no port, no *
    host: str = "127.0.0.1"
    http_port: int = Field(default=8765, ge=0, le=65535)
    grpc_port: int = Field(default=8766, ge=0, le=65535)
    http_uds: Path | None = None
    grpc_uds: Path | None = None
    ports_file: Path | None = None
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    # An HTTP connection that has not completed a request this long after it opened (or after
    # its last answer) is closed: bounds idle keep-alive and slow header senders (slowloris).
    idle_timeout_s: float = Field(default=75.0, gt=0)
    # Probes (/livez, /readyz) and /metrics on their own listener, never credentials: the pod IP
    # can serve kubelet and Prometheus while credentials stay on the sockets. None: they stay on
    # the HTTP listener.
    ops_host: str = "127.0.0.1"
    ops_port: int | None = Field(default=None, ge=0, le=65535)
    allowed_hosts: str = Field(default="", pattern=_HOSTS)  # Host names besides loopback
    # The daemon on Linux: while gRPC calls overlap (concurrent callers), its other threads
    # (gRPC's poller and core threads) run SCHED_BATCH so they stop preempting the event loop
    # (gateway/helper_threads.py). False: they keep the default policy.
    grpc_batch_threads: bool = True

    @property
    def is_loopback(self) -> bool:
        """Whether the TCP bind host is loopback only (so caller auth may be off)."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


class CacheSettings(_Section):
    """The credential cache windows and bounds (docs/contracts.md §3)."""

    min_remaining_s: float = Field(default=300.0, ge=0)
    refresh_lead_s: float = Field(default=900.0, gt=0)
    refresh_jitter: float = Field(default=0.1, ge=0, lt=0.5)
    max_entries: int = Field(default=10_000, ge=1)
    idle_s: float = Field(default=1800.0, gt=0)
    negative_ttl_s: float = Field(default=5.0, ge=0)
    no_expiry_ttl_s: float = Field(default=60.0, ge=0)
    refresh_rate_per_s: float = Field(default=20.0, gt=0)
    metadata_ttl_s: float = Field(default=5.0, ge=0, le=10)
    warehouse_ttl_s: float = Field(default=60.0, ge=0)
    # Longest a cached answer's table identity goes unconfirmed (one metadata load, no STS).
    identity_ttl_s: float = Field(default=30.0, gt=0, le=3600)


class LogSettings(_Section):
    level: str = "INFO"
    format: str = "json"
    # The `lakegate.audit` lines (independent of `level`; gateway/audit.py, contracts §6).
    audit: bool = True
    # Read grants served without an upstream call of their own (hit, coalesced) are folded into
    # one line per (caller, table, access, outcome, surface) per interval, with a count and the
    # first and last time; 0 writes one line per request (a line costs about as much CPU as
    # serving a cached credential).
    audit_interval_s: float = Field(default=10.0, ge=0.0, le=3600.0)

    @model_validator(mode="after")
    def _check(self) -> LogSettings:
        if self.level.upper() not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"{env_name('log', 'level')} must be DEBUG|INFO|WARNING|ERROR")
        if self.format not in {"json", "text"}:
            raise ValueError(f"{env_name('log', 'format')} must be json|text")
        return self


class Settings(BaseSettings):
    """The whole gateway configuration (docs/contracts.md §3)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        case_sensitive=False,
        extra="forbid",  # a typo in an env var name must fail loudly, not be ignored
        frozen=True,
    )
    _file_data: ClassVar[dict[str, Any]] = {}
    _environ: ClassVar[dict[str, str] | None] = None
    _secrets_dir: ClassVar[Path | None] = None

    upstream: UpstreamSettings
    token: TokenSettings
    listen: ListenSettings = Field(default_factory=ListenSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    callers: CallerSettings = Field(default_factory=CallerSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    events: EventsSettings = Field(default_factory=EventsSettings)
    shutdown_grace_s: float = Field(default=10.0, ge=0)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Earlier sources win: init kwargs > env > secrets directory > file > defaults.
        env = env_settings if cls._environ is None else GivenEnvSource(settings_cls, cls._environ)
        sources: list[PydanticBaseSettingsSource] = [init_settings, env]
        if cls._secrets_dir is not None:
            sources.append(secrets_source(settings_cls, cls._secrets_dir))
        return (*sources, YamlFileSource(settings_cls, cls._file_data))

    @model_validator(mode="before")
    @classmethod
    def _sections_present(cls, data: Any) -> Any:
        # Absent sections validate as empty ones, so errors name the missing FIELD
        # (LAKEGATE__UPSTREAM__URL) and the token kind default (client_credentials) applies.
        if isinstance(data, dict):
            data = dict(data)
            data.setdefault("upstream", {})
            data.setdefault("token", {})
        return data

    @model_validator(mode="after")
    def _cross_field(self) -> Settings:
        problems: list[str] = []
        c = self.cache
        if c.refresh_lead_s <= c.min_remaining_s:
            problems.append(
                f"{env_name('cache', 'refresh_lead_s')} must be greater than "
                f"{env_name('cache', 'min_remaining_s')}"
            )
        if not self.listen.is_loopback and self.callers.mode is CallerMode.NONE:
            problems.append(
                f"{env_name('listen', 'host')}={self.listen.host} is not loopback: set "
                f"{env_name('callers', 'mode')} to token or jwt"
            )
        if self.upstream.timeout_s > self.upstream.deadline_s:
            problems.append(
                f"{env_name('upstream', 'timeout_s')} must not exceed "
                f"{env_name('upstream', 'deadline_s')}"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def warnings(self) -> list[str]:
        """Soft invariants worth a log line at start, not a refusal to start.

        The refresh queue must be able to refresh every hot key once inside the lead window;
        a small lead in a test setup is legitimate, so this is advice, not an error.
        """
        out: list[str] = []
        up = self.upstream
        if up.allow_read_without_read_role and up.read_role_id is None:
            out.append(
                f"{env_name('upstream', 'allow_read_without_read_role')} is set and "
                f"{env_name('upstream', 'read_role_id')} is not: callers limited to read by the "
                "policy receive the read-write credentials of the gateway's own principal"
            )
        c = self.cache
        if c.refresh_rate_per_s * c.refresh_lead_s < c.max_entries / 2:
            out.append(
                f"{env_name('cache', 'refresh_rate_per_s')} x {env_name('cache', 'refresh_lead_s')}"
                f" < {env_name('cache', 'max_entries')}/2: hot keys may miss refresh-ahead"
            )
        return out

    def secret_values(self) -> list[str]:
        """Every configured secret, for the log redaction filter."""
        out = []
        for s in (self.token.client_secret, self.token.token):
            if s is not None and s.get_secret_value():
                out.append(s.get_secret_value())
        return out

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        environ: dict[str, str] | None = None,
        secrets_dir: Path | None = None,
    ) -> Settings:
        """Load and validate; the one entry point used by `lakegate serve` and tests.

        Args:
            config_file: YAML file; defaults to `$LAKEGATE_CONFIG_FILE` when unset.
            environ: the environment to read (defaults to `os.environ`; tests pass a dict).
            secrets_dir: a directory of secret files named as env vars (a mounted Kubernetes
                Secret); defaults to `$LAKEGATE_SECRETS_DIR` when unset.

        Raises:
            SettingsError: with one line per problem, each naming the env var.
        """
        env = dict(os.environ if environ is None else environ)
        if config_file is None and env.get(CONFIG_FILE_ENV):
            config_file = Path(env[CONFIG_FILE_ENV])
        if secrets_dir is None and env.get(SECRETS_DIR_ENV):
            secrets_dir = Path(env[SECRETS_DIR_ENV])
        try:
            data = read_config_file(config_file) if config_file is not None else {}
        except SourceError as exc:
            raise SettingsError(str(exc)) from exc
        values = {k: v for k, v in env.items() if k.upper().startswith(ENV_PREFIX)}
        unknown = sorted(
            k.upper() for k in values
            if k[len(ENV_PREFIX):].split("__", 1)[0].lower() not in cls.model_fields
        )
        if unknown:
            raise SettingsError("invalid settings:\n  " + "\n  ".join(
                f"{k}: unknown setting" for k in unknown))
        # A throwaway subclass carries this load's sources without global state.
        bound = type(
            cls.__name__,
            (cls,),
            {"_file_data": data, "_environ": values, "_secrets_dir": secrets_dir,
             "__module__": cls.__module__},
        )
        try:
            return bound()  # type: ignore[no-any-return]
        except SourceError as exc:
            raise SettingsError(str(exc)) from None
        except ValidationError as exc:
            raise SettingsError(format_validation_error(exc)) from None
