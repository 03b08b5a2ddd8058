"""The audit trail: one `lakegate.audit` log line per credential decision.

Why: a credential grant is the one act an operator must be able to attribute afterwards (who got
which table's storage keys, for reading or writing), and so is a refusal (who tried). Each line
names the caller, the table, the access and the outcome (`hit`/`miss`/`coalesced`/`stale` for a
grant, `denied` for a policy refusal, the error type when the service refused or failed, e.g.
`NotFoundError`) and never a credential or a token. Policy refusals are decided before the
service, by the Gate (surfaces/ingress.py), which writes their line and also counts them
(`lakegate_ingress_rejected_total{reason="policy"}`). `LAKEGATE__LOG__AUDIT=false` turns the
lines off (each costs about as much CPU as serving a cached credential: cached HTTP/UDS served
11.6k req/s with them and 24.5k without in one profile run here). Operators who do not want
it set the `lakegate.audit` logger above INFO.

A coalesced waiter's line (`defer=True`) is written just after the waiter is answered
(`loop.call_soon`), not before: a herd of K coalesced waiters is answered first and audited
after, so the line's cost (JSON formatting, redaction and the write) is not K times
added to the herd's latency. Every other line is written before the answer leaves. Order is
kept (call_soon is FIFO) and every decision still gets its line.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.models import AccessMode, CallerIdentity, RequestContext, Scope

AUDIT_LOGGER = "lakegate.audit"
DENIED = "denied"  # the outcome of a policy refusal
_log = logging.getLogger(AUDIT_LOGGER)


def configure_audit(enabled: bool) -> None:
    """Turn the audit lines on (INFO, whatever LOG__LEVEL says) or off (LOG__AUDIT=false)."""
    _log.setLevel(logging.INFO if enabled else logging.WARNING)


def credential_event(
    ctx: RequestContext,
    caller: CallerIdentity | None,
    table: Scope,
    access: AccessMode,
    outcome: str,
    *,
    defer: bool = False,
) -> None:
    """Log one decision on `table` = (warehouse, namespace levels, table name or None).

    With `defer` (coalesced waiters), on a running loop the line is written just after the
    current step, i.e. after the caller's answer.
    """
    if not _log.isEnabledFor(logging.INFO):
        return
    warehouse, namespace, name = table
    extra = {
        "audit": "credential",
        "caller": caller.name if caller is not None else "anonymous",
        "warehouse": warehouse,
        "namespace": ".".join(namespace),
        "table": name,
        "access": access.value,
        "outcome": outcome,
        "request_id": ctx.request_id,
    }
    if defer:
        try:
            asyncio.get_running_loop().call_soon(_emit, outcome, extra)
            return
        except RuntimeError:  # no running loop: write it now
            pass
    _emit(outcome, extra)


def _emit(outcome: str, extra: dict[str, Any]) -> None:
    _log.info("credential %s", outcome, extra=extra)
