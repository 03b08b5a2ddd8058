"""Structural gRPC corpus: malformed protobuf bytes and oversized metadata on every method.

Why a hand-built wire format: a protobuf library only serializes well-formed messages, so it
can never send a string field as a varint, a length that runs past the end, an unterminated
group or 5,000 nested groups. Methods and their request types come from the gateway's own
service table (grpc_servicers.SERVICES), so a method added later is attacked without editing
this file. Pure generators: structural_suite.py sends them as generic unary calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from hardening.structural import Target

GRPC_CATEGORIES = ("grpc_malformed_protobuf", "grpc_oversized_metadata")
Metadata = tuple[tuple[str, str | bytes], ...]


@dataclass(frozen=True)
class GrpcCase:
    """One raw request message (bytes) with its metadata, for one fully-qualified method."""

    category: str
    label: str
    method: str
    payload: bytes
    metadata: Metadata = ()
    surface: str = "grpc"


def varint(value: int) -> bytes:
    """Protobuf base-128 varint (negative values as 10-byte two's complement, as protobuf)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def field_len(number: int, data: bytes) -> bytes:
    return tag(number, 2) + varint(len(data)) + data


def grpc_methods() -> dict[str, Any]:
    """`/service/Method` -> request message class, from the gateway's own service table."""
    from gateway.surfaces.grpc_servicers import SERVICES

    return {f"/{service}/{name}": request for service, methods in SERVICES.items()
            for name, (request, _, _) in methods.items()}


def valid_message(message_type: Any, names: Target, *, mutating: bool) -> Any:
    """A well-formed request: strings by field name, the absent table for mutations."""
    from google.protobuf.descriptor import FieldDescriptor as F

    msg = message_type()
    for fd in message_type.DESCRIPTOR.fields:
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            continue
        if fd.type == F.TYPE_MESSAGE and not fd.is_repeated:
            getattr(msg, fd.name).CopyFrom(
                valid_message(fd.message_type._concrete_class, names, mutating=mutating))
        elif fd.type == F.TYPE_STRING:
            value = {"warehouse": names.warehouse, "namespace": names.namespace}.get(
                fd.name, names.absent if mutating else names.table)
            if fd.is_repeated:
                getattr(msg, fd.name).append(value)
            else:
                setattr(msg, fd.name, value)
        elif fd.type == F.TYPE_ENUM and not fd.is_repeated:
            setattr(msg, fd.name, 1)
    return msg


GLOBAL_GARBAGE: dict[str, bytes] = {
    "all_ff": b"\xff" * 16,
    "overlong_varint_tag": b"\x80" * 11 + b"\x01",
    "field_number_zero": b"\x00\x01",
    "tag_without_length": b"\x0a",
    "length_past_end": b"\x0a\x7f" + b"x" * 4,
    "length_4GiB": b"\x0a\xff\xff\xff\xff\x0f",
    "wire_type_6": b"\x0e\x01",
    "wire_type_7": b"\x0f\x01",
    "unterminated_group": b"\x0b",
    "end_group_alone": b"\x0c",
    "groups_nested_5000": b"\xfb\x07" * 5000,  # field 127, start-group, never ended
    "groups_nested_200_closed": b"\xfb\x07" * 200 + b"\xfc\x07" * 200,
    "max_field_number": tag((1 << 29) - 1, 2) + b"\x00",
    "field_number_over_max": varint(1 << 32 | 2) + b"\x00",
    "unknown_len_1MiB": field_len(1000, b"u" * ((1 << 20) - 64)),
    "over_message_limit_2MiB": field_len(1000, b"u" * (2 << 20)),
    "repeated_tag_100k": b"\x08\x01" * 100_000,
}


def _field_attacks(fd: Any) -> dict[str, bytes]:
    """Wire-level attacks on one field (by its number): wrong wire types, bad lengths and,
    by its declared type, bad UTF-8, huge strings, bad enums, nested garbage."""
    from google.protobuf.descriptor import FieldDescriptor as F

    n = fd.number
    attacks = {
        "as_varint": tag(n, 0) + varint(1),
        "as_varint_max": tag(n, 0) + b"\xff" * 9 + b"\x01",
        "as_fixed64": tag(n, 1) + b"\x01" * 8,
        "as_fixed32": tag(n, 5) + b"\x01" * 4,
        "as_fixed64_truncated": tag(n, 1) + b"\x01" * 3,
        "as_bytes_garbage": field_len(n, b"\xff\xfe\xfd"),
        "as_group": tag(n, 3) + tag(n, 4),
        "len_truncated": tag(n, 2) + varint(50) + b"ab",
        "len_negative": tag(n, 2) + varint(-1),
    }
    if fd.type == F.TYPE_STRING:
        attacks |= {"invalid_utf8": field_len(n, b"\xff\xfe\xc3\x28"),
                    "surrogate_utf8": field_len(n, b"\xed\xa0\x80"),
                    "nul_and_controls": field_len(n, b"a\x00\x1f\x7f"),
                    "string_100KiB": field_len(n, b"s" * 100_000)}
        if fd.is_repeated:
            attacks["repeated_100k"] = field_len(n, b"a") * 100_000
    elif fd.type == F.TYPE_ENUM:
        attacks |= {"enum_99": tag(n, 0) + varint(99), "enum_negative": tag(n, 0) + varint(-1),
                    "enum_2_pow_40": tag(n, 0) + varint(1 << 40)}
    elif fd.type == F.TYPE_MESSAGE:
        attacks |= {"nested_garbage": field_len(n, b"\xff\xff\xff"),
                    "nested_unterminated_group": field_len(n, b"\x0b"),
                    "nested_deep_len": _nested_len(n, 3000)}
    elif fd.type in (F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64):
        attacks |= {"int_negative": tag(n, 0) + varint(-1),
                    "int_2_pow_63": tag(n, 0) + varint(1 << 63)}
    return attacks


def _nested_len(number: int, depth: int) -> bytes:
    """The same message field nested `depth` times (beyond any recursion limit)."""
    data = b""
    for _ in range(depth):
        data = field_len(number, data)
    return data


def _fields(message_type: Any, prefix: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every field, and the fields of nested messages (two levels), with a dotted name."""
    for fd in message_type.DESCRIPTOR.fields:
        yield prefix + fd.name, fd
        if fd.message_type is not None and depth < 2 and not fd.message_type.GetOptions(
        ).map_entry:
            yield from _fields(fd.message_type._concrete_class, f"{prefix}{fd.name}.", depth + 1)


def _wrap(path: str, message_type: Any, inner: bytes) -> bytes:
    """Embed attack bytes for a nested field inside its parents' length-delimited fields."""
    parents = path.split(".")[:-1]
    chain, current = [], message_type
    for name in parents:
        fd = current.DESCRIPTOR.fields_by_name[name]
        chain.append(fd.number)
        current = fd.message_type._concrete_class
    for number in reversed(chain):
        inner = field_len(number, inner)
    return inner


def protobuf_cases(names: Target) -> Iterator[GrpcCase]:
    """Malformed bytes on every method: global garbage, then per (nested) field attacks,
    alone and appended to a valid message (so the rest of the request is well-formed)."""
    cat = "grpc_malformed_protobuf"
    for method, message_type in grpc_methods().items():
        mutating = not method.rsplit("/", 1)[-1].startswith(("Get", "Load", "List", "Resolve"))
        valid = valid_message(message_type, names, mutating=mutating).SerializeToString()
        yield GrpcCase(cat, "valid", method, valid)
        yield GrpcCase(cat, "empty", method, b"")
        for label, data in GLOBAL_GARBAGE.items():
            yield GrpcCase(cat, label, method, data)
            yield GrpcCase(cat, f"valid+{label}", method, valid + data)
        for cut in (1, len(valid) // 2, len(valid) - 1):
            yield GrpcCase(cat, f"truncated_at_{cut}", method, valid[:cut])
        for path, fd in _fields(message_type):
            for label, data in _field_attacks(fd).items():
                wrapped = _wrap(path, message_type, data)
                yield GrpcCase(cat, f"{path}:{label}", method, wrapped)
                yield GrpcCase(cat, f"valid+{path}:{label}", method, valid + wrapped)


def metadata_attacks() -> dict[str, Metadata]:
    """Oversized, numerous, repeated and odd metadata (what a client library lets through)."""
    return {
        "value_16KiB": (("x-big", "a" * 16_384),),
        "value_64KiB": (("x-big", "a" * 65_536),),
        "value_1MiB": (("x-big", "a" * (1 << 20)),),
        "keys_1000": tuple((f"x-k-{i}", "v") for i in range(1000)),
        "keys_10000": tuple((f"x-k-{i}", "v") for i in range(10_000)),
        "repeated_authorization": (("authorization", "Bearer a"), ("authorization", "Bearer b")),
        "authorization_64KiB": (("authorization", "Bearer " + "a" * 65_536),),
        "authorization_garbage": (("authorization", "Basic !!!"),),
        "request_id_8000": (("x-request-id", "r" * 8000),),
        "request_id_repeated": (("x-request-id", "a"), ("x-request-id", "b")),
        "binary_64KiB": (("x-blob-bin", bytes(range(256)) * 256),),
        "key_name_8000": (("k" * 8000, "v"),),
    }


def metadata_cases(names: Target) -> Iterator[GrpcCase]:
    """Every metadata attack on every method, with a well-formed request."""
    for method, message_type in grpc_methods().items():
        mutating = not method.rsplit("/", 1)[-1].startswith(("Get", "Load", "List", "Resolve"))
        valid = valid_message(message_type, names, mutating=mutating).SerializeToString()
        for label, metadata in metadata_attacks().items():
            yield GrpcCase("grpc_oversized_metadata", label, method, valid, metadata)


def grpc_corpus(names: Target) -> Iterator[GrpcCase]:
    """The whole gRPC corpus, both categories."""
    yield from protobuf_cases(names)
    yield from metadata_cases(names)
