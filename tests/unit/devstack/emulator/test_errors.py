import re
import uuid

from devstack.emulator.errors import envelope, uuid7


def test_envelope_has_lakekeeper_shape_with_error_id_last():
    body = envelope(404, "NoSuchGenericTableException", "nope", ["detail 1"])
    err = body["error"]
    assert (err["message"], err["type"], err["code"]) == (
        "nope",
        "NoSuchGenericTableException",
        404,
    )
    assert err["stack"][0] == "detail 1"
    assert re.fullmatch(r"Error ID: [0-9a-f-]{36}", err["stack"][-1])


def test_server_errors_carry_only_the_error_id():
    err = envelope(500, "InternalServerError", "x", ["secret internals"])["error"]
    assert len(err["stack"]) == 1
    assert err["stack"][0].startswith("Error ID: ")


def test_uuid7_is_version_7_and_time_ordered():
    first, second = uuid7(), uuid7()
    assert first.version == 7
    assert first.variant == uuid.RFC_4122
    assert first.int >> 80 <= second.int >> 80
