"""Lockout measurement (issue #35, finding 2): a neighbour's bad tokens must not cost a caller.

On each caller surface that shares a failure bucket between processes (HTTP over the Unix
socket: one uid; gRPC over the Unix socket: one `unix` peer; HTTP over TCP: one address), a
victim asks for its own table's credentials with its valid token, in quiet windows and in
windows while an attacker process (`python -m hardening.lockout`, same uid, same socket or
address) sends random bad tokens as fast as it can on 32 connections of its own. Pooled over
the windows, the victim's error rate must not rise, and its p99 latency must stay within
`P99_FACTOR` times the quiet value (and never under it plus `P99_SLACK_MS`: sub-millisecond
p99s on a shared 2-core machine move by a scheduler tick).

Before the fix every victim request over the gRPC socket got RESOURCE_EXHAUSTED once the
attacker had used the shared bucket's burst.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

P99_FACTOR = 2.0
# A p99 under a few ms is noise-bound on a shared 2-core box (one scheduler tick of the other
# process): the bound is twice the baseline, but never under the baseline plus this.
P99_SLACK_MS = 5.0
VICTIM_REQUESTS = 200  # per window
ROUNDS = 6  # quiet and flooded windows, in turn
ATTACK_THREADS = 32  # the attacker's connections (gRPC: streams on one channel)
ATTACK_MAX_S = 60.0  # the attacker stops on its own after this, whatever happens here
SURFACES = ("http_uds", "grpc_uds", "http_tcp")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=15)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(15)
        s.connect(self._path)
        self.sock = s


def _http_caller(conn_factory: Callable[[], http.client.HTTPConnection],
                 path: str) -> Callable[[str], int]:
    """One keep-alive connection; a request answers its status (reconnects after an error)."""
    box: list[http.client.HTTPConnection] = [conn_factory()]

    def call(token: str) -> int:
        headers = {"Authorization": f"Bearer {token}", "X-Lakegate-Request": "1"}
        try:
            box[0].request("GET", path, headers=headers)
            resp = box[0].getresponse()
            resp.read()
            return resp.status
        except (OSError, http.client.HTTPException):
            box[0].close()
            box[0] = conn_factory()
            return 0

    return call


def _grpc_caller(target: str, ref: dict[str, Any]) -> Callable[[str], int]:
    """One channel; a call answers an HTTP-like status (200, 401, 429, 0 for anything else)."""
    import grpc

    from lakegate.v1 import common_pb2, credentials_pb2, credentials_pb2_grpc

    channel = grpc.insecure_channel(target)
    stub = credentials_pb2_grpc.CredentialServiceStub(channel)
    request = credentials_pb2.GetTableCredentialsRequest(
        table=common_pb2.TableRef(warehouse=ref["warehouse"], namespace=ref["namespace"],
                                  name=ref["table"]),
        access=common_pb2.ACCESS_MODE_READ)
    codes = {grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.RESOURCE_EXHAUSTED: 429}

    def call(token: str) -> int:
        try:
            stub.GetTableCredentials(request, metadata=(("authorization", f"Bearer {token}"),),
                                     timeout=15)
            return 200
        except grpc.RpcError as exc:
            return codes.get(exc.code(), 0)

    return call


def caller_for(surface: str, where: str, path: str, ref: dict[str, Any]) -> Callable[[str], int]:
    """The caller of `surface` (`http_uds`: socket path, `grpc_uds`: gRPC target, `http_tcp`:
    base URL)."""
    if surface == "http_uds":
        return _http_caller(lambda: _UnixConnection(where), path)
    if surface == "grpc_uds":
        return _grpc_caller(where, ref)
    url = urlsplit(where)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    return _http_caller(lambda: http.client.HTTPConnection(host, port, timeout=15), path)


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _victim(call: Callable[[str], int], token: str, n: int) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    for _ in range(n):
        t0 = time.perf_counter()
        status = call(token)
        latencies.append(time.perf_counter() - t0)
        errors += status != 200
    return {"latencies": latencies, "errors": errors}


def measure(python: str, repo_root: Path, run_dir: Path, surface: str, where: str, path: str,
            ref: dict[str, Any], token: str) -> dict[str, Any]:
    """Quiet and flooded windows in turn (`ROUNDS` of each, so the shared machine's own load
    weighs on both alike); the pooled figures and the verdict."""
    call = caller_for(surface, where, path, ref)
    for _ in range(50):  # warm: the table's credential cached, connections open
        call(token)
    quiet: list[dict[str, Any]] = []
    flooded: list[dict[str, Any]] = []
    attackers: list[dict[str, Any]] = []
    for i in range(ROUNDS):
        quiet.append(_victim(call, token, VICTIM_REQUESTS))
        spec = {"surface": surface, "where": where, "path": path, "ref": ref}
        # the attacker says `flooding` once it has been refused at least once
        window, report = beside(python, repo_root, run_dir / f"lockout-{surface}-{i}.stop",
                                "hardening.lockout", spec,
                                lambda: _victim(call, token, VICTIM_REQUESTS))
        flooded.append(window)
        attackers.append(report)
    q, f = _pooled(quiet), _pooled(flooded)
    ok = f["error_rate"] <= q["error_rate"] and f["p99_ms"] <= p99_bound_ms(q["p99_ms"])
    statuses: dict[str, int] = {}
    for a in attackers:
        for k, v in a["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    attacker = {"threads": ATTACK_THREADS, "sent": sum(a["sent"] for a in attackers),
                "per_s": round(sum(a["per_s"] for a in attackers) / len(attackers), 1),
                "statuses": statuses}
    return {"surface": surface, "quiet": q, "flooded": f, "attacker": attacker, "ok": ok}


def beside(python: str, repo_root: Path, stop: Path, module: str, spec: dict[str, Any],
           during: Callable[[], dict[str, Any]],
           timeout_s: float = 60.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `during()` while `python -m <module> <spec + stop>` (our own interpreter and module,
    a neighbour process) floods; the neighbour prints `flooding` once it is at it, stops when
    `stop` exists and prints its report as its last JSON line. Returns both; the neighbour is
    killed if anything goes wrong."""
    stop.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(repo_root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [python, "-m", module, json.dumps({**spec, "stop": str(stop)})], cwd=repo_root,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if not ready.startswith("flooding"):
            raise RuntimeError(f"{module} did not start: {ready!r}")
        window = during()
        stop.touch()
        out, _ = proc.communicate(timeout=timeout_s)
        return window, json.loads(out.strip().splitlines()[-1])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def p99_bound_ms(baseline_ms: float) -> float:
    """The highest p99 a victim may show under a neighbour's flood."""
    return max(P99_FACTOR * baseline_ms, baseline_ms + P99_SLACK_MS)


def _pooled(windows: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [x for w in windows for x in w.pop("latencies")]
    errors = sum(w["errors"] for w in windows)
    n = len(latencies)
    return {"requests": n, "errors": errors, "error_rate": errors / n,
            "p50_ms": round(sorted(latencies)[n // 2] * 1000, 3),
            "p99_ms": round(_p99(latencies) * 1000, 3)}


def _attack(spec: dict[str, Any]) -> None:
    """The attacker: random bad tokens as fast as `ATTACK_THREADS` connections allow (one
    channel of as many streams on gRPC), until told to stop."""
    if spec["surface"] == "grpc_uds":
        shared = caller_for(spec["surface"], spec["where"], spec["path"], spec["ref"])
        callers = [shared] * ATTACK_THREADS
    else:
        callers = [caller_for(spec["surface"], spec["where"], spec["path"], spec["ref"])
                   for _ in range(ATTACK_THREADS)]
    stop = Path(spec["stop"])
    counts: dict[str, int] = {}
    lock = threading.Lock()
    limited = threading.Event()
    done = threading.Event()
    started = time.monotonic()

    def flood(call: Callable[[str], int]) -> None:
        while not done.is_set() and time.monotonic() - started < ATTACK_MAX_S:
            status = call("lg-bad-" + secrets.token_urlsafe(24))
            with lock:
                counts[str(status)] = counts.get(str(status), 0) + 1
            if status == 429:
                limited.set()

    threads = [threading.Thread(target=flood, args=(c,), daemon=True) for c in callers]
    for t in threads:
        t.start()
    if limited.wait(ATTACK_MAX_S):
        print("flooding", flush=True)
    else:
        print("never limited", flush=True)
    while not stop.exists() and time.monotonic() - started < ATTACK_MAX_S:
        time.sleep(0.05)
    done.set()
    for t in threads:
        t.join(20)
    elapsed = time.monotonic() - started
    sent = sum(counts.values())
    print(json.dumps({"sent": sent, "per_s": round(sent / elapsed, 1), "statuses": counts}),
          flush=True)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m hardening.lockout")
    p.add_argument("spec", help="JSON: surface, where, path, ref, stop")
    _attack(json.loads(p.parse_args(argv).spec))


if __name__ == "__main__":
    main(sys.argv[1:])
