"""Isolation probes for issue #28: case-fold twins, project-header swaps, rebinding Hosts and
another local uid. Run by `run_isolation_suite` (hardening/isolation.py) on its gateways.

- **casefold**: names the catalog matches as one (`straße`/`STRASSE`, full-width letters) get one
  decision: a caller refused a table is refused under every spelling of it and of its namespace,
  and a caller granted `strasse_*` is granted `straße_secret` too (the issue saw 403 for one
  spelling and 200 with keys for the other).
- **project**: a caller naming another project (`x-project-id`, `x-project-ident`, gRPC
  metadata) gets nothing, even for its own table: the gateway serves one project.
- **host**: the owner's own request with a rebinding `Host` (over TCP) or a page's
  `Sec-Fetch-Site` (over TCP and UDS) is refused.
- **uid**: a process of another user (`nobody`, a child started with setuid) cannot connect to
  the Unix sockets, even holding the owner's token, and gets 401 on TCP without one.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardening.environment import native_path
from hardening.report import IsolationResult

TWIN_NS = "team_a"
TWIN_TABLE = "straße_secret"  # alice's; erin may read strasse_* in team_a
TWIN_SPELLINGS = ("straße_secret", "STRASSE_SECRET", "strasse_secret", "Stra\u1e9ee_Secret")
NS_SPELLINGS = ("team_a", "TEAM_A", "\uff54\uff45\uff41\uff4d_a")  # full-width "team"
ERIN_RULE = {"warehouse": "*", "namespace": "team_a", "table": "strasse_*", "access": ["read"]}
OTHER_PROJECT = "00000000-0000-0000-0000-00000000beef"
REBINDING = (
    {"Host": "rebind.evil.example:8765"},
    {"Host": "169.254.169.254"},
    {"Host": "localhost.evil.example"},
    {"Sec-Fetch-Site": "same-site"},
    {"Sec-Fetch-Site": "same-origin"},
)
NOBODY = 65534

Call = Callable[..., tuple[int, str]]


def casefold_probes(prober: Any, tokens: dict[str, str], wh: str, target: Any) -> None:
    """bob (team_b only) under every twin spelling of alice's `target` (TWIN_NS/TWIN_TABLE);
    erin's grant holds under every spelling."""
    owner_path = native_path(wh, [TWIN_NS], TWIN_TABLE, "/credentials")
    prober.expect_allowed("casefold:owner", lambda tok: prober.http("GET", owner_path, tok),
                          tokens["alice"], target)  # records alice's keys for the body check
    for ns in NS_SPELLINGS:
        for table in TWIN_SPELLINGS:
            path = native_path(wh, [ns], table, "/credentials")
            prober.expect_denied(f"casefold:{ns}/{table}",
                                 lambda tok, p=path: prober.http("GET", p, tok),
                                 tokens["bob"], "bob", target)
    if "erin" not in tokens:
        return
    statuses = {}
    for table in TWIN_SPELLINGS:
        path = native_path(wh, [TWIN_NS], table, "/credentials")
        statuses[table] = prober.http("GET", path, tokens["erin"])[0]
    ok = {t for t, s in statuses.items() if 200 <= s < 300}
    prober.result.record("casefold", False, "erin twins", None)
    if ok != set(TWIN_SPELLINGS):
        prober.result.failures.append(
            f"[{prober.mode}] erin (strasse_*) got different answers for one table: {statuses}")


def project_probes(prober: Any, tokens: dict[str, str], wh: str, targets: Any) -> None:
    """Every caller asks for its own table in another project: refused on every surface."""
    for t in targets:
        cred = native_path(wh, [t.namespace], t.table, "/credentials")
        for header in ("x-project-id", "x-project-ident"):
            prober.expect_denied(
                f"project:{header}",
                lambda tok, c=cred, h=header: prober.http("GET", c, tok,
                                                          headers={h: OTHER_PROJECT}),
                tokens[t.owner], t.owner, t)
        prober.expect_denied(
            "project:grpc_metadata",
            lambda tok, tt=t: prober.grpc(tt, tok, (("x-project-id", OTHER_PROJECT),)),
            tokens[t.owner], t.owner, t)


def host_probes(prober: Any, tokens: dict[str, str], wh: str, targets: Any) -> None:
    """The owner's own requests, sent as a rebound page would: refused (rebinding Hosts over
    TCP, browser headers over TCP and UDS)."""
    for t in targets:
        cred = native_path(wh, [t.namespace], t.table, "/credentials")
        for headers in REBINDING:
            label = "/".join(f"{k}={v}" for k, v in headers.items())
            prober.expect_denied(
                f"host:{label}",
                lambda tok, c=cred, h=headers: prober.http("GET", c, tok, headers=h),
                tokens[t.owner], t.owner, t)
        # Over the UDS no name resolves to the socket, so any well-formed Host is accepted
        # there (issue #35): a page's request is still refused by its browser headers.
        prober.expect_denied(
            "host:uds_browser",
            lambda tok, c=cred: prober.http("GET", c, tok, uds=True,
                                            headers={"Sec-Fetch-Site": "same-origin"}),
            tokens[t.owner], t.owner, t)


_UID_PROBE = r"""
import json, socket, sys, urllib.error, urllib.request
http_uds, grpc_uds, http_url, path, token = sys.argv[1:6]
out = {}
for name, sock_path in (("http_uds", http_uds), ("grpc_uds", grpc_uds)):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect(sock_path)
    except OSError as exc:
        out[name] = [0, f"refused: {type(exc).__name__}"]
        continue
    if name == "http_uds":
        s.sendall((f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n"
                   "X-Lakegate-Request: 1\r\nConnection: close\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 500
        out[name] = [status, data.decode(errors="replace")]
    else:
        out[name] = [200, "connected"]  # a connection is already the leak
    s.close()
req = urllib.request.Request(http_url + path, headers={"X-Lakegate-Request": "1"})
try:
    with urllib.request.urlopen(req, timeout=10) as resp:
        out["tcp_no_token"] = [resp.status, resp.read().decode(errors="replace")]
except urllib.error.HTTPError as exc:
    out["tcp_no_token"] = [exc.code, exc.read().decode(errors="replace")]
print(json.dumps(out))
"""


def _others_may_run(path: Path) -> bool:
    """Whether every directory above `path` and `path` itself are executable by others."""
    if not path.is_file() or not path.stat().st_mode & stat.S_IXOTH:
        return False
    return all(p.stat().st_mode & stat.S_IXOTH for p in path.parents)


def _python_for_others() -> str | None:
    """A python3 interpreter the `nobody` child can start (the venv's may live under /root)."""
    for candidate in (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"):
        real = Path(os.path.realpath(candidate))
        if _others_may_run(real):
            return str(real)
    return None


def uid_probes(prober: Any, tokens: dict[str, str], wh: str, targets: Any,
               result: IsolationResult) -> str | None:
    """A child process running as `nobody` tries the sockets with the owner's token, and TCP
    without one. Returns why it was skipped (not root), else None."""
    if os.geteuid() != 0:
        return "uid probes need root (to start a child as nobody)"
    python = _python_for_others()
    if python is None:
        return "uid probes need a python3 that nobody may run (none found)"
    eps = prober.eps
    for t in targets:
        path = native_path(wh, [t.namespace], t.table, "/credentials")
        done = subprocess.run(
            [python, "-I", "-c", _UID_PROBE, eps.http_uds, eps.grpc_uds, eps.http_url, path,
             tokens[t.owner]],
            user=NOBODY, group=NOBODY, extra_groups=[], capture_output=True, text=True,
            timeout=60, check=False, cwd="/",
        )
        if done.returncode != 0:
            result.failures.append(f"[{prober.mode}] uid probe did not run: {done.stderr[-300:]}")
            continue
        for name, (status, body) in json.loads(done.stdout).items():
            prober.expect_denied(f"uid:{name}", lambda tok, s=status, b=body: (s, b), None,
                                 "uid nobody", t)
    return None

