"""Fault injection for tests: latency, error status (next N calls or with probability),
`Retry-After`, dropped connections, a shorter advertised credential lifetime, and reads that
lag writes (`replica_lag_ms`: replica.py).

`count > 0` fails the next N matching calls; else `probability > 0` fails each call with that
probability; else a `status` (or `drop_connection`) alone fails every matching call.
`operations` limits the fault to those operation names (default: every Lakekeeper route);
naming `sts_assume_role` fails the emulator's STS calls instead, which surface as Lakekeeper's
412 `ShortTermCredentialError` (as STS throttling does).

One active `FaultSpec` at a time; `POST /_emulator/faults` replaces it, `{"clear": true}` clears.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from devstack.emulator.replica import ReplicaLag


class FaultSpec(BaseModel):
    """Body of `POST /_emulator/faults` (all optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_ms: float = Field(default=0.0, ge=0, le=120_000)
    status: int | None = Field(default=None, ge=400, le=599)
    probability: float = Field(default=0.0, ge=0.0, le=1.0)
    count: int = Field(default=0, ge=0)
    retry_after: int | None = Field(default=None, ge=0)
    drop_connection: bool = False
    operations: list[str] | None = None
    credential_lifetime_s: int | None = Field(default=None, ge=1)
    # Table reads (loads, credentials) answer what the name held this long ago (replica.py).
    replica_lag_ms: float = Field(default=0.0, ge=0, le=60_000)
    # Change events reach NATS this much later (in order), as from a loaded catalog.
    event_delay_ms: float = Field(default=0.0, ge=0, le=60_000)
    clear: bool = False


@dataclass(frozen=True)
class Decision:
    """What to do with one request."""

    latency_s: float
    status: int | None
    drop: bool
    retry_after: int | None

    @property
    def fails(self) -> bool:
        return self.drop or self.status is not None


NO_FAULT = Decision(latency_s=0.0, status=None, drop=False, retry_after=None)


class Faults:
    """The active fault spec and its remaining `count` budget."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._spec = FaultSpec()
        self._remaining = 0
        self._rng = rng or random.Random()  # noqa: S311 - test fault injection, not crypto
        self.replica = ReplicaLag()

    def set(self, spec: FaultSpec) -> None:
        self._spec = FaultSpec() if spec.clear else spec
        self._remaining = self._spec.count
        self.replica.set_lag(self._spec.replica_lag_ms / 1000.0)

    def current(self) -> dict[str, object]:
        out = self._spec.model_dump(exclude={"clear"})
        out["remaining"] = self._remaining
        return out

    @property
    def event_delay_s(self) -> float:
        return self._spec.event_delay_ms / 1000.0

    @property
    def credential_lifetime_s(self) -> int | None:
        return self._spec.credential_lifetime_s

    def decide_sts(self) -> Decision:
        """Fault for one real STS call; only when `operations` names `sts_assume_role`."""
        if not self._spec.operations or "sts_assume_role" not in self._spec.operations:
            return NO_FAULT
        return self.decide("sts_assume_role")

    def decide(self, operation: str) -> Decision:
        """Decide the fault for one call of `operation` (consumes one `count` if it fires)."""
        spec = self._spec
        if spec.operations is not None and operation not in spec.operations:
            return NO_FAULT
        fire = False
        if spec.status is not None or spec.drop_connection:
            if self._remaining > 0:
                self._remaining -= 1
                fire = True
            elif spec.count == 0 and spec.probability > 0:
                fire = self._rng.random() < spec.probability
            elif spec.count == 0:
                fire = True  # a status with neither count nor probability fails every call
        latency = spec.latency_ms / 1000.0
        if not fire:
            return Decision(latency_s=latency, status=None, drop=False, retry_after=None)
        return Decision(
            latency_s=latency,
            status=spec.status if not spec.drop_connection else None,
            drop=spec.drop_connection,
            retry_after=spec.retry_after,
        )
