"""App: runs the Core (service/wiring.py) behind the listeners; drains and closes in order.

Phases (uvicorn-style): `start()` has `build_core` build the service and everything under it,
builds both surfaces around `core.service`, starts the Core and binds every listener (TCP port
0 → a free port, logged and written to the ports file; UDS mode 0660, a stale socket file
replaced only when nothing listens on it); `serve()` captures SIGTERM/SIGINT and waits on a stop
Event; `shutdown()` stops accepting, drains in-flight requests within `shutdown_grace_s`, cancels
the rest, closes the Core and restores the signal handlers. SIGHUP reloads caller tokens, policy
and log level (gateway/reload.py). The `lakegate serve` entry is `gateway.serve.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import signal
import threading
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from gateway import __version__
from gateway.clock import Clock, SystemClock
from gateway.concurrency import Spawn
from gateway.helper_threads import HelperThreads, LinuxThreads, batch_available, other_threads
from gateway.logging import Redactor
from gateway.metrics import Metrics
from gateway.reload import ConfigReloader, SettingsSource
from gateway.server_log import SERVER_LOGGER, MalformedRequestFilter
from gateway.service import build_core
from gateway.settings import Settings, env_name
from gateway.sockets import (
    StartupError,
    clear_stale_uds,
    open_to_group,
    private_umask,
    tcp_socket,
    uds_socket,
)
from gateway.surfaces.accounting import Recorder
from gateway.surfaces.callers import CallerConfigError, build_authenticator
from gateway.surfaces.grpc_server import GrpcSurface
from gateway.surfaces.hosts import HostAllowList
from gateway.surfaces.http_app import HttpDeps, build_http_server
from gateway.surfaces.ingress import Gate, RateLimiter
from gateway.surfaces.operations import Operations
from gateway.surfaces.peers import AuthFailures
from gateway.surfaces.policy import CallerPolicy, PolicyFileError
from gateway.tasks import TaskRegistry
from gateway.tuning import GC_YOUNG_THRESHOLD, LISTEN_BACKLOG

_log = logging.getLogger("lakegate.app")



class CoreLike(Protocol):
    """What the App runs: the service the surfaces call, and one lifecycle for all below it."""

    @property
    def service(self) -> Operations: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...


class ServiceLike(Operations, Protocol):
    """A service with a lifecycle of its own (tests inject fakes through `service_factory`)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...


ServiceFactory = Callable[[Settings, Metrics, Spawn], ServiceLike]
CoreFactory = Callable[[Settings, Metrics, Spawn], CoreLike]


class _ServiceCore:
    """A bare service run as a Core (it owns its own lifecycle)."""

    def __init__(self, service: ServiceLike) -> None:
        self.service = service

    async def start(self) -> None:
        await self.service.start()

    async def close(self) -> None:
        await self.service.close()


class State(Enum):
    NEW = "new"
    STARTED = "started"
    STOPPING = "stopping"
    CLOSED = "closed"


class App:
    """The daemon: one per process (or per test).

    Args:
        settings: validated settings.
        clock: time source (tests pass a fake for the surfaces' accounting).
        core_factory: builds the Core (default: `service.build_core`).
        service_factory: builds a bare service instead (tests inject a fake service).
        freeze_gc: after start, move every object built so far (modules, the object graph)
            out of the cyclic GC's reach (`gc.freeze()`), so the collections that request
            garbage triggers stop re-scanning them, and collects the young generation ten
            times less often (`tuning.GC_YOUNG_THRESHOLD`). The daemon entry sets it; tests,
            which start many Apps in one process, do not.
        batch_helpers: while gRPC calls crowd in, make the process's other threads SCHED_BATCH
            so they stop preempting the loop's thread (`gateway/helper_threads.py`; Linux,
            `LISTEN__GRPC_BATCH_THREADS`). The daemon entry sets it; tests do not, as it
            changes every thread of the process.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clock | None = None,
        core_factory: CoreFactory | None = None,
        service_factory: ServiceFactory | None = None,
        freeze_gc: bool = False,
        batch_helpers: bool = False,
        reload_source: SettingsSource | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.settings = settings
        # SIGHUP re-reads this (default: the same settings, so the files they name are re-read).
        self._reload_source = reload_source or (lambda: self.settings)
        self._redactor = redactor
        self.reloader: ConfigReloader | None = None
        self._freeze_gc = freeze_gc
        self._batch_helpers = batch_helpers
        self.clock = clock or SystemClock()
        if service_factory is not None:
            make = service_factory
            self._core_factory: CoreFactory = lambda s, m, spawn: _ServiceCore(make(s, m, spawn))
        else:
            self._core_factory = core_factory or build_core
        self.metrics = Metrics()
        self.tasks = TaskRegistry()
        self.state = State.NEW
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self.core: CoreLike | None = None
        self.service: Operations | None = None
        self._runner: web.ServerRunner | None = None
        self._ops_runner: web.ServerRunner | None = None
        self.ops_port: int | None = None
        self._grpc: GrpcSurface | None = None
        self._stop = asyncio.Event()
        # Events (not state polling) for whoever waits on the phases: tests, the CLI.
        self.started = asyncio.Event()
        self.stopping = asyncio.Event()
        self._uds_paths: list[Path] = []
        # Malformed client requests: one counted WARNING line, not an ERROR traceback each.
        self._malformed_log = MalformedRequestFilter(
            self.metrics.ingress_rejected.labels("malformed").inc, self.clock.monotonic
        )

    # ------------------------------------------------------------------ start
    async def start(self) -> None:
        """Build everything and bind every listener.

        Raises:
            StartupError: a listener cannot be bound or the caller config is unusable.
        """
        if self.state is not State.NEW:
            raise RuntimeError(f"App cannot start from state {self.state.value}")
        s = self.settings
        try:
            policy = CallerPolicy.from_file(s.callers.policy_file, s.upstream.project_id or "")
            auth = build_authenticator(s.callers, self.clock)
        except (PolicyFileError, CallerConfigError) as exc:
            raise StartupError(str(exc)) from exc
        self.state = State.STARTED
        core = self._core_factory(s, self.metrics, self.tasks.spawn)
        self.core, self.service = core, core.service
        service = core.service
        limiter = (
            RateLimiter(s.callers.rate_per_s, s.callers.burst, self.clock)
            if s.callers.rate_per_s > 0
            else None
        )
        gate = Gate(auth, policy, limiter, service, self.metrics,
                    allow_project_header=s.callers.allow_project_header,
                    hosts=HostAllowList(s.listen.allowed_hosts.split(",")),
                    failures=AuthFailures(s.callers.auth_failures_per_s,
                                          s.callers.auth_failure_burst, self.clock,
                                          delay_s=s.callers.auth_failure_delay_s)
                    if s.callers.auth_failures_per_s > 0 else None)
        self.reloader = ConfigReloader(
            self._reload_source, gate, self.metrics, self.clock, self._redactor,
            upstream=s.upstream,
        )
        recorder = Recorder(self.metrics, self.clock)
        deps = HttpDeps(service, gate, recorder, self.metrics, self.clock, s.listen.max_body_bytes,
                        s.upstream.max_page_size,
                        # a Core without a signer (a test's) mounts no sign route
                        signing=getattr(core, "signing", None))
        grpc_surface = GrpcSurface(
            service, gate, recorder, max_message_bytes=s.listen.max_body_bytes
        )
        self._grpc = grpc_surface
        await core.start()
        await self._bind_http(deps)
        await self._bind_grpc(grpc_surface)
        self._write_ports_file()
        self.tasks.spawn(self._health_loop(), name="grpc-health", loop=True)
        if self._batch_helpers and s.listen.grpc_batch_threads and batch_available():
            loop_tid = threading.get_native_id()
            helpers = HelperThreads(grpc_surface.calls_in_flight,
                                    LinuxThreads(lambda: other_threads(loop_tid)))
            # Cancelled on shutdown, which leaves the threads normal (`HelperThreads.run`).
            self.tasks.spawn(helpers.run(self.clock.sleep), name="helper-threads", loop=True)
        if self._freeze_gc:
            gc.collect()
            gc.freeze()
            _, older, oldest = gc.get_threshold()
            gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
        self.started.set()
        _log.info(
            "lakegate listening",
            extra={
                "version": __version__,
                "http_port": self.http_port,
                "ops_port": self.ops_port,
                "grpc_port": self.grpc_port,
                "http_uds": str(s.listen.http_uds) if s.listen.http_uds else None,
                "grpc_uds": str(s.listen.grpc_uds) if s.listen.grpc_uds else None,
                "callers_mode": s.callers.mode.value,
            },
        )

    async def _bind_http(self, deps: HttpDeps) -> None:
        listen = self.settings.listen
        server = build_http_server(
            deps,
            # aiohttp arms this at connect and only re-arms it after a response, so it also
            # drops a client still dribbling its request headers (slowloris).
            keepalive_timeout=listen.idle_timeout_s,
        )
        runner = web.ServerRunner(
            server, handle_signals=False, shutdown_timeout=self.settings.shutdown_grace_s
        )
        await runner.setup()
        self._runner = runner
        logging.getLogger(SERVER_LOGGER).addFilter(self._malformed_log)
        sock = tcp_socket(listen.host, listen.http_port, env_name("listen", "http_port"))
        self.http_port = sock.getsockname()[1]
        await web.SockSite(runner, sock, backlog=LISTEN_BACKLOG).start()
        if listen.http_uds is not None:
            uds = uds_socket(listen.http_uds, env_name("listen", "http_uds"))
            self._uds_paths.append(listen.http_uds)
            await web.SockSite(runner, uds, backlog=LISTEN_BACKLOG).start()
        if listen.ops_port is not None:
            await self._bind_ops(deps)

    async def _bind_ops(self, deps: HttpDeps) -> None:
        """Probes and /metrics on their own listener (LISTEN__OPS_HOST/OPS_PORT), no credentials."""
        listen = self.settings.listen
        assert listen.ops_port is not None
        server = build_http_server(deps, ops_only=True, keepalive_timeout=listen.idle_timeout_s)
        runner = web.ServerRunner(
            server, handle_signals=False, shutdown_timeout=self.settings.shutdown_grace_s
        )
        await runner.setup()
        self._ops_runner = runner
        sock = tcp_socket(listen.ops_host, listen.ops_port, env_name("listen", "ops_port"))
        self.ops_port = sock.getsockname()[1]
        await web.SockSite(runner, sock).start()

    async def _bind_grpc(self, surface: GrpcSurface) -> None:
        listen = self.settings.listen
        try:
            self.grpc_port = surface.bind_tcp(listen.host, listen.grpc_port)
            if listen.grpc_uds is not None:
                try:
                    clear_stale_uds(listen.grpc_uds)
                except StartupError as exc:
                    raise StartupError(f"{env_name('listen', 'grpc_uds')}: {exc}") from exc
                # gRPC creates its socket file here: born owner-only, opened to the group below.
                with private_umask():
                    surface.bind_uds(str(listen.grpc_uds))
                self._uds_paths.append(listen.grpc_uds)
        except (OSError, RuntimeError) as exc:
            raise StartupError(
                f"{env_name('listen', 'grpc_port')} / {env_name('listen', 'grpc_uds')}: "
                f"cannot bind gRPC: {exc}"
            ) from exc
        await surface.server.start()
        if listen.grpc_uds is not None:
            open_to_group(listen.grpc_uds)

    def _write_ports_file(self) -> None:
        path = self.settings.listen.ports_file
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        ports = {"http_port": self.http_port, "grpc_port": self.grpc_port}
        if self.ops_port is not None:
            ports["ops_port"] = self.ops_port
        tmp.write_text(json.dumps(ports))
        tmp.replace(path)  # atomic: a reader never sees a half-written file

    async def _health_loop(self) -> None:
        """Mirror readiness into the gRPC health service (SERVING once ready)."""
        assert self.service is not None
        assert self._grpc is not None
        serving: bool | None = None
        while True:
            try:
                ready, _ = await self.service.readiness()
            except Exception:  # noqa: BLE001 - background loop top: log and keep going
                _log.exception("readiness check failed")
                ready = False
            if ready != serving:
                serving = ready
                await self._grpc.set_serving(ready)
            await self.clock.sleep(1.0 if not ready else 5.0)

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ serve / stop
    def request_stop(self) -> None:
        """Ask `serve()` to return (signal handlers and tests call this)."""
        self._stop.set()

    def request_reload(self) -> None:
        """SIGHUP: reload caller tokens, policy and log level in the background (gateway.reload)."""
        if self.reloader is not None and self.state is State.STARTED:
            self.tasks.spawn(self.reloader.reload(), name="reload")

    async def serve(self) -> None:
        """Start (if needed), wait for SIGTERM/SIGINT or `request_stop()`, then shut down."""
        if self.state is State.NEW:
            try:
                await self.start()
            except BaseException:
                await self.shutdown()
                raise
        loop = asyncio.get_running_loop()
        previous: dict[signal.Signals, Any] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                previous[sig] = signal.getsignal(sig)
                loop.add_signal_handler(sig, self.request_stop)
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            previous[signal.SIGHUP] = signal.getsignal(signal.SIGHUP)
            loop.add_signal_handler(signal.SIGHUP, self.request_reload)
        try:
            await self._stop.wait()
            _log.info("stop requested; draining")
        finally:
            for sig, handler in previous.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)
            await self.shutdown()

    async def shutdown(self) -> None:
        """Stop accepting, drain within the grace period, cancel the rest, close the Core."""
        if self.state in (State.STOPPING, State.CLOSED):
            return
        self.state = State.STOPPING
        self.stopping.set()
        grace = self.settings.shutdown_grace_s
        drains = []
        if self._grpc is not None:
            with contextlib.suppress(Exception):
                await self._grpc.set_serving(False)
            drains.append(self._grpc.server.stop(grace))
        if self._runner is not None:
            drains.append(self._runner.cleanup())
        if self._ops_runner is not None:
            drains.append(self._ops_runner.cleanup())
        # Both surfaces drain concurrently, so the total stays within one grace period.
        results = await asyncio.gather(*drains, return_exceptions=True)
        logging.getLogger(SERVER_LOGGER).removeFilter(self._malformed_log)
        for result in results:
            if isinstance(result, BaseException):
                _log.warning("listener shutdown error", extra={"error": type(result).__name__})
        if self.core is not None:
            try:
                await self.core.close()
            except Exception:  # noqa: BLE001 - closing must go on to cancel the tasks
                _log.exception("core close failed")
        left = await self.tasks.cancel_all(timeout_s=max(grace, 1.0))
        for path in self._uds_paths:
            with contextlib.suppress(OSError):
                path.unlink()
        self.state = State.CLOSED
        _log.info("lakegate stopped", extra={"tasks_left": left})
