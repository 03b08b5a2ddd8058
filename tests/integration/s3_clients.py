"""boto3 S3 clients of the integration tests: on a vended credential, or on the stack's own keys.

Path-style addressing, as SeaweedFS needs on localhost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3
import botocore.config

from devstack.stack_info import StackInfo


def _path_style_s3(
    endpoint: str,
    region: str,
    keys: tuple[str, str, str | None],
    retries: dict[str, int] | None = None,
) -> Any:
    access_key, secret_key, session_token = keys
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        aws_session_token=session_token,
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries=retries),
    )


def vended_s3(config: Mapping[str, str]) -> Any:
    """A client on a vended credential's `s3.*` config; one attempt, so a refusal shows at once."""
    keys = (config["s3.access-key-id"], config["s3.secret-access-key"], config["s3.session-token"])
    return _path_style_s3(
        config["s3.endpoint"], config["s3.region"], keys, retries={"max_attempts": 1}
    )


def admin_s3(info: StackInfo) -> Any:
    """A client with the local stack's admin keys (sees every object, whatever the policy)."""
    s3 = info.s3
    keys = (s3.admin_access_key, s3.admin_secret_key, None)
    return _path_style_s3(s3.endpoint, s3.region, keys)
