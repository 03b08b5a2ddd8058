"""The OpenAPI 3.1 document of the native `/v1` API, written by hand (docs/contracts.md §4).

A unit test checks that every `/v1` route the router serves appears here, so the two cannot drift.
"""

from __future__ import annotations

import copy
from typing import Any

_ERROR = {"$ref": "#/components/schemas/ErrorEnvelope"}


def _p(name: str, where: str, desc: str, schema: dict[str, Any] | None = None,
       required: bool = True) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "description": desc,
            "schema": schema or {"type": "string"}}


_WH = _p("wh", "path", "Warehouse name or UUID (percent-encoded).")
_NS = _p("ns", "path", "Namespace levels joined with %1F (percent-encoded).")
_TABLE = _p("table", "path", "Table name (percent-encoded).")
_ACCESS = _p("access", "query", "read (default) or write.",
             {"type": "string", "enum": ["read", "write"]}, required=False)
_MARKER = _p("X-Lakegate-Request", "header",
             "Anti-SSRF marker; required when no Authorization header is sent.", required=False)


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): {"description": "Lakekeeper error envelope",
                     "content": {"application/json": {"schema": _ERROR}}} for c in codes}


def _ok(schema: str, code: int = 200) -> dict[str, Any]:
    return {str(code): {"description": "OK", "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}}


def _json_body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}


_NO_CONTENT = {"204": {"description": "Done"}}

_SCHEMAS: dict[str, Any] = {
    "ErrorEnvelope": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["message", "type", "code"], "properties": {
            "message": {"type": "string"}, "type": {"type": "string"},
            "code": {"type": "integer"}, "stack": {"type": "array", "items": {"type": "string"}},
        }}}},
    "StorageCredential": {"type": "object", "required": ["prefix", "config"], "properties": {
        "prefix": {"type": "string"},
        "config": {"type": "object", "additionalProperties": {"type": "string"}},
        "expires_at_ms": {"type": ["integer", "null"]}}},
    "CredentialsResponse": {"type": "object", "properties": {
        "warehouse_id": {"type": "string"},
        "namespace": {"type": "array", "items": {"type": "string"}},
        "table": {"type": "string"}, "access": {"type": "string", "enum": ["read", "write"]},
        "location": {"type": "string"}, "expires_at_ms": {"type": ["integer", "null"]},
        "table_id": {"type": ["string", "null"]},
        "remaining_s": {"type": ["number", "null"]},
        "outcome": {"type": "string", "enum": ["hit", "miss", "coalesced", "stale"]},
        "identity_ttl_s": {"type": ["number", "null"], "minimum": 0, "description": (
            "seconds from this answer the caller may keep using its table identity")},
        "credentials": {"type": "array",
                        "items": {"$ref": "#/components/schemas/StorageCredential"}}}},
    "GenericTable": {"type": "object", "properties": {
        "name": {"type": "string"}, "format": {"type": "string"},
        "base_location": {"type": "string"}, "protected": {"type": "boolean"},
        "doc": {"type": ["string", "null"]},
        "properties": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "LoadTableResponse": {"type": "object", "properties": {
        "table": {"$ref": "#/components/schemas/GenericTable"},
        "config": {"type": "object", "additionalProperties": {"type": "string"}},
        "credentials": {"type": "array",
                        "items": {"$ref": "#/components/schemas/StorageCredential"}},
        "warehouse_id": {"type": "string"}}},
    "ListTablesResponse": {"type": "object", "properties": {
        "identifiers": {"type": "array", "items": {"type": "object", "properties": {
            "namespace": {"type": "array", "items": {"type": "string"}},
            "name": {"type": "string"}, "format": {"type": ["string", "null"]},
            "id": {"type": ["string", "null"]}}}},
        "next_page_token": {"type": ["string", "null"]}}},
    "CreateTableRequest": {"type": "object", "required": ["name", "format"], "properties": {
        "name": {"type": "string"}, "format": {"type": "string"},
        "base_location": {"type": "string"}, "doc": {"type": "string"},
        "properties": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "TableName": {"type": "object", "required": ["namespace", "name"], "properties": {
        "namespace": {"type": "array", "items": {"type": "string"}},
        "name": {"type": "string"}}},
    "RenameTableRequest": {"type": "object", "required": ["source", "destination"],
                           "properties": {
                               "source": {"$ref": "#/components/schemas/TableName"},
                               "destination": {"$ref": "#/components/schemas/TableName"}}},
    "InvalidateRequest": {"type": "object", "properties": {
        "all": {"type": "boolean"}, "warehouse": {"type": "string"},
        "namespace": {"type": "array", "items": {"type": "string"}},
        "table": {"type": "string"}}},
    "InvalidateResponse": {"type": "object", "properties": {"invalidated": {"type": "integer"}}},
    "WarehouseResponse": {"type": "object", "properties": {
        "warehouse_id": {"type": "string"}, "name": {"type": "string"}}},
    "AwsContainerCredentials": {"type": "object", "required": [
        "AccessKeyId", "SecretAccessKey", "Token", "Expiration"], "properties": {
        "AccessKeyId": {"type": "string"}, "SecretAccessKey": {"type": "string"},
        "Token": {"type": "string"}, "Expiration": {"type": "string", "format": "date-time"}}},
}

_TABLE_PATH = "/v1/warehouses/{wh}/namespaces/{ns}/tables/{table}"
_PATHS: dict[str, Any] = {
    _TABLE_PATH + "/credentials": {"get": {
        "summary": "Vended storage credentials for a table (cached, single-flighted).",
        "operationId": "getTableCredentials",
        "parameters": [_WH, _NS, _TABLE, _ACCESS, _MARKER,
                       _p("kind", "query", "generic (default) or iceberg (an Iceberg table).",
                          {"type": "string", "enum": ["generic", "iceberg"]},
                          required=False),
                       _p("expected_location", "query",
                          "The table location the caller planned against: answered for that "
                          "table or refused with 409 TableIdentityMismatch.", required=False),
                       _p("table_id", "query",
                          "The table id the caller planned against (same promise).",
                          required=False)],
        "responses": {**_ok("CredentialsResponse"),
                      **_errors(400, 401, 403, 404, 409, 429, 502, 503)},
    }},
    _TABLE_PATH: {
        "get": {"summary": "Load a table, optionally with vended credentials.",
                "operationId": "loadTable",
                "parameters": [_WH, _NS, _TABLE, _ACCESS, _MARKER,
                               _p("vended", "query", "true to attach credentials.",
                                  {"type": "boolean"}, required=False)],
                "responses": {**_ok("LoadTableResponse"), **_errors(400, 401, 403, 404, 502)}},
        "delete": {"summary": "Drop a table (invalidates its cache entries).",
                   "operationId": "dropTable",
                   "parameters": [_WH, _NS, _TABLE, _MARKER,
                                  _p("purge", "query", "Purge data.", {"type": "boolean"}, False),
                                  _p("force", "query", "Drop protected tables.",
                                     {"type": "boolean"}, False)],
                   "responses": {**_NO_CONTENT, **_errors(400, 401, 403, 404, 409, 502)}},
    },
    "/v1/warehouses/{wh}/namespaces/{ns}/tables": {
        "get": {"summary": "List tables of a namespace (one page).",
                "operationId": "listTables",
                "parameters": [_WH, _NS, _MARKER,
                               _p("page_token", "query", "Token from the previous page.",
                                  required=False),
                               _p("page_size", "query", "1..upstream.max_page_size (1000).",
                                  {"type": "integer"}, False)],
                "responses": {**_ok("ListTablesResponse"), **_errors(400, 401, 403, 404, 502)}},
        "post": {"summary": "Create a table.", "operationId": "createTable",
                 "parameters": [_WH, _NS, _MARKER],
                 "requestBody": _json_body("CreateTableRequest"),
                 "responses": {**_ok("LoadTableResponse"),
                               **_errors(400, 401, 403, 404, 409, 413, 502)}},
    },
    "/v1/warehouses/{wh}/tables/rename": {"post": {
        "summary": "Rename or move a table (invalidates both names).",
        "operationId": "renameTable", "parameters": [_WH, _MARKER],
        "requestBody": _json_body("RenameTableRequest"),
        "responses": {**_NO_CONTENT, **_errors(400, 401, 403, 404, 409, 413, 502)},
    }},
    "/v1/warehouses/{wh}": {"get": {
        "summary": "Resolve a warehouse name or UUID.", "operationId": "resolveWarehouse",
        "parameters": [_WH, _MARKER],
        "responses": {**_ok("WarehouseResponse"), **_errors(400, 401, 403, 404, 502)},
    }},
    "/v1/cache/invalidate": {"post": {
        "summary": "Invalidate cached credentials for a table, or everything.",
        "operationId": "invalidateCredentials", "parameters": [_MARKER],
        "requestBody": _json_body("InvalidateRequest"),
        "responses": {**_ok("InvalidateResponse"),
                      **_errors(400, 401, 403, 404, 413, 502, 503, 504)},
    }},
    "/v1/aws-credentials/{wh}/{ns}/{table}": {"get": {
        "summary": "AWS container-credentials JSON for a table "
                   "(AWS_CONTAINER_CREDENTIALS_FULL_URI).",
        "operationId": "getAwsContainerCredentials",
        "parameters": [_WH, _NS, _TABLE, _ACCESS, _MARKER],
        "responses": {**_ok("AwsContainerCredentials"),
                      **_errors(400, 401, 403, 404, 429, 502, 503)},
    }},
    "/v1/openapi.json": {"get": {
        "summary": "This document.", "operationId": "openapi",
        "responses": {"200": {"description": "OpenAPI 3.1 document"}},
    }},
}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (a fresh dict: callers may not mutate a shared one)."""
    from gateway import __version__

    return {
        "openapi": "3.1.0",
        "info": {"title": "Lakegate native API", "version": __version__,
                 "description": "Credential gateway for Lakekeeper: vended storage credentials "
                                "by warehouse name or id, cached and single-flighted."},
        "paths": copy.deepcopy(_PATHS),
        "components": {
            "schemas": copy.deepcopy(_SCHEMAS),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
    }
