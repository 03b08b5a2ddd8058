"""Delayed purge of a dropped table's files (Lakekeeper queues a purge task on drop).

The purge assumes the vending role with a read-write-delete session policy for the table's
location and deletes every object under it. It is counted as `purges` (not as
`sts_assume_role`, which counts only credential vending).
"""

from __future__ import annotations

import asyncio
import logging

import boto3
import botocore.config
import botocore.exceptions
from aiohttp import web

from devstack.emulator.models import GenericTable, Warehouse
from devstack.emulator.policy import Permission, session_policy_json, split_s3_location
from devstack.emulator.state import STATE, EmulatorState

log = logging.getLogger(__name__)
PURGE_TASKS: web.AppKey[set[asyncio.Task[None]]] = web.AppKey("purge_tasks")


def schedule_purge(app: web.Application, wh: Warehouse, table: GenericTable) -> None:
    """Start the purge task (owned by the app, cancelled on shutdown)."""
    st = app[STATE]
    if st.config.purge_delay_s is None:
        return
    if wh.storage_profile.get("type", "s3") != "s3":
        # Purge goes through STS + S3; ADLS and GCS tables keep their files (counted).
        st.stats.incr("purge_skipped")
        return
    task = asyncio.ensure_future(_purge(st, wh, table))
    tasks = app[PURGE_TASKS]
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _purge(st: EmulatorState, wh: Warehouse, table: GenericTable) -> None:
    await asyncio.sleep(st.config.purge_delay_s or 0.0)
    try:
        deleted = await asyncio.to_thread(_purge_blocking, wh, table.base_location)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError, KeyError) as exc:
        # Background task top: log and count, never crash the server.
        log.warning("purge of table %s failed: %s", table.id, type(exc).__name__)
        st.stats.incr("purge_failures")
        return
    st.stats.incr("purges")
    st.stats.incr("purged_objects", deleted)


def _purge_blocking(wh: Warehouse, location: str) -> int:
    profile = wh.storage_profile
    cred = wh.storage_credential or {}
    endpoint = str(profile.get("sts-endpoint") or profile.get("endpoint"))
    region = str(profile.get("region", "us-east-1"))
    cfg = botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2})
    session = boto3.session.Session()
    sts = session.client(
        "sts",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=cred.get("access-key-id") or cred.get("aws-access-key-id"),
        aws_secret_access_key=cred.get("secret-access-key") or cred.get("aws-secret-access-key"),
    )
    kwargs = {
        "RoleSessionName": "lakekeeper-purge",
        "DurationSeconds": 900,
        "Policy": session_policy_json(location, Permission.READ_WRITE_DELETE),
    }
    role = profile.get("sts-role-arn") or profile.get("assume-role-arn")
    if role:
        kwargs["RoleArn"] = role
    c = sts.assume_role(**kwargs)["Credentials"]
    s3 = session.client(
        "s3",
        endpoint_url=str(profile.get("endpoint")),
        region_name=region,
        aws_access_key_id=c["AccessKeyId"],
        aws_secret_access_key=c["SecretAccessKey"],
        aws_session_token=c["SessionToken"],
        config=cfg,
    )
    bucket, key = split_s3_location(location)
    deleted = 0
    for _ in range(10_000):  # bounded: 1000 keys per page
        page = s3.list_objects_v2(Bucket=bucket, Prefix=key + "/")
        objects = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if not objects:
            break
        s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
        deleted += len(objects)
    return deleted
