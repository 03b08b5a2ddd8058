"""A cached overlay of s3fs 2026.1.0 for pyiceberg's remote signing (pyiceberg issue 3625).

pyiceberg 0.12's `FsspecFileIO` registers its `S3V4RestSigner` on `fs.s3`; s3fs >= 2026.2.0 builds a
new aiobotocore client inside its event loop that does not inherit that handler, so every
request goes out unsigned (fsspec/s3fs#1030; the fix, apache/iceberg-python#3783, is not
released). The dev venv pins s3fs 2026.9.0 for everything else, so this test runs pyiceberg in a
subprocess whose `PYTHONPATH` puts s3fs 2026.1.0 and its fsspec first (the last release before
the change; aiobotocore and botocore stay the venv's). Built once into `.venv-signing-s3fs`
with hash-checked wheels, rebuilt only when the pins change, each pip run bounded. Used by the
pyiceberg signing test (tests/integration/gateway/test_pyiceberg_signing.py) and the signing
bench scenario (loadtest/scenarios/signing.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
OVERLAY = REPO_ROOT / ".venv-signing-s3fs"
PINS = (
    "s3fs==2026.1.0 --hash=sha256:"
    "c1f4ad1fca6dd052ffaa104a293ba209772f4a60c164818382833868e1b1597d",
    "fsspec==2026.1.0 --hash=sha256:"
    "cb76aa913c2285a3b49bdd5fc55b1d7c708d7208126b60f2eb8194fe1b4cbdcc",
)
INSTALL_TIMEOUT_S = 300


def overlay() -> Path:
    """The overlay directory (built now if missing or stale)."""
    stamp = OVERLAY / ".pins"
    want = "\n".join(PINS)
    if stamp.exists() and stamp.read_text() == want:
        return OVERLAY
    requirements = OVERLAY.with_suffix(".txt")
    requirements.write_text(want + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--require-hashes",
         "--upgrade", "--target", str(OVERLAY), "-r", str(requirements)],
        check=True, timeout=INSTALL_TIMEOUT_S,
    )
    requirements.unlink()
    stamp.write_text(want)
    return OVERLAY
