"""Lakekeeper's S3 signer routes and the load `config` keys that point at them.

Routes (Lakekeeper `api/iceberg/v1/s3_signer.rs`, mounted under `/catalog/v1`):
- `POST /catalog/v1/aws/s3/sign`: no warehouse, so it is refused (400, as Lakekeeper's
  `require_warehouse_id`).
- `POST /catalog/v1/{prefix}/v1/aws/s3/sign`: the table is found by the URI's location.
- `POST /catalog/v1/signer/{prefix}/tabular-id/{id}/v1/aws/s3/sign`: the table by id; when that
  table's location does not cover the URI, by location (pyiceberg <= 0.9.1 reused one table's
  endpoint for all). This is the route a load advertises.
- `POST /catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}/sign`: Iceberg 1.11's
  per-table route (Lakekeeper's unmerged `ct/table-sign-endpoint` branch): the table by name.
Each request: the warehouse's profile is S3 with `remote-signing-enabled` (default true; else
403 RemoteSigningDisabled), the region is the profile's, every location the request touches
(the object, a ListObjectsV2 prefix, each DeleteObjects key) lies inside the table's location,
and a read-only principal (the emulator's `x-assume-role` read role) gets only reads signed.
It signs with the warehouse's own storage key, as Lakekeeper does. Signatures are counted in
the emulator's stats (`signed`; each route's calls under its name), so a test can tell that
a client really signed here.
"""

from __future__ import annotations

import datetime

from aiohttp import web

from devstack.emulator.cloud_vending import storage_type
from devstack.emulator.errors import ApiError
from devstack.emulator.models import Warehouse
from devstack.emulator.policy import Permission
from devstack.emulator.routes_iceberg import catalog_of
from devstack.emulator.signer import (
    SIGN_SUFFIX,
    Operation,
    S3Target,
    SignRequest,
    delete_keys,
    operation_of,
    parse_s3_url,
    sign,
    signing_enabled,
)
from devstack.emulator.state import (
    namespace_from_path,
    permission_of,
    state_of,
    warehouse_from_prefix,
)
from devstack.emulator.wire import read_json

LIST_PARAMS = frozenset({"list-type", "prefix", "delimiter", "max-keys", "continuation-token",
                         "start-after", "fetch-owner", "encoding-type"})


def _inside(table_location: str, location: str) -> bool:
    base = table_location.rstrip("/")
    return location == base or location.startswith(base + "/")


def _locations(req: SignRequest, target: S3Target) -> tuple[list[str], bool]:
    """The locations the request touches and whether the first is a list prefix."""
    if req.method == "POST" and any(k == "delete" for k, _ in target.query):
        if target.key:
            raise ApiError(400, "InvalidS3Url", "DeleteObjects must address the bucket")
        return [target.location(k) for k in delete_keys(req.body)], False
    if target.key:
        return [target.location()], False
    params = dict(target.query)
    names = [k for k, _ in target.query]
    if (req.method != "GET" or params.get("list-type") != "2" or not params.get("prefix")
            or len(set(names)) != len(names) or not set(names) <= LIST_PARAMS):
        raise ApiError(400, "UnsupportedS3Operation", "Bucket-level request cannot be signed")
    return [target.location(params["prefix"])], True


def _table_location(request: web.Request, wh: Warehouse, first: str) -> str:
    """The location of the table the route names (by id, name, else by `first`)."""
    info = request.match_info
    if "namespace" in info:
        ns = namespace_from_path(request, wh)
        table = catalog_of(request).store.get(ns, info["table"].replace("+", " "))
        if table is None:
            raise ApiError(404, "NoSuchTableException", "Table does not exist")
        return table.location
    if "tabular_id" in info:
        tid = info["tabular_id"]
        ice = catalog_of(request).store.get_by_id(tid)
        generic = state_of(request).store.get_table_by_id(tid) if ice is None else None
        location = ice.location if ice is not None else (
            generic.base_location if generic is not None else None)
        if location is not None and _inside(location, first):
            return location
    found = [t for t in catalog_of(request).store.covering(wh.id, first)]
    if not found:
        raise ApiError(404, "NoSuchTableLocationException",
                       "No table found for the location of the request")
    return max(found, key=lambda t: len(t.location)).location


async def sign_request(request: web.Request) -> web.Response:
    if "prefix" not in request.match_info:
        raise ApiError(400, "WarehouseIdMissing",
                       "A warehouse id is required: use the signer endpoint of the load")
    wh = warehouse_from_prefix(request)
    profile = wh.storage_profile
    if storage_type(profile) != "s3":
        raise ApiError(400, "UnsupportedStorageType", "Remote signing needs an S3 warehouse")
    if not signing_enabled(profile):
        raise ApiError(403, "RemoteSigningDisabled",
                       "Remote signing is disabled for this warehouse")
    req = await read_json(request, SignRequest)
    target = parse_s3_url(req.uri, profile)
    op = operation_of(req.method, target.query)
    locations, is_prefix = _locations(req, target)
    table_location = _table_location(request, wh, locations[0])
    if req.region != str(profile.get("region", "us-east-1")):
        raise ApiError(400, "InvalidRegion", "Request region is not the warehouse's region")
    for loc in locations:
        inside = (loc.startswith(table_location.rstrip("/") + "/") if is_prefix
                  else _inside(table_location, loc))
        if not inside:
            raise ApiError(403, "SignatureLocationOutsideTable",
                           "The request addresses a location outside the table")
    if op is not Operation.READ and permission_of(request) is not Permission.READ_WRITE_DELETE:
        raise ApiError(403, "NotAuthorized", "The principal may not write this table's data")
    cred = wh.storage_credential or {}
    access_key = cred.get("access-key-id") or cred.get("aws-access-key-id")
    secret_key = cred.get("secret-access-key") or cred.get("aws-secret-access-key")
    if not access_key or not secret_key:
        raise ApiError(400, "Misconfiguration", "Warehouse has no access-key storage credential")
    now = datetime.datetime.fromtimestamp(state_of(request).vendor.wall_clock(), datetime.UTC)
    headers = sign(req, str(access_key), str(secret_key), None, now.replace(tzinfo=None))
    state_of(request).stats.incr("signed")
    return web.json_response({"uri": req.uri, "headers": headers})


def add_routes(app: web.Application) -> None:
    """The signer routes; each is named (the gate counts, authenticates and assumes roles)."""
    r = app.router
    r.add_post(f"/catalog/{SIGN_SUFFIX}", sign_request, name="sign_request")
    r.add_post(f"/catalog/v1/{{prefix}}/{SIGN_SUFFIX}", sign_request, name="sign_by_location")
    r.add_post(f"/catalog/v1/signer/{{prefix}}/tabular-id/{{tabular_id}}/{SIGN_SUFFIX}",
               sign_request, name="sign_by_tabular_id")
    r.add_post("/catalog/v1/{prefix}/namespaces/{namespace}/tables/{table}/sign", sign_request,
               name="sign_by_table")
