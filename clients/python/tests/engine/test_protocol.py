"""The one interface every format implements (``engine/protocol.py``), and the one way in
(``engine/formats/__init__.py``: ``protocol_for``)."""

from __future__ import annotations

import inspect

import pytest

from lakegate_client.engine import protocol
from lakegate_client.engine.formats import PLAIN_FORMATS, protocol_for

STEPS = [name for name, _ in inspect.getmembers(protocol.CommitProtocol, inspect.isfunction)
         if not name.startswith("_")]


def test_the_interface_names_the_steps() -> None:
    assert STEPS == ["abort", "commit", "finish_abandoned", "plan", "recover"]
    assert protocol.STEPS == ("plan", "stage", "point of no return", "roll forward", "abort",
                              "recover")


@pytest.mark.parametrize("fmt", ["delta", "lance", *PLAIN_FORMATS])
def test_every_format_implements_every_step_with_the_interfaces_signature(fmt: str) -> None:
    implementation = protocol_for(fmt)
    for step in STEPS:
        wanted = inspect.signature(getattr(protocol.CommitProtocol, step))
        got = inspect.signature(getattr(type(implementation), step))
        assert list(got.parameters) == list(wanted.parameters), (fmt, step)


def test_the_plain_formats_share_one_protocol_and_the_others_have_their_own() -> None:
    assert len({id(protocol_for(f)) for f in PLAIN_FORMATS}) == 1
    assert len({id(protocol_for(f)) for f in ("delta", "lance", "parquet")}) == 3


@pytest.mark.parametrize("fmt", ["iceberg", "orc", ""])
def test_a_format_without_a_protocol_is_refused_by_name(fmt: str) -> None:
    with pytest.raises(ValueError, match=f"no commit protocol for {fmt!r}"):
        protocol_for(fmt)
