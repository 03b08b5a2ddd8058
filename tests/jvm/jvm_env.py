"""Where the JVM path's parts are (`make jvm`) and how a test runs a Spark job on them.

The jars are those of clients/jvm/spark-jars/pom.xml, checked against spark-jars.sha256 by
`make jvm`; the job runs in .venv-jvm (PySpark 4.1.4, requirements/jvm.lock), isolated (`-I`)
from the dev venv, with a minimal environment. A missing part fails the test with the command
that builds it: the JVM path is part of `make test`, never skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.manifests import REPO_ROOT

JVM_DIR = REPO_ROOT / "clients" / "jvm"
JARS_DIR = JVM_DIR / "spark-jars" / "target" / "jars"
CHECKSUMS = JVM_DIR / "spark-jars.sha256"
JVM_PYTHON = REPO_ROOT / ".venv-jvm" / "bin" / "python"
LAKEGATE_HADOOP = JVM_DIR / "lakegate-hadoop" / "target" / "lakegate-hadoop-0.1.0.jar"
JOB_TIMEOUT_S = 480


def spark_jars() -> list[str]:
    """Every pinned jar, in the checksum file's order (verified by `make jvm`: its stamp), and
    lakegate-hadoop's."""
    built = (JARS_DIR / ".verified", JVM_PYTHON, LAKEGATE_HADOOP)
    if not all(p.exists() for p in built):
        pytest.fail("the JVM path is not built: run `make jvm`")
    names = [line.split()[1] for line in CHECKSUMS.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    return [*(str(JARS_DIR / name) for name in names), str(LAKEGATE_HADOOP)]


def run_job(script: Path, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """Run `script spec.json out.json` in .venv-jvm; its JSON result (the log tail on failure)."""
    spec_path, out_path = work / "spec.json", work / "out.json"
    spec_path.write_text(json.dumps({**spec, "jars": spark_jars()}), encoding="utf-8")
    env = {
        "PATH": "/usr/bin:/bin",
        "SPARK_LOCAL_IP": "127.0.0.1",
        "NO_PROXY": "localhost,127.0.0.1",
        "no_proxy": "localhost,127.0.0.1",
        "PYSPARK_PYTHON": str(JVM_PYTHON),
        **{k: os.environ[k] for k in ("HOME", "JAVA_HOME") if k in os.environ},
    }
    proc = subprocess.run(
        [str(JVM_PYTHON), "-I", str(script), str(spec_path), str(out_path)],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S, check=False, env=env, cwd=work,
    )
    if proc.returncode != 0 or not out_path.exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        pytest.fail(f"{script.name} exited {proc.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(out_path.read_text(encoding="utf-8"))
    return result
