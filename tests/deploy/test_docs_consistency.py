"""Docs cite only what the repository holds, and the deploy guide quotes the latest load test."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.deploy.manifests import DEPLOY, REPO_ROOT

pytestmark = pytest.mark.deploy

# Documents that live outside the repository; citing them leaves readers with a dead reference.
FOREIGN = ("DESIGN §", "DESIGN.md", "lakekeeper-api.md", "pylakekeeper.md", "../shared",
           "/work/shared", "engine-options.md")


def _tracked_text_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=True
    ).stdout.splitlines()
    return [
        f for f in out
        if f.endswith((".py", ".md", ".yaml", ".yml", ".toml", ".env", ".conf", "Makefile"))
        and f != "tests/deploy/test_docs_consistency.py"
    ]


def test_no_file_cites_a_document_outside_the_repository() -> None:
    offenders = []
    for rel in _tracked_text_files():
        path = REPO_ROOT / rel
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{rel}: {needle}" for needle in FOREIGN if needle in text]
    assert offenders == []


def test_deploy_guide_quotes_the_measured_http_throughput() -> None:
    results = (REPO_ROOT / "loadtest/results/README.md").read_text(encoding="utf-8")
    m = re.search(r"^\| http_tcp \| ([0-9,]+) \| [0-9,]+ \|", results, re.MULTILINE)
    assert m, "loadtest/results/README.md has no http_tcp row (best req/s, baseline req/s)"
    guide = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert f"{m.group(1)} req/s" in guide
    assert "3,000" not in guide
