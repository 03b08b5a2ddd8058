"""Start-up warnings about who can ask for credentials (`lakegate serve` log, `lakegate check`).

- Caller mode `none` on a host with other users. With caller auth off the gateway trusts whoever
  reaches its loopback TCP port (the AWS endpoint's token is then only the anti-SSRF marker).
  That is sound inside a pod, whose network namespace only the pod's containers share, and
  unsound on a host where other users run processes: each of them gets every credential the
  gateway's role can vend. The gateway cannot see the pod boundary, so it looks for other users
  (login accounts, processes of other uids) (deploy/README.md, "Security model").
- Caller mode `jwt` without an issuer: a token of any issuer is accepted if a key of the JWKS
  signed it (a JWKS that aggregates several issuers' keys lets each impersonate the others).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from pathlib import Path

from gateway.settings import CallerMode, Settings, env_name

UID_MIN = 1000  # login.defs: accounts below are system accounts
_NO_LOGIN = ("nologin", "false", "sync", "halt", "shutdown")


def other_local_users(proc: Path = Path("/proc")) -> list[str]:
    """Other users on this host: login accounts (uid >= 1000, a login shell) and the uids of
    processes we can see, other than our own effective uid. Reads /etc/passwd and /proc (call it
    before the event loop, or in a thread)."""
    me = os.geteuid()
    found: set[str] = set()
    for account in pwd.getpwall():
        if (account.pw_uid != me and account.pw_uid >= UID_MIN and account.pw_uid != 65534
                and not account.pw_shell.endswith(_NO_LOGIN)):
            found.add(account.pw_name)
    try:
        entries = list(os.scandir(proc))
    except OSError:
        entries = []
    for entry in entries:
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except OSError:
                continue  # the process ended meanwhile
            if uid != me:
                found.add(f"uid {uid}")
    return sorted(found)


def shared_host_warning(
    settings: Settings, others: Callable[[], list[str]] = other_local_users
) -> str | None:
    """The warning line when caller auth is off and other users may reach loopback, else None."""
    if settings.callers.mode is not CallerMode.NONE:
        return None
    users = others()
    if not users:
        return None
    shown = ", ".join(users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
    listen = settings.listen
    return (
        f"{env_name('callers', 'mode')}=none with TCP {listen.host}:{listen.http_port} "
        f"(and gRPC {listen.grpc_port}): any local process gets credentials, and other users "
        f"share this host ({shown}). Mode none is safe only where the pod boundary isolates the "
        f"gateway (a sidecar); set {env_name('callers', 'mode')} to token or jwt"
    )


def caller_warnings(
    settings: Settings, others: Callable[[], list[str]] = other_local_users
) -> list[str]:
    """Every caller-security warning that applies (one line each)."""
    out = []
    shared = shared_host_warning(settings, others)
    if shared:
        out.append(shared)
    callers = settings.callers
    if callers.mode is CallerMode.JWT and not callers.issuer:
        out.append(f"{env_name('callers', 'mode')}=jwt without {env_name('callers', 'issuer')}: "
                   "a token of any issuer is accepted if a key of the JWKS signed it")
    return out
