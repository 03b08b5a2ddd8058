"""A ``pyarrow.fs`` filesystem whose errors never carry the credential.

Why: pyarrow's ``AzureFileSystem`` appends the SAS token to every request URL and quotes that URL
in its error messages ("GetProperties failed for 'https://acct.blob.../c/x?sig=...'"), so any
failed read or listing on ADLS would put a live signature into the caller's exception, log or
Spark task failure. This wraps the filesystem (and every file it opens) so each error is raised
again with the secret values and every URL query string removed, and without the original
exception chained to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["RedactingHandler", "redact_message", "redacted_filesystem"]

T = TypeVar("T")
_URL_QUERY = re.compile(r"(https?://[^\s'\"?]*)\?[^\s'\"]*")
MASK = "<redacted>"


def redact_message(message: str, secrets: Iterable[str]) -> str:
    """``message`` without any of ``secrets`` and without the query string of any URL in it."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        message = message.replace(secret, MASK)
    return _URL_QUERY.sub(rf"\1?{MASK}", message)


def redacted_filesystem(fs: pafs.FileSystem, secrets: Iterable[str]) -> pafs.FileSystem:
    """``fs`` behind a :class:`RedactingHandler` (a ``pyarrow.fs.PyFileSystem``)."""
    return pafs.PyFileSystem(RedactingHandler(fs, tuple(s for s in secrets if s)))


class _Redactor:
    def __init__(self, secrets: tuple[str, ...]) -> None:
        self.secrets = secrets

    def fail(self, exc: BaseException) -> NoReturn:
        message = redact_message(str(exc), self.secrets)
        try:
            clean = type(exc)(message)
        except TypeError:  # an exception type that takes other arguments
            clean = OSError(message)
        raise clean from None

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except (OSError, ValueError, pa.ArrowException) as exc:  # what pyarrow raises
            self.fail(exc)


class _RedactedFile:
    """A file opened through the wrapped filesystem: every method's error is redacted too (a
    read can fail mid-stream and quote the URL)."""

    def __init__(self, inner: pa.NativeFile, redactor: _Redactor) -> None:
        self._inner, self._redactor = inner, redactor

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value
        redactor = self._redactor

        def method(*args: Any) -> Any:
            return redactor.call(value, *args)

        return method


class RedactingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """Delegates every call to ``fs``; see the module docstring."""

    def __init__(self, fs: pafs.FileSystem, secrets: tuple[str, ...]) -> None:
        self._fs, self._r = fs, _Redactor(secrets)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RedactingHandler) and other._fs.equals(self._fs)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def get_type_name(self) -> str:
        return f"redacted-{self._fs.type_name}"

    def normalize_path(self, path: str) -> str:
        return str(self._r.call(self._fs.normalize_path, path))

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self._r.call(self._fs.get_file_info, paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        return self._r.call(self._fs.get_file_info, selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self._r.call(self._fs.create_dir, path, recursive)

    def delete_dir(self, path: str) -> None:
        self._r.call(self._fs.delete_dir, path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._r.call(lambda: self._fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok))

    def delete_root_dir_contents(self) -> None:
        self._r.call(lambda: self._fs.delete_dir_contents("/", accept_root_dir=True))

    def delete_file(self, path: str) -> None:
        self._r.call(self._fs.delete_file, path)

    def move(self, src: str, dest: str) -> None:
        self._r.call(self._fs.move, src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._r.call(self._fs.copy_file, src, dest)

    def _wrap(self, opened: pa.NativeFile, mode: str) -> pa.NativeFile:
        return pa.PythonFile(_RedactedFile(opened, self._r), mode=mode)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self._wrap(self._r.call(self._fs.open_input_stream, path), "r")

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self._wrap(self._r.call(self._fs.open_input_file, path), "r")

    def open_output_stream(self, path: str, metadata: dict[str, str] | None) -> pa.NativeFile:
        return self._wrap(self._r.call(self._fs.open_output_stream, path, metadata), "w")

    def open_append_stream(self, path: str, metadata: dict[str, str] | None) -> pa.NativeFile:
        return self._wrap(self._r.call(self._fs.open_append_stream, path, metadata), "w")
