"""Scan log files for leaked secrets.

Two detectors, because each misses what the other catches:
  * shapes: AWS access key ids (AKIA/ASIA), 40-char secrets next to a key name, JWTs,
    bearer tokens, session tokens and client secrets next to their key names;
  * planted values: the exact secrets the harness itself created (client secrets, caller
    tokens, vended keys seen by the load clients), so a leak in an unexpected shape is found.

A finding never carries the secret: only its kind, where it was, and a short fingerprint, so
the report itself cannot become the leak.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

# Values that redaction layers print instead of the secret; never a finding.
_REDACTED = re.compile(r"^(\*+|<?redacted>?|\[redacted\]|x{3,}|\.\.\.|null|none|)$", re.IGNORECASE)

_KEY_SEP = r"""["']?\s*[:=]\s*["']?"""

SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("aws_access_key_id", re.compile(r"(?<![A-Z0-9])((?:AKIA|ASIA)[A-Z0-9]{16})(?![A-Z0-9])")),
    (
        "aws_secret_access_key",
        re.compile(
            r"(?i)(?:secret[_-]?access[_-]?key|secret[_-]?key|secretaccesskey|aws_secret)"
            + _KEY_SEP
            + r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
    ),
    ("jwt", re.compile(r"(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,})")),
    ("bearer_token", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{12,})")),
    (
        "session_token",
        re.compile(
            r"(?i)(?:session[_-]?token|security[_-]?token|\"token\")"
            + _KEY_SEP
            + r"([A-Za-z0-9/+=._-]{20,})"
        ),
    ),
    (
        "client_secret",
        re.compile(r"(?i)client[_-]?secret" + _KEY_SEP + r"([^\s\"',;&}]{6,})"),
    ),
)


@dataclass(frozen=True)
class Finding:
    """One leaked secret: kind and location, never the value itself."""

    kind: str
    path: str
    line: int
    fingerprint: str

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} (sha256:{self.fingerprint})"


def fingerprint(value: str) -> str:
    """Short, one-way identifier of a secret so two findings can be matched without revealing it."""
    return hashlib.sha256(value.encode()).hexdigest()[:12]


class SecretScanner:
    """Finds secrets in text by shape and by exact planted value.

    Args:
        planted: exact secret values known to the harness; any occurrence is a finding.
            Values shorter than 8 characters are ignored (they would match by accident).
    """

    def __init__(self, planted: Iterable[str] = ()) -> None:
        self._planted = sorted({p for p in planted if len(p) >= 8}, key=len, reverse=True)

    def add_planted(self, values: Iterable[str]) -> None:
        """Register more exact values (for example credentials the load clients received)."""
        merged = set(self._planted) | {v for v in values if len(v) >= 8}
        self._planted = sorted(merged, key=len, reverse=True)

    @property
    def planted_count(self) -> int:
        return len(self._planted)

    def scan_line(self, text: str) -> Iterator[tuple[str, str]]:
        """Yield (kind, value) for every secret in one line of text."""
        seen: set[str] = set()
        for value in self._planted:
            if value in text and value not in seen:
                seen.add(value)
                yield "planted", value
        for kind, pattern in SHAPES:
            for match in pattern.finditer(text):
                value = match.group(1)
                if _REDACTED.match(value) or value in seen or _is_placeholder(value):
                    continue
                seen.add(value)
                yield kind, value

    def scan_text(self, text: str, path: str = "<text>") -> list[Finding]:
        findings: list[Finding] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            for kind, value in self.scan_line(line):
                findings.append(Finding(kind, path, lineno, fingerprint(value)))
        return findings

    def scan_file(self, path: Path, max_bytes: int = 256 * 1024 * 1024) -> list[Finding]:
        """Scan one file (bounded in size; binary bytes are replaced, not skipped)."""
        with path.open("rb") as fh:
            data = fh.read(max_bytes)
        return self.scan_text(data.decode("utf-8", errors="replace"), str(path))

    def scan_paths(
        self,
        paths: Iterable[Path],
        suffixes: tuple[str, ...] = (".log", ".jsonl", ".txt", ".out", ".err"),
    ) -> tuple[int, list[Finding]]:
        """Scan files and directories (recursively, files with a log-like suffix).

        Returns:
            (number of files scanned, findings).
        """
        files = 0
        findings: list[Finding] = []
        for root in paths:
            candidates = (
                [root]
                if root.is_file()
                else sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)
            )
            for file in candidates:
                files += 1
                findings.extend(self.scan_file(file))
        return files, findings


def _is_placeholder(value: str) -> bool:
    """Documentation or redaction placeholders such as `<token>` or `***redacted***`."""
    lowered = value.lower()
    return "redacted" in lowered or value.startswith("<") or set(value) <= {"*", "x", "X", "."}
