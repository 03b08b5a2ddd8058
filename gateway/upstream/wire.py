"""Wire models of Lakekeeper's JSON (kebab-case bodies), converted to domain models here only.

One frozen base: `populate_by_name`, kebab-case aliases, dumps by alias without `None`s.
Unknown fields are kept (`extra="allow"`), so a newer Lakekeeper's additions pass through.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_snake


def _kebab(name: str) -> str:
    return to_snake(name).replace("_", "-")


class WireModel(BaseModel):
    """Base of every Lakekeeper wire model."""

    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=_kebab, extra="allow"
    )

    def dump(self) -> dict[str, Any]:
        """JSON-ready dict, kebab-case keys, without None fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def _stringify(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("expected an object of strings")
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        elif isinstance(v, str | int | float):
            out[str(k)] = str(v)
        elif v is None:
            continue
        else:
            raise ValueError("config values must be scalars")
    return out


class WireStorageCredential(WireModel):
    prefix: str
    config: dict[str, str] = Field(default_factory=dict, repr=False)  # holds secrets

    _strings = field_validator("config", mode="before")(classmethod(lambda cls, v: _stringify(v)))


class WireGenericTable(WireModel):
    name: str
    format: str
    base_location: str
    protected: bool = False
    doc: str | None = None
    properties: dict[str, str] = Field(default_factory=dict)

    _strings = field_validator("properties", mode="before")(
        classmethod(lambda cls, v: _stringify(v))
    )


class LoadGenericTableResponse(WireModel):
    table: WireGenericTable
    config: dict[str, str] | None = Field(None, repr=False)  # holds secrets
    storage_credentials: list[WireStorageCredential] | None = None

    @field_validator("config", mode="before")
    @classmethod
    def _cfg(cls, v: Any) -> dict[str, str] | None:
        return None if v is None else _stringify(v)


class LoadCredentialsResponse(WireModel):
    storage_credentials: list[WireStorageCredential] = Field(default_factory=list)


class WireTableIdentifier(WireModel):
    namespace: list[str]
    name: str
    format: str | None = None
    id: str | None = None


class ListGenericTablesResponse(WireModel):
    identifiers: list[WireTableIdentifier] = Field(default_factory=list)
    next_page_token: str | None = None


class WireIdent(WireModel):
    namespace: list[str]
    name: str


class RenameRequest(WireModel):
    source: WireIdent
    destination: WireIdent


class CreateGenericTableRequest(WireModel):
    name: str
    format: str
    base_location: str | None = None
    doc: str | None = None
    properties: dict[str, str] | None = None


class CatalogConfig(WireModel):
    defaults: dict[str, Any] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)

    def prefix(self) -> str | None:
        value = self.overrides.get("prefix") or self.defaults.get("prefix")
        return value if isinstance(value, str) and value else None


class ErrorModel(WireModel):
    message: str = ""
    type: str = ""
    code: int = 0
    stack: list[str] = Field(default_factory=list)


class ErrorEnvelope(WireModel):
    error: ErrorModel


class TokenResponse(BaseModel):
    """OAuth2 token endpoint answer (RFC 6749 §5.1; snake_case on the wire)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    access_token: str = Field(repr=False)
    token_type: str = "Bearer"  # noqa: S105 - a scheme name
    expires_in: float | None = None
