"""What the table audit counts as awaiting the Lance ledger's sweep rather than as orphans."""

from __future__ import annotations

import base64
import json

from devstack.table_audit import TableAuditor
from lakegate_client.engine.attempts import SWEEP
from lakegate_client.engine.job_intent import intent_name


def test_only_sweepable_records_of_ended_jobs_and_their_files_await_the_sweep() -> None:
    bodies = {
        "_lakegate_attempts/ended/00000-1-a.json": {"files": ["data/late.lance"], "sweep": SWEEP},
        "_lakegate_attempts/ended/00001-0-b.json": {"files": ["data/old.lance"]},  # no mark
        "_lakegate_attempts/ended/00002-0-c.json": {"files": ["data/used.lance"],
                                                    "sweep": SWEEP},  # names committed data
        "_lakegate_attempts/running/00000-0-d.json": {"files": ["data/mine.lance"],
                                                      "sweep": SWEEP},
    }
    named = "_lakegate_attempts/ended/00003-0-e." + base64.urlsafe_b64encode(
        b'["data/late2.lance"]').decode().rstrip("=") + ".files"  # its files in its name
    named_used = "_lakegate_attempts/ended/00004-0-f." + base64.urlsafe_b64encode(
        b'["data/used.lance"]').decode().rstrip("=") + ".files"
    objects = [*bodies, named, named_used, "data/late.lance", "data/old.lance",
               "data/used.lance", "data/mine.lance", "data/late2.lance", intent_name("running")]
    auditor = object.__new__(TableAuditor)
    auditor._read = lambda _location, rel: json.dumps(bodies[rel]).encode()  # type: ignore[method-assign]
    awaiting = auditor._awaiting_sweep("s3://b/t", objects, referenced={"data/used.lance"})
    assert awaiting == ["_lakegate_attempts/ended/00000-1-a.json", "data/late.lance",
                        named, "data/late2.lance"]
