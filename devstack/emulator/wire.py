"""JSON request bodies (kebab-case pydantic models) and axum-style body rejections.

Lakekeeper's `Json<T>` extractor answers before the handler: wrong or missing content type
-> 415, syntax error -> 400, data error (missing field, wrong type) -> 422, all plain text;
an oversized body -> 413 plain text.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from devstack.emulator.errors import PlainRejection

M = TypeVar("M", bound=BaseModel)


class Body(BaseModel):
    """Base of request bodies: kebab-case names, unknown fields ignored (serde default)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class CreateGenericTable(Body):
    name: str
    format: str
    base_location: str | None = Field(default=None, alias="base-location")
    doc: str | None = None
    properties: dict[str, str] | None = None
    schema_: Any = Field(default=None, alias="schema")
    statistics: Any = None

    @field_validator("format")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # Lakekeeper's deserializer refuses a blank format (axum 422).
        if not value.strip():
            raise ValueError("format must not be blank")
        return value


class TableIdent(Body):
    namespace: list[str]
    name: str


class RenameGenericTable(Body):
    source: TableIdent
    destination: TableIdent


class CreateNamespace(Body):
    namespace: list[str]
    properties: dict[str, str] | None = None


class Bootstrap(Body):
    accept_terms_of_use: bool = Field(alias="accept-terms-of-use")


class CreateWarehouse(Body):
    warehouse_name: str = Field(alias="warehouse-name")
    project_id: str | None = Field(default=None, alias="project-id")
    storage_profile: dict[str, Any] = Field(alias="storage-profile")
    storage_credential: dict[str, Any] | None = Field(default=None, alias="storage-credential")
    delete_profile: dict[str, Any] | None = Field(default=None, alias="delete-profile")


class SetProtection(Body):
    protected: bool


class UndropTarget(Body):
    type: str
    id: str


class Undrop(Body):
    targets: list[UndropTarget]


async def read_json(request: web.Request, model: type[M]) -> M:
    """Parse the body into `model` or raise the plain-text rejection axum would send."""
    ctype = request.headers.get("Content-Type", "")
    if ctype.split(";")[0].strip().lower() != "application/json":
        raise PlainRejection(415, "Expected request with `Content-Type: application/json`")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        raise PlainRejection(
            413, "Failed to buffer the request body: length limit exceeded"
        ) from exc
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PlainRejection(400, f"Failed to parse the request body as JSON: {exc}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "body"
        if first["type"] == "missing":
            text = f"missing field `{loc}`"
        else:
            text = f"{loc}: {first['msg']}"
        raise PlainRejection(
            422, f"Failed to deserialize the JSON body into the target type: {text}"
        ) from exc
    except (AttributeError, TypeError, KeyError) as exc:
        # pyiceberg's model validators (TableRequirement/TableUpdate) assume the shapes they
        # expect and raise these instead of ValueError, which pydantic would have wrapped; serde
        # in Lakekeeper answers a wrong shape with the same 422 rejection.
        raise PlainRejection(
            422, "Failed to deserialize the JSON body into the target type: "
            f"a field has the wrong type ({type(exc).__name__})"
        ) from exc
