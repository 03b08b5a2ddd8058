"""Scenario `signing`: S3 remote signing on the node, against vended keys and the catalog's signer.

1. Scans: one Iceberg table (`signing_files` appends of `signing_rows_per_file` rows) on the STS
   warehouse and the same rows on the signing-only warehouse (both written by the scan
   process); pyiceberg (FsspecFileIO, in the
   s3fs overlay: devstack/s3fs_overlay.py) scans them three ways interleaved in one process
   (loadtest/signing_scan.py): vended keys, node-local signing, forwarded signing. Each way's
   median scan time; the ratios local / vended and forwarded / vended (target: local <= 1.1).
2. Latency: one caller signs a GET of a data file `signing_latency_n` times on each mode, and
   reads the same object that many times with a vended key (boto3): the signature's p50/p99
   beside the request's own S3 time (the store's server milliseconds per GET from SeaweedFS's
   counters, and the client-side GET time).
3. Throughput: `signing_concurrency` callers sign for `signing_duration_s` on the node-local
   route; signatures per second and per gateway CPU-second (psutil), and the CPU cost of one
   SigV4 computation in process (does signing belong off the event loop?).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config

from devstack.s3fs_overlay import REPO_ROOT, overlay
from loadtest.child import cpu_s
from loadtest.context import BenchContext
from loadtest.stack import Gateway
from loadtest.store_requests import StoreTally

SCAN = Path(__file__).resolve().parents[1] / "signing_scan.py"
MARK = {"Authorization": "Bearer x", "X-Lakegate-Request": "1"}
SIGNING = {**MARK, "X-Iceberg-Access-Delegation": "remote-signing"}


def _quantiles(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
    return {"p50_ms": round(q[49] * 1000, 3), "p99_ms": round(q[98] * 1000, 3),
            "n": len(values)}


def _scan(ctx: BenchContext, gw: Gateway, spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(overlay()), str(REPO_ROOT)])}
    proc = subprocess.run([sys.executable, str(SCAN), json.dumps(spec)], capture_output=True,
                          text=True, env=env, timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"signing scans failed: {proc.stderr[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    out: dict[str, Any] = {}
    for mode, rounds in doc["rounds"].items():
        scans = [r["scan_s"] for r in rounds]
        loads = [r["load_s"] for r in rounds]
        out[mode] = {"scan_median_s": round(statistics.median(scans), 4),
                     "scan_s": [round(s, 4) for s in scans],
                     "load_median_s": round(statistics.median(loads), 4)}
    for mode in ("local", "forwarded"):  # load + scan, counted on the node
        out[mode]["signatures_per_scan"] = round(doc["signatures_per_scan"][mode], 1)
    vended = out["vended"]["scan_median_s"]
    # Per round: each way's scan over the vended scan of the same round (drift cancels).
    for mode in ("local", "forwarded"):
        ratios = [m / v for m, v in zip(out[mode]["scan_s"], out["vended"]["scan_s"], strict=True)]
        out[mode]["ratio_vs_vended"] = round(statistics.median(ratios), 3)
        out[mode]["ratio_vs_vended_q3"] = round(
            statistics.quantiles(ratios, n=4, method="inclusive")[2], 3)
    ctx.say(f"signing: scans vended {vended:.3f} s, local {out['local']['scan_median_s']:.3f} s "
            f"({out['local']['ratio_vs_vended']}x), forwarded "
            f"{out['forwarded']['scan_median_s']:.3f} s ({out['forwarded']['ratio_vs_vended']}x)")
    return out


def _sign_body(uri: str) -> dict[str, Any]:
    return {"region": "us-east-1", "method": "GET", "uri": uri,
            "headers": {"User-Agent": ["bench"], "Range": ["bytes=0-1048575"]}}


def _latency(ctx: BenchContext, gw: Gateway, tables: dict[str, tuple[str, tuple[str, str]]],
             n: int) -> dict[str, Any]:
    info = ctx.stack.info
    out: dict[str, Any] = {}
    with httpx.Client(base_url=gw.http_url, timeout=30, trust_env=False) as http:
        for mode, (warehouse, ident) in tables.items():
            load = http.get(f"/catalog/v1/{warehouse}/namespaces/{ident[0]}/tables/{ident[1]}",
                            headers=SIGNING).json()
            config = load["config"]
            url = f"{config['signer.uri'].rstrip('/')}/{config['signer.endpoint']}"
            data = _data_file(ctx, load["metadata"]["location"])
            bucket, _, key = data.removeprefix("s3://").partition("/")
            uri = f"{config['s3.endpoint'].rstrip('/')}/{bucket}/{key}"
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                resp = http.post(url, json=_sign_body(uri), headers=MARK)
                times.append(time.perf_counter() - t0)
                if resp.status_code != 200:
                    raise RuntimeError(f"{mode} sign answered {resp.status_code}: {resp.text}")
            out[mode] = _quantiles(times)
            if mode == "local":
                out["s3_get"] = _s3_get(ctx, http, warehouse, ident, bucket, key, n)
    ctx.say(f"signing: sign p50 local {out['local']['p50_ms']} ms, forwarded "
            f"{out['forwarded']['p50_ms']} ms; S3 GET p50 {out['s3_get']['p50_ms']} ms, store "
            f"{out['s3_get']['store_ms_per_get']} ms per GET ({info.s3.endpoint})")
    return out


def _data_file(ctx: BenchContext, location: str) -> str:
    """One data file of the table at `location` (listed with the stack's admin key)."""
    s3info = ctx.stack.info.s3
    admin = boto3.session.Session().client(
        "s3", endpoint_url=s3info.endpoint, region_name=s3info.region,
        aws_access_key_id=s3info.admin_access_key, aws_secret_access_key=s3info.admin_secret_key,
        config=Config(s3={"addressing_style": "path"}))
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    listed = admin.list_objects_v2(Bucket=bucket, Prefix=prefix + "/data/")
    keys = sorted(o["Key"] for o in listed.get("Contents", []) if o["Key"].endswith(".parquet"))
    if not keys:
        raise RuntimeError(f"no data file under {location}")
    return f"s3://{bucket}/{keys[0]}"


def _s3_get(ctx: BenchContext, http: httpx.Client, warehouse: str, ident: tuple[str, str],
            bucket: str, key: str, n: int) -> dict[str, Any]:
    vended = http.get(f"/catalog/v1/{warehouse}/namespaces/{ident[0]}/tables/{ident[1]}",
                      headers={**MARK, "X-Iceberg-Access-Delegation": "vended-credentials"}).json()
    cfg = vended["config"]
    s3 = boto3.session.Session().client(
        "s3", endpoint_url=cfg["s3.endpoint"], region_name=cfg["s3.region"],
        aws_access_key_id=cfg["s3.access-key-id"],
        aws_secret_access_key=cfg["s3.secret-access-key"],
        aws_session_token=cfg["s3.session-token"],
        config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required",
                      response_checksum_validation="when_required"))
    metrics_url = ctx.stack.info.s3.metrics_url
    from devstack.metrics_scrape import scrape

    before = StoreTally.of(scrape(metrics_url), bucket)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        s3.get_object(Bucket=bucket, Key=key, Range="bytes=0-1048575")["Body"].read()
        times.append(time.perf_counter() - t0)
    grew = StoreTally.of(scrape(metrics_url), bucket).since(before)
    gets = grew.requests.get("GET", 0.0)
    out = _quantiles(times)
    out["store_ms_per_get"] = round(grew.seconds.get("GET", 0.0) * 1000 / gets, 3) if gets else None
    return out


async def _throughput(url: str, body: dict[str, Any], concurrency: int,
                      duration_s: float) -> int:
    import aiohttp

    done = 0
    deadline = time.monotonic() + duration_s
    payload = json.dumps(body).encode()
    headers = {**MARK, "Content-Type": "application/json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def caller() -> None:
            nonlocal done
            while time.monotonic() < deadline:
                async with s.post(url, data=payload, headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"sign answered {resp.status}")
                done += 1

        await asyncio.gather(*(caller() for _ in range(concurrency)))
    return done


def _cpu_per_signature() -> float:
    """Microseconds of CPU per node-local SigV4 signature, in this process."""
    import datetime

    from gateway.signing.request import parse_sign_request
    from gateway.signing.sigv4 import SigningKeys, sign_headers

    req = parse_sign_request(_sign_body("http://127.0.0.1:1/bkt/wh/t/data/f.parquet"))
    when = datetime.datetime(2027, 1, 1)
    n = 5000
    keys = SigningKeys()
    t0 = time.process_time()
    for _ in range(n):
        sign_headers(req, "ASIAEXAMPLE", "secret", "token", when, keys)
    return (time.process_time() - t0) / n * 1e6


def run(ctx: BenchContext) -> dict[str, Any]:
    prof = ctx.profile
    info = ctx.stack.info
    gw = ctx.stack.start_gateway("signing")
    try:
        sts_wh, sig_wh = info.warehouse.name, info.warehouse_for("s3-signing").name
        name = f"sign_{uuid.uuid4().hex[:6]}"
        sts = sig = (info.namespace, name)
        spec = {"gateway_url": gw.http_url, "sts_warehouse": sts_wh, "sts_table": list(sts),
                "signing_warehouse": sig_wh, "signing_table": list(sig),
                "files": prof.signing_files, "rows_per_file": prof.signing_rows_per_file,
                "rows": prof.signing_files * prof.signing_rows_per_file,
                "rounds": prof.signing_rounds, "warmup": 1}
        out: dict[str, Any] = {"scan": _scan(ctx, gw, spec)}
        out["latency"] = _latency(ctx, gw, {"local": (sts_wh, sts), "forwarded": (sig_wh, sig)},
                                  prof.signing_latency_n)
        load = httpx.get(f"{gw.http_url}/catalog/v1/{sts_wh}/namespaces/{sts[0]}/tables/{sts[1]}",
                         headers=SIGNING, timeout=30).json()
        cfg = load["config"]
        url = f"{cfg['signer.uri'].rstrip('/')}/{cfg['signer.endpoint']}"
        bucket_key = load["metadata"]["location"].removeprefix("s3://") + "/data/x.parquet"
        body = _sign_body(f"{cfg['s3.endpoint'].rstrip('/')}/{bucket_key}")
        cpu0, t0 = cpu_s(gw.pid), time.monotonic()
        signed = asyncio.run(_throughput(url, body, prof.signing_concurrency,
                                         prof.signing_duration_s))
        cpu1, t1 = cpu_s(gw.pid), time.monotonic()
        out["throughput"] = {
            "concurrency": prof.signing_concurrency,
            "signatures_per_s": round(signed / (t1 - t0), 1),
            "gateway_cpu_cores": round((cpu1 - cpu0) / (t1 - t0), 3),
            "signatures_per_cpu_s": round(signed / (cpu1 - cpu0), 1) if cpu1 > cpu0 else None,
            "sigv4_cpu_us": round(_cpu_per_signature(), 1),
        }
        ctx.say(f"signing: {out['throughput']}")
        return out
    finally:
        ctx.stack.stop_gateway(gw)
