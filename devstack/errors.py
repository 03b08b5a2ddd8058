"""Errors raised by the local-stack launcher (one root, typed leaves)."""

from __future__ import annotations


class DevstackError(Exception):
    """Root of every launcher error."""


class StackRunningError(DevstackError):
    """A stack recorded in the run directory is still running; a second `up` is refused."""


class StartupError(DevstackError):
    """A component did not become ready in time, or exited while starting."""


class ShutdownError(DevstackError):
    """A process survived SIGTERM and SIGKILL."""
