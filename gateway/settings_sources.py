"""Where setting values come from, besides defaults: the YAML file, the environment, a secrets dir.

Split from gateway/settings.py (which holds the typed sections and their validation) so each
module keeps one job. Precedence, lowest first: defaults < YAML file < secrets directory < env.
The secrets directory holds one file per setting, named as its env var
(`LAKEGATE__TOKEN__CLIENT_SECRET`), so a Kubernetes Secret can be mounted instead of injected
into the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SecretsSettingsSource,
)
from pydantic_settings.sources.providers.nested_secrets import NestedSecretsSettingsSource
from pydantic_settings.sources.utils import parse_env_vars

ENV_PREFIX = "LAKEGATE__"
CONFIG_FILE_ENV = "LAKEGATE_CONFIG_FILE"
SECRETS_DIR_ENV = "LAKEGATE_SECRETS_DIR"


def env_name(*loc: str | int) -> str:
    """`("cache", "min_remaining_s")` → `LAKEGATE__CACHE__MIN_REMAINING_S`."""
    return ENV_PREFIX + "__".join(str(part).upper() for part in loc)


class SourceError(ValueError):
    """A source (config file, secrets directory) is unusable; the message names it, no values."""


class YamlFileSource(PydanticBaseSettingsSource):
    """Values from the optional YAML file; sits between defaults and env in precedence."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


class GivenEnvSource(EnvSettingsSource):
    """The env source, reading a given mapping instead of os.environ (tests pass a dict)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: dict[str, str]) -> None:
        self._given = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Any:
        return parse_env_vars(
            self._given, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def secrets_source(settings_cls: type[BaseSettings], secrets_dir: Path) -> EnvSettingsSource:
    """Files in `secrets_dir` named like env vars (`LAKEGATE__TOKEN__CLIENT_SECRET`).

    Hidden entries (a Kubernetes Secret volume's `..data` directory) are skipped; the visible
    names are symlinks into it, so a rotated Secret is read as one consistent set.

    Raises:
        SourceError: the directory is missing or not a directory (naming LAKEGATE_SECRETS_DIR).
    """
    if not secrets_dir.is_dir():
        raise SourceError(f"{SECRETS_DIR_ENV}={secrets_dir}: not a readable directory")
    try:
        return NestedSecretsSettingsSource(
            SecretsSettingsSource(settings_cls, secrets_dir=secrets_dir),
            secrets_dir_missing="error",
            secrets_prefix=ENV_PREFIX,
            secrets_nested_delimiter="__",
            secrets_case_sensitive=False,
        )
    except (OSError, ValueError) as exc:  # pydantic_settings.SettingsError is a ValueError
        raise SourceError(
            f"{SECRETS_DIR_ENV}={secrets_dir}: cannot read ({type(exc).__name__})"
        ) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """The YAML settings file as a mapping (an empty file is an empty mapping).

    Raises:
        SourceError: unreadable, not YAML, or not a mapping.
    """
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SourceError(f"cannot read config file {path}: {exc}") from exc
    if loaded is not None and not isinstance(loaded, dict):
        raise SourceError(f"config file {path} must hold a mapping")
    return loaded or {}


def format_validation_error(exc: ValidationError) -> str:
    """One line per error, naming the env var; never echoes input values (they may be secret)."""
    lines = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = [p for p in err["loc"] if isinstance(p, str | int)]
        msg = str(err["msg"]).removeprefix("Value error, ")
        if loc and not msg.startswith(ENV_PREFIX):
            lines.append(f"{env_name(*loc)}: {msg}")
        else:
            lines.append(msg)
    return "invalid settings:\n  " + "\n  ".join(lines)
