"""Readiness checks of the stack's parts (each one quick and bounded by its own timeout)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Mapping

import httpx

from devstack import seaweed
from devstack.errors import DevstackError
from devstack.stack_info import StackInfo


def http_ok(url: str, timeout_s: float = 1.0, headers: Mapping[str, str] | None = None) -> bool:
    """True if GET `url` answers 2xx within `timeout_s` (loopback: proxies are not used)."""
    try:
        answer = httpx.get(url, timeout=timeout_s, headers=headers, trust_env=False)
    except httpx.HTTPError:
        return False
    return 200 <= answer.status_code < 300


def port_open(host: str, port: int) -> bool:
    """True if something accepts TCP connections on host:port (within half a second)."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def s3_ready(endpoint: str, keys: seaweed.SeaweedKeys, bucket: str) -> bool:
    """True once the admin identity can see the bucket (IAM loaded, bucket created)."""
    import boto3
    import botocore.config
    import botocore.exceptions

    client = boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=seaweed.REGION,
        aws_access_key_id=keys.admin_access_key,
        aws_secret_access_key=keys.admin_secret_key,
        config=botocore.config.Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            connect_timeout=1,
            read_timeout=2,
        ),
    )
    try:
        client.head_bucket(Bucket=bucket)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        return False
    return True


def ready_check(info: StackInfo, name: str) -> Callable[[], bool]:
    """The readiness probe of one part, from stack.json."""
    if name == "idp":
        return lambda: http_ok(f"{info.idp.issuer}/.well-known/openid-configuration")
    if name == "s3":
        s3 = info.s3
        keys = seaweed.SeaweedKeys(s3.admin_access_key, s3.admin_secret_key, "", "")
        return lambda: s3_ready(s3.endpoint, keys, s3.bucket)
    if name == "catalog":
        return lambda: http_ok(f"{info.catalog.url}/health")
    if name == "gateway":
        return lambda: http_ok(f"{info.gateway_url}/readyz")
    if name == "nats" and info.nats is not None:
        nats = info.nats
        return lambda: http_ok(f"{nats.monitor_url}/healthz")
    raise DevstackError(f"unknown component {name!r}")
