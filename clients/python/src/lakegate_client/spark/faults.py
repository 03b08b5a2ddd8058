"""Test-only fault injection for the write path (``test_fault`` option, off unless enabled).

Why: "a failed job never shows a row" is only proven by failing jobs at the awkward moments. The
option is refused unless ``$LAKEGATE_TEST_FAULTS=1`` in the driver, so no production job can carry
it by accident. Rules, comma-separated, each ``<stage>@<partition>[#once]`` or
``slow@<partition>=<seconds>[#once]``:

- ``before_land``: the task fails after starting its file, before the file is complete;
- ``after_land``: the task fails after its file is fully written (staged, fragment or object);
- ``before_commit``: the driver fails after every task reported, before the commit (partition
  is ignored; use ``@0``);
- ``#once``: only the first attempt of the task fails (Spark's retry then succeeds);
- ``slow@p=s``: task ``p`` sleeps ``s`` seconds once it has read all its rows, before its file
  is complete, so that it finishes after a failing job's ``abort`` (on a session whose
  ``spark.python.task.killTimeout`` lets a cancelled task run that long); ``slow@p=s#once``
  slows only the first attempt (a speculative copy of the task then overtakes it);
- ``commit_at@0=t``: the driver's commit waits until the epoch time ``t``, so that two racing
  jobs commit at the same moment;
- ``lease@0=s``: a plain table's commit holds its intent on an ``s``-second lease (instead of
  60 s); ``slow_commit@0=s``: it sleeps ``s`` seconds right after its point of no return (the
  first upload completion), so the commit outlives that lease unless it is renewed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

ENABLE_ENV = "LAKEGATE_TEST_FAULTS"
STAGES = ("before_land", "after_land", "before_commit")
_VALUED = ("slow", "commit_at", "lease", "slow_commit")  # <stage>@<partition>=<seconds>


class InjectedFault(RuntimeError):
    """Raised by a ``test_fault`` rule (the tests match on its message)."""


@dataclass(frozen=True)
class Rule:
    stage: str
    partition: int
    once: bool = False
    delay_s: float = 0.0


@dataclass(frozen=True)
class Faults:
    """Parsed ``test_fault`` rules; the empty value injects nothing."""

    rules: tuple[Rule, ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Faults:
        """Parse the option; ``ValueError`` names what is wrong (and when it is not enabled)."""
        if not spec:
            return cls()
        if os.environ.get(ENABLE_ENV) != "1":
            raise ValueError(f"the 'test_fault' option is test-only: set ${ENABLE_ENV}=1")
        return cls(tuple(_rule(part.strip()) for part in spec.split(",") if part.strip()))

    def midway(self, items: Iterator[T], partition: int, attempt: int) -> Iterator[T]:
        """``items`` with the ``before_land`` point after the first one (a file half written)."""
        return _midway(self, items, partition, attempt) if self.rules else items

    def hit(self, stage: str, partition: int, attempt: int = 0) -> None:
        """Fail (or sleep) if a rule matches this point of this task attempt."""
        for rule in self.rules:
            if rule.partition != partition and stage != "before_commit":
                continue
            if rule.stage == "slow" and stage == "input_done":
                if not (rule.once and attempt > 0):
                    time.sleep(rule.delay_s)
            elif rule.stage == "commit_at" and stage == "before_commit":
                time.sleep(max(0.0, rule.delay_s - time.time()))
            elif rule.stage == "slow_commit" and stage == "point_of_no_return":
                time.sleep(rule.delay_s)
            elif rule.stage in _VALUED:
                continue
            elif rule.stage == stage and not (rule.once and attempt > 0):
                raise InjectedFault(f"injected fault {stage}@{partition} (attempt {attempt})")


    def lease_s(self) -> float | None:
        """The commit lease a ``lease@0=s`` rule sets (None: the default)."""
        return next((r.delay_s for r in self.rules if r.stage == "lease"), None)


def _midway(faults: Faults, items: Iterator[T], partition: int, attempt: int) -> Iterator[T]:
    for index, item in enumerate(items):
        yield item
        if index == 0:
            faults.hit("before_land", partition, attempt)
    faults.hit("input_done", partition, attempt)  # every row read, the file not yet complete


def _rule(text: str) -> Rule:
    stage, sep, rest = text.partition("@")
    if not sep or (stage not in STAGES and stage not in _VALUED):
        raise ValueError(f"bad test_fault rule {text!r}: want <stage>@<partition>[#once]")
    rest, _, flag = rest.partition("#")
    if flag not in ("", "once") or (flag and stage in ("commit_at", "lease", "slow_commit")):
        raise ValueError(f"bad test_fault flag {flag!r} in {text!r}")
    if stage in _VALUED:
        part, _, value = rest.partition("=")
        return Rule(stage, int(part), once=flag == "once", delay_s=float(value or 0))
    return Rule(stage, int(rest), once=flag == "once")
