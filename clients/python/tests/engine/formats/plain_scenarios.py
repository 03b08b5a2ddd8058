"""Plain-table crash scenarios (append, overwrite, create) for ``crash_points``: the job as Spark
runs it on the driver (``commit``, then ``abort`` when it raised, nothing after a kill), recovery
as the next writer's planning, and the invariant.

Invariant after recovery: the data files are exactly the old ones or exactly the new ones; the
job reported success if and only if the new ones are visible (nothing to check after a kill); no
intent, committing marker or probe object is left. Pending uploads are counted, not judged: an
upload staged by a task whose driver died before writing its intent is known to nobody but the
bucket's ``AbortIncompleteMultipartUpload`` rule.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakegate_client.engine import retrying, staged
from lakegate_client.engine.formats import plain as plain_format
from lakegate_client.engine.formats.plain import (
    INTENT_PREFIX,
    MARKER,
    CommitTiming,
    PlainPlan,
    commit_plain,
    plan_plain,
)
from lakegate_client.engine.stores import as_store
from lakegate_client.engine.stores.base import PendingUpload, S3Location

if TYPE_CHECKING:
    import pytest
from lakegate_client.engine.stores.gcs import STAGING_DIR

from ..stores.fake_adls import FakeAdls
from ..stores.fake_gcs import FakeGcs
from ..stores.fake_s3 import FakeS3, Killed

WHERE = S3Location.parse("s3://b/wh/t1")
WRITE_ID = "w1"
CASES = ("append", "overwrite", "create", "conflict")
OTHER = "part-other-00000-r.parquet"  # "conflict": another job's append after planning
RIVAL = "w2"  # the rival overwrite of the "stall" kind
RIVAL_FILE = f"part-{RIVAL}-00000-r.parquet"


class FakeClock:
    """Wall-clock seconds that only move when told (leases expire on ``advance``)."""

    def __init__(self) -> None:
        self.t = 1_000_000.0

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@dataclass
class PlainScenario:
    """One case on a table of two old files (none for ``create``); the job stages two files.

    ``conflict``: an overwrite that must fail (another job appended after it planned), so that
    its abort's calls are enumerated too.
    """

    case: str
    uploads: int = 2
    store: dict[str, bool] = field(default_factory=dict)  # FakeS3 behaviour flags
    adls: bool = False  # on FakeAdls (Azure's answers, ``AzureBlobStore``'s calls) instead
    clock: FakeClock = field(default_factory=FakeClock)
    rival_committed: bool = False
    _plan: PlainPlan | None = None
    _staged: list[PendingUpload] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"parquet/{self.case}" + ("@adls" if self.adls else "")

    @property
    def timing(self) -> CommitTiming:
        return CommitTiming(now=self.clock.now, sleep=lambda _s: None, lease_s=60.0)

    def old(self) -> list[str]:
        if self.case == "create":
            return []
        old = [f"part-old-{i:05d}-r.parquet" for i in range(2)]
        return sorted([*old, OTHER]) if self.case == "conflict" else old

    def new(self) -> list[str]:
        """What the table is when the job committed (``conflict``: it never may)."""
        mine = [f"part-{WRITE_ID}-{i:05d}-r.parquet" for i in range(self.uploads)]
        if self.case == "conflict":
            return self.old()
        return sorted(self.old() + mine) if self.case == "append" else mine

    def mine(self) -> list[str]:
        return [f"part-{WRITE_ID}-{i:05d}-r.parquet" for i in range(self.uploads)]

    def fresh(self) -> FakeS3:
        self.clock, self.rival_committed = FakeClock(), False
        s3: Any = FakeAdls() if self.adls else FakeS3(**self.store)
        for rel in self.old():
            if rel != OTHER:
                s3.objects[WHERE.key(rel)] = rel.encode()
        if self.case != "create":
            s3.objects[WHERE.key(MARKER)] = json.dumps({"state": "done"}).encode()
        self._plan = plan_plain(s3, WHERE, "parquet", self.timing)
        if self.case == "conflict":
            s3.objects[WHERE.key(OTHER)] = OTHER.encode()
        self._staged = [_stage(s3, WHERE.key(rel), rel.encode()) for rel in self.mine()]
        return s3  # type: ignore[no-any-return]

    def run(self, s3: FakeS3) -> bool:
        """``publish_plain`` and then Spark's ``abort`` (which runs after a raising commit)."""
        assert self._plan is not None
        overwrite = self.case != "append"
        try:
            commit_plain(s3, WHERE, "parquet", self._plan, self._staged, overwrite=overwrite,
                         write_id=WRITE_ID, timing=self.timing)
        except Killed:
            raise
        except Exception:  # noqa: BLE001 - the job failed: Spark aborts it
            for _ in range(2):  # publish_plain's own abort, then Spark's abort
                try:
                    plain_format.abort_plain_job(s3, WHERE, self._staged, WRITE_ID)
                except Killed:
                    raise
                except Exception:  # noqa: BLE001, S110 - Spark logs a failed abort and goes on
                    pass
            return False
        keep = [u.upload_id for u in self._staged]
        retrying.after_commit("the upload sweep", WRITE_ID,
                              lambda: staged.sweep(s3, WHERE, WRITE_ID, keep))
        return True

    def recover(self, s3: FakeS3) -> None:
        """The next writer plans after every lease ran out."""
        self.clock.advance(3600)
        plan_plain(s3, WHERE, "parquet", self.timing)

    def stall(self, s3: FakeS3) -> None:
        """While the job is paused past every lease: a rival overwrite plans (recovering what
        it finds abandoned) and commits one file of its own."""
        self.clock.advance(3600)
        try:
            plan = plan_plain(s3, WHERE, "parquet", self.timing)
            upload = _stage(s3, WHERE.key(RIVAL_FILE), b"rival")
        except Exception:  # noqa: BLE001 - the rival could not even start
            return
        try:
            commit_plain(s3, WHERE, "parquet", plan, [upload], overwrite=True, write_id=RIVAL,
                         timing=self.timing)
            self.rival_committed = True
        except Exception:  # noqa: BLE001 - a loud conflict: the rival failed, honestly
            plain_format.abort_plain_job(s3, WHERE, [upload], RIVAL)

    def _finals(self, job: bool | None) -> list[list[str]]:
        """Every table a serial order of the jobs that reported success can leave (the job
        itself either way after a kill)."""
        mine = self.mine()
        jobs: list[tuple[bool, list[str]]] = []  # (overwrite, files)
        if self.rival_committed:
            jobs.append((True, [RIVAL_FILE]))
        outcomes: list[list[str]] = []
        for with_job in ([True, False] if job is None else [job]):
            run = jobs + ([(self.case != "append", mine)] if with_job else [])
            for order in itertools.permutations(run):
                state = self.old()
                for overwrite, files in order:
                    state = sorted(files if overwrite else state + files)
                outcomes.append(state)
        return outcomes

    def violations(self, s3: FakeS3, committed: bool | None) -> list[str]:
        data = sorted(WHERE.relative(k) for k in s3.objects if k.endswith(".parquet"))
        out = []
        landed = False if self.case == "conflict" else committed  # a conflict never lands
        if data not in self._finals(landed):
            out.append(f"{data} is no serial outcome (job reported {committed}, rival "
                       f"{self.rival_committed})")
        if self.case == "conflict" and committed:
            out.append("an overwrite that had to conflict reported success")
        hidden = [WHERE.relative(k) for k in s3.objects if not k.endswith(".parquet")]
        out += [f"orphan {rel}" for rel in hidden
                if rel.startswith((INTENT_PREFIX, "_lakegate_probe"))]
        marker = s3.objects.get(WHERE.key(MARKER))
        if marker is not None and json.loads(marker).get("state") == "committing":
            out.append("marker left committing")
        return out


@dataclass
class GcsPlainScenario(PlainScenario):
    """The same cases on GCS (``fake_gcs.FakeGcs``: the real GcsStore over an in-memory JSON
    API): files staged as hidden part objects, completed by compose; ``store`` takes
    ``honours_compose_conditions``."""

    @property
    def name(self) -> str:
        return f"parquet/gcs/{self.case}"

    def fresh(self) -> FakeGcs:  # type: ignore[override]
        self.clock, self.rival_committed = FakeClock(), False
        gcs = FakeGcs(**self.store)
        for rel in self.old():
            if rel != OTHER:
                gcs.seed(WHERE.key(rel), rel.encode())
        if self.case != "create":
            gcs.seed(WHERE.key(MARKER), json.dumps({"state": "done"}).encode())
        self._plan = plan_plain(gcs, WHERE, "parquet", self.timing)
        if self.case == "conflict":
            gcs.seed(WHERE.key(OTHER), OTHER.encode())
        self._staged = [_stage(gcs, WHERE.key(rel), rel.encode()) for rel in self.mine()]
        return gcs

    def staging_left(self, gcs: FakeGcs) -> int:
        """Staged part objects still in the bucket (hidden from readers; counted, not judged)."""
        return sum(f"/{STAGING_DIR}/" in k for k in gcs.objects)


def _stage(s3: Any, key: str, data: bytes) -> PendingUpload:
    """``data`` staged as one part at ``key`` (``s3``: a fake store or client of any family)."""
    store = as_store(s3, WHERE.bucket)
    upload_id = store.start_staged(key)
    return PendingUpload(key, upload_id, ((1, store.stage_part(key, upload_id, 1, data)),),
                         len(data))


def staged_parts(s3: Any, where: S3Location, write_id: str, n: int) -> list[PendingUpload]:
    """``n`` one-part uploads of a job, pending (as its tasks leave them)."""
    out = []
    for i in range(n):
        key = where.key(f"part-{write_id}-{i:05d}-r.parquet")
        uid = s3.create_multipart_upload(Bucket="b", Key=key)["UploadId"]
        etag = s3.upload_part(Bucket="b", Key=key, UploadId=uid, PartNumber=1,
                              Body=f"{write_id}{i}".encode())["ETag"]
        out.append(PendingUpload(key, uid, ((1, etag),), 3))
    return out


def visible_data(s3: Any, where: S3Location) -> list[str]:
    """The table's data files a reader lists (relative paths)."""
    return sorted(where.relative(k) for k in s3.objects if k.endswith(".parquet"))


def without_roll_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain protocol with its roll-forward's retries and its recovery removed: what the
    enumerations must catch (``the_enumeration_catches_a_broken_protocol``)."""
    def no_retry(what: str, step: Any, timing: object) -> Any:
        return step()

    monkeypatch.setattr(plain_format, "_retried", no_retry)
    monkeypatch.setattr(plain_format, "recover_plain", lambda *_a, **_k: 0)
