"""Start-up file checks: every file a setting names must be readable and well-formed before serve.

Why: a missing tokens or policy file used to surface only inside `App.start()`, after logging had
started, as exit 1 followed by "lakegate stopped". Checked here first, each problem names the
setting to fix and `lakegate serve` exits 2 (as for any invalid setting) before logging anything.
Never echoes file contents (the tokens file holds secrets).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

from gateway.settings import CallerMode, Settings, UpstreamSettings, env_name
from gateway.surfaces.callers import CallerConfigError, StaticTokenCallerAuth
from gateway.surfaces.policy import CallerPolicy, PolicyFileError
from gateway.upstream.transport import upstream_ssl_context


def _readable(path: Path, setting: str) -> str | None:
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        return f"{setting}={path}: cannot read ({type(exc).__name__}: {exc.strerror})"
    return None


def _parsed(path: Path, setting: str, parse: Callable[[Path], object]) -> list[str]:
    """The file's problem (unreadable, or what its parser says), as a list of 0 or 1 line."""
    problem = _readable(path, setting)
    if problem is None:
        try:
            parse(path)
        except (CallerConfigError, PolicyFileError) as exc:
            problem = f"{setting}: {exc}"
    return [problem] if problem else []


def read_role_problem(upstream: UpstreamSettings, policy: CallerPolicy) -> str | None:
    """Fail closed on access level: a caller the policy limits to read must never be handed the
    read-write credential of the gateway's own principal, which is what the catalog vends when
    no read role is configured. None when the combination is safe (or explicitly accepted)."""
    if upstream.read_role_id is not None or upstream.allow_read_without_read_role:
        return None
    limited = policy.read_limited_callers()
    if not limited:
        return None
    shown = ", ".join(limited[:5]) + (f" and {len(limited) - 5} more" if len(limited) > 5 else "")
    return (
        f"{env_name('callers', 'policy_file')} limits callers to read ({shown}) but "
        f"{env_name('upstream', 'read_role_id')} is not set, so their credentials would be "
        f"read-write: set the read role, or accept this with "
        f"{env_name('upstream', 'allow_read_without_read_role')}=true"
    )


def startup_problems(settings: Settings) -> list[str]:
    """One line per unusable file setting (empty when every named file is usable)."""
    problems: list[str] = []
    callers = settings.callers
    if callers.mode is CallerMode.TOKEN and callers.tokens_file is not None:
        problems += _parsed(callers.tokens_file, env_name("callers", "tokens_file"),
                            StaticTokenCallerAuth.read_tokens)
    if callers.policy_file is not None:
        policy_problems = _parsed(callers.policy_file, env_name("callers", "policy_file"),
                                  CallerPolicy.from_file)
        problems += policy_problems
        if not policy_problems:
            problem = read_role_problem(settings.upstream,
                                        CallerPolicy.from_file(callers.policy_file))
            if problem:
                problems.append(problem)
    tls_files = [
        (field, path)
        for field in ("ca_file", "client_cert_file", "client_key_file")
        if (path := getattr(settings.upstream, field)) is not None
    ]
    tls_problems = [p for f, path in tls_files if (p := _readable(path, env_name("upstream", f)))]
    problems += tls_problems
    if tls_files and not tls_problems:
        try:
            upstream_ssl_context(settings.upstream)
        except (OSError, ssl.SSLError) as exc:
            names = ", ".join(env_name("upstream", f) for f, _ in tls_files)
            problems.append(f"{names}: not a usable CA bundle / certificate and key ({exc})")
    if callers.mode is CallerMode.JWT:
        for field in ("ca_file", "bearer_token_file"):
            path = getattr(callers, field)
            if path is not None:
                problem = _readable(path, env_name("callers", field))
                if problem:
                    problems.append(problem)
    return problems
