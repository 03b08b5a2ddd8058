"""The Spark write matrix: every format x failure/race case, several rounds, exact row counts.

Why: "a failed job never shows a row, a successful one shows each row once, and nothing is left
behind" is a claim about races; it is only believable with counts over repeated rounds. Each
round of each case writes to a fresh table on its own local stack (with a gateway), judges the
outcome with Spark's reader AND the format's own reader as the storage owner
(``devstack/table_audit.py``), and counts duplicate rows, lost rows, silent tears (a result no
serial order of the successful jobs produces), orphan objects and unexpected errors.

Cases: ``retry`` (tasks fail once, Spark retries), ``abort_late`` (one task always fails while the
others are slowed before their file completes, to finish after ``abort``), ``before_commit`` (the
driver fails after every task reported), ``append+append``, ``overwrite+overwrite``,
``overwrite+append``, ``create+create`` and ``create+overwrite`` (two jobs at once, both drivers
committing at the same wall-clock moment; ``create+overwrite``: an append and an overwrite that
both find no table), ``slow_commit`` (parquet: an overwrite whose commit sleeps 8 s past its
point of no return on a 2 s lease while a second overwrite plans and commits: the lease is
renewed, so the second conflicts and the first keeps its table), and ``speculation``
(partition 0's first attempt lags, a speculative copy wins, the killed duplicate finishes its
file after the commit; on a two-host standalone cluster, see ``write_speculation.py`` for why
not ``local-cluster``).
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest.mock import patch

from devstack.spark_writes import concurrently, frame, is_conflict, save, spark_ids
from devstack.table_audit import TableAuditor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from devstack.stack_info import StackInfo

FORMATS = ("parquet", "delta", "lance", "iceberg")
# ADLS (Azurite): the formats the data source writes there (no Iceberg: the catalog emulator
# writes Iceberg metadata on S3 only); results under "<format>@adls"
ADLS_FORMATS = ("parquet", "delta", "lance")
# GCS (fake-gcs-server behind the stack's layer): plain tables only (no Delta there, and the
# owner's Lance audit would need a token of its own); results under "<format>@gcs"
GCS_FORMATS = ("parquet",)
CASES = ("retry", "abort_late", "before_commit", "append+append", "overwrite+overwrite",
         "overwrite+append", "create+create", "create+overwrite")  # on the local[2,2] session
PLAIN_CASES = ("slow_commit",)  # plain tables only (the commit lease is theirs)
SPECULATION = "speculation"  # on its own speculating cluster session
SLOW_COMMIT = "lease@0=2,slow_commit@0=8"  # an 8 s commit on a 2 s lease, renewed every 0.5 s
SLOW_RIVAL_AFTER_S = 4.0  # the rival overwrite starts (and plans) while the first sleeps
SEED = list(range(1000, 1012))
A = list(range(0, 40))
B = list(range(100, 140))
RACE_START_S = 30.0  # generous: both jobs' tasks must be done by then on a loaded machine


@dataclass
class CaseCounts:
    """One format x case over all rounds (a "violation" is any of the last five)."""

    rounds: int = 0
    ok: int = 0
    expected_conflicts: int = 0
    duplicate_rows: int = 0
    lost_rows: int = 0
    silent_tears: int = 0
    orphans: int = 0
    unexpected_errors: int = 0
    pending_uploads: int = 0  # invisible, left to the bucket's lifecycle rule: not a violation
    # Lance: a late attempt's files and record, which the next cleanup on the dataset deletes
    # (``attempts.sweep_ended``): not a violation either
    awaiting_sweep: int = 0
    speculative_attempts: int = 0  # speculation: attempts Spark launched as speculative copies
    speculative_wins: int = 0  # ... and those that became the partition's result
    notes: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (self.duplicate_rows + self.lost_rows + self.silent_tears + self.orphans
                + self.unexpected_errors)


class _Round:
    """One case on one fresh table."""

    def __init__(self, spark: SparkSession, info: StackInfo, auditor: TableAuditor, fmt: str,
                 storage: str = "s3") -> None:
        self.spark, self.info, self.auditor, self.fmt = spark, info, auditor, fmt
        self.name = f"w_{uuid.uuid4().hex[:10]}"
        self.qualified = f"{info.namespace}.{self.name}"
        self.url = info.gateway_url if fmt == "iceberg" else ""
        self.warehouse = info.warehouse_for(storage).name
        self.options = {"warehouse": self.warehouse}
        if storage == "adls":  # Lakekeeper vends no endpoint: tasks reach Azurite by option
            assert info.azure is not None
            self.options["storage_endpoint"] = info.azure.blob_endpoint
        if storage == "gcs":  # likewise: tasks reach fake-gcs-server's layer by option
            assert info.gcs is not None
            self.options["storage_endpoint"] = info.gcs.endpoint

    def write(self, rows: list[int], mode: str, fault: str = "", parts: int = 4) -> None:
        save(frame(self.spark, rows[0], len(rows), parts), self.qualified, self.fmt, mode,
             fault=fault, catalog_url=self.url, options=self.options)

    def job(self, rows: list[int], mode: str, fault: str) -> Callable[[], None]:
        return lambda: self.write(rows, mode, fault)

    def observe(self) -> tuple[list[int], list[int], list[str], int, int]:
        """(Spark's ids, the native reader's ids, orphans, pending uploads, objects awaiting
        the Lance ledger's sweep)."""
        ids = spark_ids(self.spark, self.qualified, self.fmt, self.url, self.options)
        if self.fmt == "iceberg":
            table = self.auditor.iceberg_table(self.info.namespace, self.name)
            audit = self.auditor.audit("iceberg", str(table.location()), table)
        else:
            from lakegate_client import Client, tables

            with Client(f"grpc+unix:{self.info.gateway.grpc_uds}",
                        warehouse=self.warehouse) as client:
                location = tables.describe_table(client, self.info.namespace, self.name).location
            audit = self.auditor.audit(self.fmt, location)
        return (ids, audit.native_ids, audit.orphans, audit.pending_uploads,
                len(audit.awaiting_sweep))


def _judge(counts: CaseCounts, observed: tuple[list[int], list[int], list[str], int, int],
           allowed: list[list[int]]) -> None:
    spark_seen, native, orphans, pending, awaiting = observed
    counts.orphans += len(orphans)
    counts.pending_uploads += pending
    counts.awaiting_sweep += awaiting
    if orphans:
        counts.notes.append(f"orphans {orphans[:3]}")
    for ids in (spark_seen, native):
        dup = sum(n - 1 for n in Counter(ids).values() if n > 1)
        counts.duplicate_rows += dup
        if sorted(ids) in allowed:
            continue
        best = min(allowed, key=lambda rows: len(set(rows) ^ set(ids)))
        lost = len(set(best) - set(ids))
        counts.lost_rows += lost
        if not dup and not lost:
            counts.silent_tears += 1
            counts.notes.append(f"{len(ids)} rows match no serial outcome")


def _run_case(r: _Round, case: str, counts: CaseCounts) -> None:
    """Run one round of ``case`` and add its outcome to ``counts``."""
    counts.rounds += 1
    allowed: list[list[int]]
    if case in ("retry",):
        r.write(SEED, "overwrite")
        r.write(A, "append", fault="after_land@1#once,before_land@2#once")
        allowed = [sorted(SEED + A)]
    elif case in ("abort_late", "before_commit"):
        r.write(SEED, "overwrite")
        fault = ("after_land@0,slow@1=4,slow@2=4,slow@3=4" if case == "abort_late"
                 else "before_commit@0")
        try:
            r.write(A, "append", fault=fault)
            counts.unexpected_errors += 1
            counts.notes.append("a job with an always-failing task succeeded")
        except Exception as exc:  # noqa: BLE001 - judged below
            if "injected fault" not in str(exc):
                counts.unexpected_errors += 1
                counts.notes.append(_last_line(exc))
        time.sleep(8 if case == "abort_late" else 0)  # let the slowed tasks finish
        allowed = [SEED]
    elif case == "slow_commit":
        r.write(SEED, "overwrite")
        start = time.time() + RACE_START_S
        slow = f"{SLOW_COMMIT},commit_at@0={start}"

        def rival() -> None:  # plans after the first job's lease would have run out unrenewed
            time.sleep(max(0.0, start + SLOW_RIVAL_AFTER_S - time.time()))
            r.write(B, "overwrite")

        errors = concurrently(r.spark, r.job(A, "overwrite", slow), rival)
        allowed = _allowed("overwrite+overwrite", errors)
        _count_errors(counts, case, errors)
    else:
        first, second = case.split("+")
        if first != "create":
            r.write(SEED, "overwrite")
        # create+overwrite: an append and an overwrite that both find no table yet
        modes = ("append", "append" if second == "create" else second) if first == "create" \
            else (first, second)
        at = f"commit_at@0={time.time() + RACE_START_S}"  # both drivers commit at one moment
        errors = concurrently(r.spark, r.job(A, modes[0], at), r.job(B, modes[1], at))
        allowed = _allowed(case, errors)
        _count_errors(counts, case, errors)
    _judge(counts, r.observe(), allowed)
    counts.ok += 1


def _count_errors(counts: CaseCounts, case: str, errors: list[BaseException | None]) -> None:
    for error in errors:
        if error is None:
            continue
        # appends never conflict (README): only a race with an overwrite may fail loudly
        if is_conflict(error) and ("overwrite" in case or case == "slow_commit"):
            counts.expected_conflicts += 1
            counts.notes.append(f"conflict: {_last_line(error)}")
        else:
            counts.unexpected_errors += 1
            counts.notes.append(_last_line(error))


def _run_speculation(make_round: Callable[[], _Round], counts: CaseCounts) -> None:
    """One ``speculation`` round (on a :func:`write_speculation.speculation_session`): tries on
    fresh tables until one had a speculative attempt (every try is judged)."""
    from hardening.write_speculation import TRIES

    for _ in range(TRIES):
        if _speculation_try(make_round(), counts):
            return
    counts.unexpected_errors += 1
    counts.notes.append(f"no speculative attempt in {TRIES} tries: the round proved nothing")


def _speculation_try(r: _Round, counts: CaseCounts) -> bool:
    from hardening.write_speculation import SLOW_S, job_group, settled_attempts

    counts.rounds += 1
    r.write(SEED, "overwrite")
    group, started = f"speculation-{r.name}", time.monotonic()
    with job_group(r.spark, group):
        r.write(A, "append", fault=f"slow@0={SLOW_S}#once")
    took = time.monotonic() - started
    attempts = settled_attempts(r.spark, group)
    time.sleep(max(0.0, started + SLOW_S + 3 - time.monotonic()))  # the duplicate is done
    counts.speculative_attempts += attempts.speculative
    counts.speculative_wins += attempts.speculative_won
    if attempts.speculative == 0:
        counts.notes.append(f"a try without a speculative attempt (job {took:.1f} s), retried")
    elif attempts.speculative_won == 0:
        counts.notes.append("the slowed first attempt beat its speculative copy")
    _judge(counts, r.observe(), [sorted(SEED + A)])
    counts.ok += 1
    return attempts.speculative > 0


def _last_line(error: BaseException) -> str:
    """The exception line of a (Py4J-wrapped) Python traceback: what actually went wrong."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()
             and not ln.strip().startswith(("at ", "File ", "^", "..."))]
    useful = [ln for ln in lines if "Error" in ln or "Exception" in ln]
    return (useful[-1] if useful else lines[-1] if lines else repr(error))[:300]


def _allowed(case: str, errors: list[BaseException | None]) -> list[list[int]]:
    """The outcomes a serial order of the jobs that succeeded can produce."""
    a_ok, b_ok = errors[0] is None, errors[1] is None
    base = [] if case.startswith("create+") else SEED
    if case == "create+overwrite":  # append A, overwrite B, on no table
        if a_ok and b_ok:
            return [sorted(B), sorted(A + B)]
        return [sorted(A)] if a_ok else [sorted(B)] if b_ok else [[]]
    if case in ("append+append", "create+create"):
        return [sorted(base + (A if a_ok else []) + (B if b_ok else []))]
    if case == "overwrite+overwrite":
        outcomes = ([A] if a_ok else []) + ([B] if b_ok else [])
        return outcomes or [SEED]
    # overwrite (A) + append (B)
    if a_ok and b_ok:
        return [A, sorted(A + B)]
    if a_ok:
        return [A]
    return [sorted(SEED + B)] if b_ok else [SEED]


def run_write_suite(run_dir: Path, *, rounds: int = 3, formats: tuple[str, ...] = FORMATS,
                    speculation: bool = True,
                    adls_formats: tuple[str, ...] = ADLS_FORMATS,
                    gcs_formats: tuple[str, ...] = GCS_FORMATS) -> dict[str, Any]:
    """Start a stack (S3 and Azurite) with a gateway and a ``local[2,2]`` session, run the
    matrix on S3 (``formats``), on ADLS (``adls_formats``, results as ``<format>@adls``) and on
    GCS (``gcs_formats``, ``<format>@gcs``),
    then the ``speculation`` case (S3) on a two-host cluster session; stop everything."""
    from devstack.launcher import start_stack, stop_stack
    from devstack.spark_session import spark_session
    from hardening.crash_enumeration import run_crash_enumeration
    from hardening.write_speculation import speculation_session

    crash = run_crash_enumeration()  # in-process on the fake store: exhaustive and quick
    storages = ("s3", *(("adls",) if adls_formats else ()), *(("gcs",) if gcs_formats else ()))
    stack = start_stack(run_dir / "stack", with_gateway=True, storages=storages)
    results: dict[str, dict[str, CaseCounts]] = {}
    try:
        info = stack.info
        auditor = TableAuditor(info)
        env = {"LAKEGATE_URL": f"grpc+unix:{info.gateway.grpc_uds}",
               "LAKEGATE_WAREHOUSE": info.warehouse.name, "LAKEGATE_TEST_FAULTS": "1",
               "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        with patch.dict(os.environ, env):
            spark = spark_session("local[2,2]", app_name="lakegate-harden-writes",
                                  conf={"spark.python.task.killTimeout": "30s"})
        # Every (format, store) cell: S3's under the format's name, the others' suffixed.
        cells = [*((fmt, "s3") for fmt in formats), *((fmt, "adls") for fmt in adls_formats),
                 *((fmt, "gcs") for fmt in gcs_formats)]
        auditors = {store: auditor if store == "s3" else TableAuditor(info, store)
                    for store in {store for _, store in cells}}
        try:
            for fmt, store in cells:
                name = fmt if store == "s3" else f"{fmt}@{store}"
                for case in CASES + (PLAIN_CASES if fmt == "parquet" else ()):
                    _rounds(results, name, case, rounds,
                            lambda c, f=fmt, k=case, s=store: _run_case(  # type: ignore[misc]
                                _Round(spark, info, auditors[s], f, s), k, c))
        finally:
            spark.stop()
        if speculation:
            with speculation_session(run_dir / "cluster", info) as cluster_spark:
                for fmt in formats:
                    _rounds(results, fmt, SPECULATION, rounds,
                            lambda c, f=fmt: _run_speculation(  # type: ignore[misc]
                                lambda: _Round(cluster_spark, info, auditor, f), c))
    finally:
        stop_stack(run_dir / "stack")
    return {
        "rounds": rounds,
        "violations": sum(c.violations for cases in results.values() for c in cases.values())
        + crash["violations"],
        "crash_points": crash,
        "cases": {fmt: {case: {**asdict(c), "notes": c.notes[:5]} for case, c in cases.items()}
                  for fmt, cases in results.items()},
    }


def _rounds(results: dict[str, dict[str, CaseCounts]], fmt: str, case: str, rounds: int,
            run: Callable[[CaseCounts], None]) -> None:
    """``rounds`` rounds of one format x case; an exception is counted and the matrix goes on."""
    counts = results.setdefault(fmt, {}).setdefault(case, CaseCounts())
    for _ in range(rounds):
        try:
            run(counts)
        except Exception as exc:  # noqa: BLE001 - counted, the matrix goes on
            counts.unexpected_errors += 1
            counts.notes.append(_last_line(exc))


def render_write_suite(writes: dict[str, Any]) -> list[str]:
    """Markdown rows for the hardening report."""
    lines = ["", f"## Spark write matrix ({writes['rounds']} rounds per case)", "",
             "| format | case | rounds | ok | conflicts (expected) | duplicate rows | lost rows "
             "| silent tears | orphans | unexpected errors | pending uploads | awaiting sweep "
             "| speculative attempts (won) | notes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for fmt, cases in writes["cases"].items():
        for case, c in cases.items():
            lines.append(
                f"| {fmt} | {case} | {c['rounds']} | {c['ok']} | {c['expected_conflicts']} "
                f"| {c['duplicate_rows']} | {c['lost_rows']} | {c['silent_tears']} "
                f"| {c['orphans']} | {c['unexpected_errors']} | {c.get('pending_uploads', 0)} "
                f"| {c.get('awaiting_sweep', 0)} "
                f"| {c.get('speculative_attempts', 0)} ({c.get('speculative_wins', 0)}) "
                f"| {'; '.join(c['notes'])[:300]} |")
    if "crash_points" in writes:
        from hardening.crash_enumeration import render_crash_enumeration

        lines += render_crash_enumeration(writes["crash_points"])
    return lines
