"""The gRPC error table (gateway/surfaces/grpc_errors.py): every error class has a code."""

from __future__ import annotations

import grpc

from gateway import errors as e
from gateway.surfaces.grpc_errors import GRPC_CODES, error_detail, grpc_code_of
from lakegate.v1 import common_pb2


def all_error_classes() -> set[type[e.GatewayError]]:
    found, todo = set(), [e.GatewayError]
    while todo:
        cls = todo.pop()
        if cls.__module__ == e.__name__:
            found.add(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_class_of_the_tree_is_in_the_table() -> None:
    assert all_error_classes() <= set(GRPC_CODES)


def test_a_subclass_without_an_entry_takes_its_parents_code() -> None:
    class LocalNotFoundError(e.NotFoundError):
        pass

    assert grpc_code_of(LocalNotFoundError("x")) == grpc.StatusCode.NOT_FOUND
    assert grpc_code_of(ValueError("x")) == grpc.StatusCode.INTERNAL


def test_error_detail_carries_the_envelope_fields() -> None:
    err = e.NotFoundError("gone", lakekeeper_type="NoSuchGenericTableException")
    detail = common_pb2.ErrorDetail.FromString(error_detail(err, "rid"))
    assert (detail.type, detail.message, detail.http_status, detail.request_id) == (
        "NoSuchGenericTableException", "gone", 404, "rid")
