"""Request ids for both surfaces (when the caller sent none): UUID-shaped, unique, cheap.

`uuid4()` reads 16 bytes from the OS and builds a UUID object per request, a measurable part of
a cached credential answer. Uniqueness is all an id needs (it is not a secret): one random
prefix per process plus a 48-bit counter starting at a random point gives distinct ids within
the process and, across processes and restarts, collisions only as likely as random UUIDs'.
The ids keep the UUID4 text form (version and variant nibbles), so the error envelope's
`Error ID` can still be the request id itself.
"""

from __future__ import annotations

import itertools
import os

_COUNTER_MASK = (1 << 48) - 1


class RequestIds:
    """Makes `xxxxxxxx-xxxx-4xxx-Vxxx-nnnnnnnnnnnn` ids (V in 8..b, n a wrapping counter).

    Args:
        seed: 16 bytes of randomness (tests pass fixed bytes); os.urandom by default.
    """

    __slots__ = ("_counter", "_format")

    def __init__(self, seed: bytes | None = None) -> None:
        raw = seed if seed is not None else os.urandom(16)
        if len(raw) != 16:
            raise ValueError("seed must be 16 bytes")
        h = raw.hex()
        variant = "89ab"[raw[8] & 0x3]
        # The prefix is hex digits and dashes: no `%` to escape. One %-format per id is
        # cheaper than an f-string with a format spec.
        self._format = f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-%012x"
        self._counter = itertools.count(int.from_bytes(raw[10:16], "big"))

    def new(self) -> str:
        """A new id (the counter wraps after 2**48 ids: that many are never alive at once)."""
        return self._format % (next(self._counter) & _COUNTER_MASK)
