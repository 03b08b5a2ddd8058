"""Every JSON request body is parsed here, under explicit limits, or refused with a 400/413.

Python's `json.loads` alone is not safe on hostile input: 100,000 nested `[` raise RecursionError
(a 500 before this module existed), `NaN`/`Infinity` and `1e999` become floats no other JSON
parser accepts, a 10,000-digit integer costs quadratic time, duplicate keys silently keep the
last value, and a bytes body may be decoded as UTF-16/32. The stdlib parser is kept (well-kept,
C-accelerated) and wrapped:

- size: at most `max_bytes` (413), checked before and after reading;
- encoding: strict UTF-8 only (no BOM, no UTF-16/32 sniffing, no lone surrogate escapes);
- nesting depth: at most `MAX_DEPTH` arrays/objects deep (checked on the parsed document; far
  deeper input stops the C parser at the interpreter's recursion limit, a RecursionError that is
  refused the same way, long before any stack is at risk);
- size of the document: at most `MAX_ITEMS` values (array elements and object members);
- numbers: no NaN/Infinity, floats must be finite, integers within 64 bits;
- objects: no duplicate keys;
- where an object is expected, anything else is refused.

Each refusal is an InvalidRequestError (400) or PayloadTooLargeError (413) with a short message:
the surfaces render it in the Lakekeeper envelope, without a traceback.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from gateway.errors import InvalidRequestError, PayloadTooLargeError

MAX_DEPTH = 64  # arrays/objects nested inside each other; Lakekeeper schemas stay far below
MAX_ITEMS = 100_000  # array elements + object members in one document
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1  # what any JSON peer (serde, Jackson) can hold
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


class _Limits:
    """The per-document counters the parser hooks share (one instance per parse)."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items = 0

    def count(self, n: int) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise InvalidRequestError(f"request body has more than {MAX_ITEMS} values")


def _reject_constant(name: str) -> Any:
    raise InvalidRequestError(f"request body contains {name}, which is not JSON")


def _parse_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise InvalidRequestError("request body contains a number out of range")
    return value


def _parse_int(literal: str) -> int:
    # 21 characters hold every 64-bit value (with sign); longer literals are refused unparsed.
    if len(literal) > 21:
        raise InvalidRequestError("request body contains a number out of range")
    value = int(literal)
    if not _INT_MIN <= value <= _INT_MAX:
        raise InvalidRequestError("request body contains a number out of range")
    return value


def parse_json(raw: bytes) -> Any:
    """Parse one JSON document under the limits of the module docstring.

    Raises:
        InvalidRequestError: not strict UTF-8, not JSON, or beyond a limit.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequestError("request body is not valid UTF-8") from None
    limits = _Limits()

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        limits.count(len(items))
        obj = dict(items)
        if len(obj) != len(items):
            raise InvalidRequestError("request body has an object with duplicate keys")
        return obj

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_constant=_reject_constant,
                         parse_float=_parse_float, parse_int=_parse_int)
    except RecursionError:
        # The C parser's own guard (Py_EnterRecursiveCall), far beyond MAX_DEPTH.
        raise InvalidRequestError(f"request body is nested deeper than {MAX_DEPTH}") from None
    except ValueError:
        raise InvalidRequestError("request body is not valid JSON") from None
    _check_values(doc, limits)
    return doc


def _check_values(doc: Any, limits: _Limits) -> None:
    """Depth and element count of the parsed document, and strings that cannot be UTF-8 (lone
    surrogate escapes such as `"\\ud800"`, which would fail later when sent upstream).

    Iterative (an explicit stack), so checking depth never recurses itself.
    """
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii() and _LONE_SURROGATE.search(value):
                raise InvalidRequestError("request body has a string that is not valid UTF-8")
        elif isinstance(value, (list, dict)):
            if depth >= MAX_DEPTH:
                raise InvalidRequestError(f"request body is nested deeper than {MAX_DEPTH}")
            if isinstance(value, list):
                limits.count(len(value))
                stack.extend((v, depth + 1) for v in value)
            else:
                stack.extend((k, depth + 1) for k in value)
                stack.extend((v, depth + 1) for v in value.values())


def parse_json_object(raw: bytes, max_bytes: int) -> dict[str, Any]:
    """A request body that must be one JSON object.

    Raises:
        PayloadTooLargeError: more than `max_bytes`.
        InvalidRequestError: as `parse_json`, or a JSON value that is not an object.
    """
    if len(raw) > max_bytes:
        raise PayloadTooLargeError(f"request body larger than {max_bytes} bytes")
    doc = parse_json(raw)
    if not isinstance(doc, dict):
        raise InvalidRequestError("request body must be a JSON object")
    return doc
