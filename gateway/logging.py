"""Structured JSON logs, the request-id context variable, and secret redaction.

Every log line is one JSON object: ts, level, logger, msg, request_id, plus the record's extra
fields. Redaction runs on the final rendered line (and on the message itself for any other handler,
such as pytest's capture) so that no secret reaches a log whatever path it took: known secret values
registered at start, bearer tokens, JWTs, AWS access-key ids, Google access tokens, PEM private
keys, `secret=...`-style pairs (SAS `sig=`, account keys and URL signatures among them) and long
opaque blobs (session tokens).

Identifier fields (`caller`, `warehouse`, `namespace`, `table`) are not secrets and are what an
audit line is for, so only known secret values are masked in them: the shape rules would hide a
long mixed-case table name as `***` (and let a caller choose a name that hides itself). Every
line is also safe for terminals: C1 controls, bidi and other invisible format characters and
U+2028/U+2029 are written as backslash-u escapes (names refuse them, other text may carry them).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

# A ContextVar is per-task state, not module-level shared state: each request sets its own.
request_id_var: ContextVar[str | None] = ContextVar("lakegate_request_id", default=None)

MASK = "***"

_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("x", 0, "x", 0, "x", None, None)).keys() | {"message", "asctime"}
)

# Why these patterns: each is a secret shape that shows up in this product's traffic.
_BEARER = r"(?i:\b(bearer|basic)\s+[A-Za-z0-9\-._~+/=]+)"
_JWT = r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"
# The separator may be percent-encoded (`sig%3D...`: a SAS URL inside another URL's query).
_PAIR = (
    r"(?i:((?:client[_-]?secret|secret[_-]?access[_-]?key|secret[_-]?key|session[_-]?token"
    r"|access[_-]?token|refresh[_-]?token|id[_-]?token|password|secretaccesskey|"
    r"sessiontoken|x-amz-security-token|authorization|\btoken"
    # Azure: a SAS signature (`sig=`), an account key; URL signatures (S3, GCS presigned);
    # API keys, client assertions and private keys (a service account's JSON).
    r"|(?<![a-z])sig|signature|account[_-]?key|api[_-]?key|client[_-]?assertion|private[_-]?key)"
    r"[\"']?\s*(?:[:=]|%3d)\s*[\"']?)([^\"'\s,&}]+))"
)
_AWS_KEY_ID = r"\b(?:AKIA|ASIA)[A-Z0-9]{12,}\b"
# Google OAuth2 access tokens (what a GCS credential is), whatever key or text carries them.
_GOOGLE_ACCESS = r"\bya29\.[A-Za-z0-9_.-]+"
# A PEM private key, to its END line (or the end of the text when cut off).
_PEM = r"(?s:-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$))"
# Extra fields that name who asked for what: only known secret values are masked in them.
IDENTIFIER_FIELDS = frozenset({"caller", "warehouse", "namespace", "table"})
# Written escaped: C0 (text lines), DEL, C1, Arabic letter mark, zero-width and bidi marks,
# line/paragraph separators, bidi embeddings/overrides/isolates, invisible operators, BOM.
_UNSAFE = "\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff"
_UNSAFE_JSON = re.compile(f"[{_UNSAFE}]")
_UNSAFE_TEXT = re.compile(f"[\x00-\x1f{_UNSAFE}]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def escape_unsafe(line: str, *, c0: bool = False) -> str:
    """`line` with every character that could disguise or split it escaped as `\\uXXXX` (C0
    controls too with `c0`, for text lines; JSON already escapes them)."""
    return (_UNSAFE_TEXT if c0 else _UNSAFE_JSON).sub(_escape, line)
# Long opaque blobs (STS session tokens, SAS signatures, base64 secrets) - but not lower-case
# path-like runs such as table locations made of UUIDs, which logs need to stay useful.
_BLOB_PATTERN = r"[A-Za-z0-9/+=_-]{80,}"
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # A PEM private key, whole (before the pairs: `"private_key": "-----BEGIN` is one too).
    (re.compile(_PEM), MASK),
    # Authorization headers: "Bearer <token>" / "Basic <b64>".
    (re.compile(_BEARER), rf"\1 {MASK}"),
    # JWTs (IdP access tokens, caller tokens) wherever they appear.
    (re.compile(_JWT), MASK),
    # key=value / "key": "value" pairs whose key names a secret.
    (re.compile(_PAIR), rf"\1{MASK}"),
    # AWS access key ids (long-term AKIA and temporary ASIA).
    (re.compile(_AWS_KEY_ID), MASK),
    (re.compile(_GOOGLE_ACCESS), MASK),
)
_BLOB = re.compile(_BLOB_PATTERN)
_PATHLIKE = re.compile(r"[a-z0-9/_.-]+")
# A cheap necessary condition for any shape above: each contains one of these words (compared
# lower-cased: the bearer and key=value shapes are case-insensitive) or literals, or is a blob.
# Most lines (audit lines, request lines) contain none, and these substring checks cost a small
# fraction of the substitutions, which then run only when something may match.
_SHAPE_WORDS = ("secret", "token", "password", "authorization", "bearer", "basic", "sig",
                "account", "api", "private", "assertion", "ya29.")
_SHAPE_LITERALS = ("eyJ", "AKIA", "ASIA")


def _may_hold_secret_shape(text: str) -> bool:
    lowered = text.lower()
    return (
        any(word in lowered for word in _SHAPE_WORDS)
        or any(literal in text for literal in _SHAPE_LITERALS)
        or _BLOB.search(text) is not None
    )


def _mask_blob(match: re.Match[str]) -> str:
    return match.group(0) if _PATHLIKE.fullmatch(match.group(0)) else MASK


def mask_shapes(text: str) -> str:
    """Every generic secret shape in `text` replaced (the substitutions `Redactor` runs when
    its cheap check finds that something may match)."""
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return _BLOB.sub(_mask_blob, text)


class Redactor:
    """Masks secrets in text: registered known values first, then generic secret shapes.

    Thread-safe registration, because gRPC's thread pool or `to_thread` work may log too.
    """

    def __init__(self, known: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._known: tuple[str, ...] = ()
        for value in known:
            self.register(value)

    def register(self, value: str | None) -> None:
        """Add a known secret value (client secret, static token, caller tokens)."""
        if not value or len(value) < 4:
            return
        with self._lock:
            if value not in self._known:
                # Longest first, so a secret that contains another is masked whole.
                self._known = tuple(sorted((*self._known, value), key=len, reverse=True))

    def redact_known(self, text: str) -> str:
        """Return `text` with the registered secret values replaced (no shape rules: for
        identifiers, see the module docstring)."""
        for value in self._known:
            if value in text:
                text = text.replace(value, MASK)
        return text

    def redact(self, text: str) -> str:
        """Return `text` with every secret it contains replaced by `***`."""
        text = self.redact_known(text)
        if not _may_hold_secret_shape(text):  # then every substitution would be a no-op
            return text
        return mask_shapes(text)


class RedactingFilter(logging.Filter):
    """Renders and redacts the message in place, for handlers that do not use JsonFormatter."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self._redactor.redact(record.getMessage())
        record.args = None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, request_id and the extra fields."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        names: dict[str, str] = {}
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and key not in doc:
                if key in IDENTIFIER_FIELDS and isinstance(value, str):
                    names[key] = self._redactor.redact_known(value)
                else:
                    doc[key] = value
        if record.exc_info and record.exc_info[1] is not None:
            doc["exc"] = self.formatException(record.exc_info)
        line = self._redactor.redact(json.dumps(doc, default=str, ensure_ascii=False))
        if names:  # appended after redaction: the shape rules never see them
            line = f"{line[:-1]}, {json.dumps(names, ensure_ascii=False)[1:]}"
        return escape_unsafe(line)


class TextFormatter(logging.Formatter):
    """Human-readable lines for local debugging (LOG__FORMAT=text); still redacted. The extra
    fields follow the message as `key="value"` (an audit line names the caller and the table)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        self._redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get() or "-"
        base = self._redactor.redact(super().format(record))
        fields, names = [], []
        for key, value in vars(record).items():
            if key in _STANDARD_ATTRS or key == "request_id":
                continue
            if key in IDENTIFIER_FIELDS and isinstance(value, str):
                names.append(f"{key}={json.dumps(self._redactor.redact_known(value))}")
            else:
                fields.append(f"{key}={json.dumps(value, default=str)}")
        extra = self._redactor.redact(" ".join(fields))
        # The first line (message) escaped fully; a traceback keeps its line breaks.
        head, sep, rest = base.partition("\n")
        tail = " ".join(p for p in (extra, " ".join(names)) if p)
        return (escape_unsafe(head, c0=True) + (" " + tail if tail else "")
                + escape_unsafe(sep + rest))


def configure_logging(
    level: str, fmt: str, redactor: Redactor, stream: TextIO | None = None
) -> logging.Handler:
    """Install one redacting handler on the root logger (replacing previous handlers).

    Args:
        level: log level name (INFO, DEBUG, ...).
        fmt: "json" or "text".
        redactor: the daemon's redactor, with the known secrets registered.
        stream: where to write; stderr by default.

    Returns:
        The installed handler (tests remove it again).
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter(redactor) if fmt == "json" else TextFormatter(redactor))
    handler.addFilter(RedactingFilter(redactor))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # aiohttp's access log duplicates our request log and would print raw paths and headers.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # grpc's cython layer logs every loop lookup at DEBUG: noise, not signal.
    logging.getLogger("grpc._cython").setLevel(max(logging.INFO, root.level))
    return handler
