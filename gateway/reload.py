"""SIGHUP: reload caller tokens, the caller policy and the log level without dropping connections.

Why: tokens and policy used to be read once, so every edit meant a restart and refused
connections on every node. A reload builds the new authenticator and policy completely first and
only then swaps them into the Gate in one step, so a request sees either the old or the new set.
A broken file (or invalid settings) keeps the last good configuration: the error goes to one log
line (naming the file, never its content) and `lakegate_config_reloads_total{result="error"}`.
Listeners, upstream and cache settings are not reloaded (they need a restart).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from gateway.audit import configure_audit
from gateway.clock import Clock
from gateway.logging import Redactor
from gateway.metrics import Metrics
from gateway.preflight import read_role_problem
from gateway.settings import Settings, SettingsError, UpstreamSettings
from gateway.surfaces.callers import (
    CallerAuthenticator,
    CallerConfigError,
    build_authenticator,
    caller_secrets,
)
from gateway.surfaces.ingress import Gate
from gateway.surfaces.policy import CallerPolicy, PolicyFileError

_log = logging.getLogger("lakegate.reload")

SettingsSource = Callable[[], Settings]


@dataclass(frozen=True)
class _Loaded:
    settings: Settings
    auth: CallerAuthenticator
    policy: CallerPolicy
    secrets: list[str]


class ConfigReloader:
    """Re-reads what SIGHUP reloads and swaps it into the live Gate, or keeps the last good set."""

    def __init__(
        self,
        source: SettingsSource,
        gate: Gate,
        metrics: Metrics,
        clock: Clock,
        redactor: Redactor | None = None,
        *,
        upstream: UpstreamSettings | None = None,
    ) -> None:
        self._source = source
        # The catalog client keeps the upstream settings it started with (a reload does not
        # change its roles), so a reloaded policy is checked against those.
        self._upstream = upstream
        self._gate = gate
        self._metrics = metrics
        self._clock = clock
        self._redactor = redactor
        self._lock = asyncio.Lock()

    def _load(self) -> _Loaded:
        """Runs in a worker thread (file reads); raises on any invalid input."""
        settings = self._source()
        upstream = self._upstream or settings.upstream
        policy = CallerPolicy.from_file(settings.callers.policy_file, upstream.project_id or "")
        problem = read_role_problem(upstream, policy)
        if problem:
            raise PolicyFileError(problem)
        return _Loaded(
            settings,
            build_authenticator(settings.callers, self._clock),
            policy,
            caller_secrets(settings.callers),
        )

    async def reload(self) -> bool:
        """One reload; True when the new configuration is live (False: the old one stays)."""
        async with self._lock:  # two quick SIGHUPs: one after the other, never interleaved
            try:
                loaded = await asyncio.to_thread(self._load)
            except (SettingsError, CallerConfigError, PolicyFileError) as exc:
                self._metrics.config_reloads.labels("error").inc()
                _log.error(
                    "reload failed; keeping the last good configuration",
                    extra={"error": str(exc).splitlines()[0][:300]},
                )
                return False
            if self._redactor is not None:
                for secret in loaded.secrets:
                    self._redactor.register(secret)
            self._gate.replace(loaded.auth, loaded.policy)
            logging.getLogger().setLevel(loaded.settings.log.level.upper())
            configure_audit(loaded.settings.log.audit)
            self._metrics.config_reloads.labels("ok").inc()
            _log.info(
                "configuration reloaded",
                extra={
                    "callers_mode": loaded.settings.callers.mode.value,
                    "policy": loaded.policy.enabled,
                    "log_level": loaded.settings.log.level.upper(),
                },
            )
            return True
