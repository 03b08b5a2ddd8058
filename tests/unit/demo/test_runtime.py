"""The demo's runtime: what its Spark session is started with."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from demo.progress import Progress
from demo.runtime import runtime
from devstack.stack_info import StackInfo
from tests.unit.devstack.test_stack_info import RAW


def test_local_mode_starts_driver_and_executors_on_the_client_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKEGATE_URL", "")  # runtime() sets it for the Python workers
    info = StackInfo.model_validate(RAW)
    with runtime("local[2]", info, tmp_path, nodes=2, transport="http",
                 say=Progress()) as rt:
        assert os.environ["LAKEGATE_URL"] == rt.driver_url
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            assert "-XX:TieredStopAtLevel=1" in rt.conf[key].split()
