"""Caller authentication: the headers (HTTP) or metadata (gRPC) that say who is asking.

The token comes from the client argument, ``LAKEGATE_TOKEN``, or ``LAKEGATE_TOKEN_FILE``. A token
file (a Kubernetes projected service-account token, say) is rotated by the kubelet while a PySpark
worker lives on, so it is re-read whenever the file changes (one ``stat`` per call), never cached
for the life of the process.
"""

from __future__ import annotations

import os

from lakegate_client._config import ClientConfig
from lakegate_client.log_redaction import keep_secrets_out_of_logs

__all__ = ["CallerAuth"]

# The gateway refuses credential requests with neither a bearer token nor this header: a browser
# or an SSRF cannot set a custom header, so it is what makes a token-less local call legitimate.
FORGERY_GUARD = ("X-Lakegate-Request", "1")


class CallerAuth:
    """Current caller headers for one process (benign races: two threads may both re-read)."""

    def __init__(self, config: ClientConfig) -> None:
        keep_secrets_out_of_logs()  # the token never reaches a transport library's log line
        # config.token is the explicit token, or the token file's content when it was resolved.
        self._token = config.token
        self._file = config.token_file
        self._file_key: tuple[int, int, int] | None = None

    def token(self) -> str | None:
        """The bearer token to send now, if any."""
        if self._file is None:
            return self._token
        try:
            st = os.stat(self._file)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            if key != self._file_key:
                with open(self._file, encoding="utf-8") as handle:
                    self._token = handle.read().strip() or self._token
                self._file_key = key
        except OSError:
            pass  # mid-rotation (the kubelet swaps a symlink): keep the last good token
        return self._token

    def headers(self) -> dict[str, str]:
        """HTTP headers: the anti-forgery header always, ``Authorization`` when there is a token."""
        headers = {FORGERY_GUARD[0]: FORGERY_GUARD[1]}
        token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The same as gRPC metadata (keys must be lower-case)."""
        return tuple((k.lower(), v) for k, v in self.headers().items())
