"""The sign request's checks: hostile shapes and URIs are refused before anything is signed."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import InvalidRequestError, PermissionDeniedError
from gateway.models import AccessMode
from gateway.signing.request import (
    SignRequest,
    StoreAddress,
    access_for,
    check_request,
    parse_sign_request,
)

EP = "http://127.0.0.1:8333"
PATH_STYLE = StoreAddress.of({"s3.endpoint": EP + "/", "s3.path-style-access": "true",
                              "s3.region": "us-east-1"})
TABLE = "s3://bkt/wh/t1"


def _doc(uri: str = f"{EP}/bkt/wh/t1/data/f.parquet", method: str = "GET",
         **extra: Any) -> dict[str, Any]:
    return {"region": "us-east-1", "uri": uri, "method": method,
            "headers": {"User-Agent": ["x"]}, **extra}


def _check(uri: str, method: str = "GET", store: StoreAddress = PATH_STYLE,
           **extra: Any) -> Any:
    return check_request(parse_sign_request(_doc(uri, method, **extra)), store, TABLE)


MALFORMED = {
    "empty": {},
    "region-spaces": _doc() | {"region": "us east 1"},
    "region-number": _doc() | {"region": 7},
    "uri-crlf": _doc() | {"uri": f"{EP}/bkt/wh/t1/a\r\nX-Injected: 1"},
    "uri-non-ascii": _doc() | {"uri": f"{EP}/bkt/wh/t1/\u00e4"},
    "uri-oversized": _doc() | {"uri": "x" * 9000},
    "method-patch": _doc() | {"method": "PATCH"},
    "method-lowercase": _doc() | {"method": "get"},
    "provider-gcs": _doc() | {"provider": "gcs"},
    "headers-list": _doc() | {"headers": ["a"]},
    "header-name-space": _doc() | {"headers": {"Bad Name": ["v"]}},
    "header-name-crlf": _doc() | {"headers": {"X-A\r\nX-B": ["v"]}},
    "header-value-crlf": _doc() | {"headers": {"x-amz-meta-a": ["v\r\nX-Injected: 1"]}},
    "header-value-non-ascii": _doc() | {"headers": {"x-amz-meta-a": ["caf\u00e9"]}},
    "header-value-string": _doc() | {"headers": {"x-amz-meta-a": "v"}},
    "header-value-empty-list": _doc() | {"headers": {"x-amz-meta-a": []}},
    "header-repeated-case": _doc() | {"headers": {"A": ["1"], "a": ["2"]}},
    "headers-too-many": _doc() | {"headers": {f"h{i}": ["v"] for i in range(65)}},
    "headers-too-large": _doc() | {"headers": {"h": ["v" * 9000]}},
    "body-number": _doc() | {"body": 5},
    "body-oversized": _doc() | {"body": "x" * ((1 << 20) + 1)},
}


@pytest.mark.parametrize("doc", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_bodies_are_refused(doc):
    with pytest.raises(InvalidRequestError):
        parse_sign_request(doc)


def test_a_plain_read_inside_the_table_passes():
    target = _check(f"{EP}/bkt/wh/t1/data/f.parquet")
    assert target.access is AccessMode.READ
    assert target.locations == ("s3://bkt/wh/t1/data/f.parquet",)


@pytest.mark.parametrize("uri", [
    f"{EP}/bkt/wh/t1_other/f",  # a sibling sharing the prefix
    f"{EP}/other/wh/t1/f",  # another bucket
    f"{EP}/bkt/wh/t1",  # the table's location itself is no object of it
    "http://127.0.0.2:8333/bkt/wh/t1/f",  # another host
    "http://127.0.0.1:9000/bkt/wh/t1/f",  # another port
    "https://127.0.0.1:8333/bkt/wh/t1/f",  # another scheme
    "http://bkt.127.0.0.1:8333/wh/t1/f",  # virtual host against a path-style store
    "http://user@127.0.0.1:8333/bkt/wh/t1/f",
])
def test_uris_outside_the_table_or_its_store_are_forbidden(uri):
    with pytest.raises(PermissionDeniedError):
        _check(uri)


@pytest.mark.parametrize("uri", [
    f"{EP}/bkt/wh/t1/../t2/f",
    f"{EP}/bkt/wh/t1/%2E%2E/t2/f",
    f"{EP}/bkt/wh/t1/a%2F..%2F..%2Ft2",
    f"{EP}/bkt/wh/t1/a%5C..%5Cx",
    f"{EP}/bkt/wh/t1/./f",
    f"{EP}/bkt/wh/t1//f",
    f"{EP}/bkt/wh/t1/a%00b",
    f"{EP}/bkt/wh/t1/f?acl",
    f"{EP}/bkt/wh/t1/f?tagging",
    f"{EP}/bkt/wh/t1/f?=x",
    f"{EP}/bkt/wh/t1/f?partNumber=1&partNumber=2",
    f"{EP}/bkt?versions",
    f"{EP}/bkt?list-type=2",
    f"{EP}/bkt/",
])
def test_uris_the_store_would_read_differently_are_refused(uri):
    with pytest.raises(InvalidRequestError):
        _check(uri)


def test_wrong_region_is_refused():
    with pytest.raises(InvalidRequestError):
        check_request(parse_sign_request(_doc() | {"region": "eu-west-1"}), PATH_STYLE, TABLE)


@pytest.mark.parametrize("header", [
    {"x-amz-copy-source": ["bkt/wh/t2/f"]}, {"X-Amz-Copy-Source-Range": ["bytes=0-1"]},
    {"x-amz-acl": ["public-read"]}, {"x-amz-grant-read": ["uri=x"]},
    {"x-amz-content-sha256": ["STREAMING-AWS4-HMAC-SHA256-PAYLOAD"]},
])
def test_headers_that_reach_other_objects_or_need_the_key_are_refused(header):
    with pytest.raises(InvalidRequestError):
        _check(f"{EP}/bkt/wh/t1/f", "PUT", headers=header)


@pytest.mark.parametrize(("method", "query"), [
    ("PUT", ""), ("PUT", "?partNumber=1&uploadId=u"), ("POST", "?uploads"),
    ("POST", "?uploadId=u"), ("DELETE", ""), ("DELETE", "?uploadId=u"),
])
def test_writes_and_multipart_need_write(method, query):
    req = parse_sign_request(_doc(f"{EP}/bkt/wh/t1/f{query}", method))
    assert access_for(req) is AccessMode.WRITE
    assert check_request(req, PATH_STYLE, TABLE).access is AccessMode.WRITE


def test_list_prefix_must_lie_strictly_inside():
    assert _check(f"{EP}/bkt?list-type=2&prefix=wh/t1/").prefix
    assert _check(f"{EP}/bkt?list-type=2&prefix=wh/t1/data/00").prefix
    for prefix in ("wh/t1", "wh/t", "wh/"):
        with pytest.raises(PermissionDeniedError):
            _check(f"{EP}/bkt?list-type=2&prefix={prefix}")


def test_delete_objects_keys_are_checked_one_by_one():
    obj = "<Object><Key>{}</Key></Object>"
    inside = f"<Delete>{obj.format('wh/t1/a')}{obj.format('wh/t1/b')}</Delete>"
    target = _check(f"{EP}/bkt?delete", "POST", body=inside)
    assert target.locations == ("s3://bkt/wh/t1/a", "s3://bkt/wh/t1/b")
    with pytest.raises(PermissionDeniedError):
        _check(f"{EP}/bkt?delete", "POST",
               body=f"<Delete>{obj.format('wh/t1/a')}{obj.format('wh/t2/b')}</Delete>")
    for bad in (None, "<Delete>", "<Delete/>",
                '<!DOCTYPE d [<!ENTITY e "x">]><Delete><Object><Key>&e;</Key></Object></Delete>',
                f"<Delete>{obj.format('wh/t1/../t2/b')}</Delete>"):
        extra = {} if bad is None else {"body": bad}
        with pytest.raises(InvalidRequestError):
            _check(f"{EP}/bkt?delete", "POST", **extra)


def test_virtual_host_store_reads_the_bucket_from_the_host_only():
    store = StoreAddress.of({"s3.region": "us-east-1"})
    assert (store.host, store.path_style) == ("s3.us-east-1.amazonaws.com", False)
    target = _check("https://bkt.s3.us-east-1.amazonaws.com/wh/t1/f", store=store)
    assert target.bucket == "bkt"
    with pytest.raises(PermissionDeniedError):  # path style against a virtual-host store
        _check("https://s3.us-east-1.amazonaws.com/bkt/wh/t1/f", store=store)


def test_request_round_trips_to_the_catalogs_wire_shape():
    req = parse_sign_request(_doc(body="<Delete/>"))
    assert isinstance(req, SignRequest)
    assert req.wire()["headers"] == {"User-Agent": ["x"]}
    assert req.wire()["body"] == "<Delete/>"
