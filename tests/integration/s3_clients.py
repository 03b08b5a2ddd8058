"""boto3 S3 clients of the integration tests: on a vended credential, or on the stack's own keys.

Path-style addressing, as SeaweedFS needs on localhost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import boto3
import botocore.config


def vended_s3(config: Mapping[str, str]) -> Any:
    """A client on a vended credential's `s3.*` config; one attempt, so a refusal shows at once."""
    return boto3.session.Session().client(
        "s3",
        endpoint_url=config["s3.endpoint"],
        region_name=config["s3.region"],
        aws_access_key_id=config["s3.access-key-id"],
        aws_secret_access_key=config["s3.secret-access-key"],
        aws_session_token=config["s3.session-token"],
        config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def admin_s3(info: Mapping[str, Any]) -> Any:
    """A client with the local stack's admin keys (sees every object, whatever the policy)."""
    s3 = info["s3"]
    return boto3.session.Session().client(
        "s3",
        endpoint_url=s3["endpoint"],
        region_name=s3["region"],
        aws_access_key_id=s3["admin_access_key"],
        aws_secret_access_key=s3["admin_secret_key"],
        config=botocore.config.Config(s3={"addressing_style": "path"}),
    )
