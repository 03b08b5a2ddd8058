"""Secret values with redacted str/repr, and redaction of mappings before they are logged.

pydantic's `SecretStr` is the settings-side wrapper; `Secret` is the runtime one (tokens the
session holds), so a token can never leak through an f-string, a repr or a traceback local.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.models import is_secret_config_key

REDACTED: Final = "***"
_SECRET_FIELD_MARKERS: Final = (
    "secret", "token", "password", "authorization", "credential", "access-key", "access_key",
    "session", "sas", "api-key", "api_key",
)


class Secret:
    """A string that refuses to show itself; call `reveal()` at the one place it is sent."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The raw value, for the HTTP header that carries it (and nowhere else)."""
        return self._value

    def __str__(self) -> str:
        return REDACTED

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


def is_secret_field(name: str) -> bool:
    """Whether a field/header/config name suggests a secret value."""
    lowered = name.lower()
    if "expires" in lowered or lowered.endswith("_s") or lowered == "expiration-time":
        return False
    return is_secret_config_key(lowered) or any(m in lowered for m in _SECRET_FIELD_MARKERS)


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `values` with secret-looking keys masked, recursively, for logs."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out[key] = redact_mapping(value)
        elif is_secret_field(str(key)):
            out[key] = REDACTED
        else:
            out[key] = value
    return out
