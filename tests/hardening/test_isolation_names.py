"""Issue #28's isolation probes are what they claim (else the suite is vacuous)."""

from __future__ import annotations

import pytest

from gateway.errors import PermissionDeniedError
from gateway.names import fold, fold_level
from gateway.surfaces.ingress import check_not_forged
from hardening.isolation_names import NS_SPELLINGS, REBINDING, TWIN_NS, TWIN_SPELLINGS, TWIN_TABLE


def test_every_twin_spelling_is_the_same_catalog_name() -> None:
    assert {fold(t) for t in TWIN_SPELLINGS} == {fold(TWIN_TABLE)}
    assert len(set(TWIN_SPELLINGS)) == len(TWIN_SPELLINGS)  # distinct strings
    assert {fold_level(n) for n in NS_SPELLINGS} == {fold_level(TWIN_NS)}


@pytest.mark.parametrize("headers", REBINDING)
def test_every_rebinding_probe_is_one_the_gate_refuses(headers: dict[str, str]) -> None:
    with pytest.raises(PermissionDeniedError):
        check_not_forged({"Host": "127.0.0.1:8765", "X-Lakegate-Request": "1", **headers},
                         require_marker=True)
