"""Keeps the secrets the client holds out of the log lines of the libraries it drives.

Why: the client's stores and transports run on httpx, httpcore, hpack, botocore and urllib3,
whose loggers write request lines and headers: httpx's INFO line quotes each request's URL, so
every ADLS call would log the live SAS (``sig=``); botocore's DEBUG lines quote the request's
headers and its canonical request, session token included. A caller who turns logging up to
debug a job must not find a key in the output. :func:`keep_secrets_out_of_logs` adds one
:class:`SecretRedactor` to each of those loggers (once per process; a filter on a logger sees
the records logged on it, so each logger the libraries log on is named here). It rewrites a
record's message with the secret replaced by ``REDACTED``; everything else stays as logged.

It is called where a secret enters the process: a :class:`~lakegate_client.TableCredentials`
is made (every store and adapter starts from one) and a caller's token is read (``_auth.py``).
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache

__all__ = ["LIBRARY_LOGGERS", "SecretRedactor", "keep_secrets_out_of_logs", "redact"]

LIBRARY_LOGGERS: tuple[str, ...] = (
    "httpx", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy",
    "hpack.hpack", "hpack.table", "h2.connection",
    "botocore.endpoint", "botocore.auth", "botocore.hooks", "botocore.parsers",
    "botocore.httpsession", "botocore.awsrequest", "botocore.retryhandler",
    "botocore.credentials", "botocore.client", "botocore.utils", "botocore.handlers",
    "s3transfer.tasks", "s3transfer.futures", "s3transfer.utils",
    "urllib3.connectionpool", "urllib3.connection", "urllib3.util.retry",
    "aiohttp.client", "aiobotocore.endpoint", "fsspec", "s3fs", "gcsfs", "adlfs",
)
REDACTED = "REDACTED"
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # a SAS signature, a presigned URL's signature or token, as query parameters
    (re.compile(r"(?i)\b(sig|x-amz-signature|x-amz-security-token|x-amz-credential|"
                r"x-goog-signature|access_token)=[^&\s'\"<>,;]+"), rf"\1={REDACTED}"),
    # a header that carries a secret: quoted in a dict's repr (botocore, hpack) or a
    # ``name:value`` line of a canonical request
    (re.compile(r"(?i)((?:x-amz-security-token|authorization|x-ms-copy-source-authorization|"
                r"x-goog-iam-authorization-token|proxy-authorization)['\"]?\s*[:=,]\s*"
                r"\(?b?['\"]?)[^'\"\r\n)]+"), rf"\1{REDACTED}"),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+"), rf"\1 {REDACTED}"),
    # a secret in a JSON body or a dict's repr (an STS answer, a vended config)
    (re.compile(r"(?i)(['\"](?:secretaccesskey|sessiontoken|aws_secret_access_key|"
                r"aws_session_token|s3\.secret-access-key|s3\.session-token|gcs\.oauth2\.token|"
                r"adls\.sas-token[^'\"]*|access_token|token)['\"]\s*:\s*b?['\"])[^'\"]+"),
     rf"\1{REDACTED}"),
)


def redact(text: str) -> str:
    """``text`` with every secret the rules know replaced by ``REDACTED``."""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


class SecretRedactor(logging.Filter):
    """Rewrites a record whose message holds a secret; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a broken record is the library's: its handler reports it
            return True
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


@lru_cache(maxsize=1)
def keep_secrets_out_of_logs() -> None:
    """Add one :class:`SecretRedactor` to each library logger (idempotent, once per process)."""
    redactor = SecretRedactor()
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretRedactor) for f in logger.filters):
            logger.addFilter(redactor)
