"""The inline STS session policy Lakekeeper attaches to a vended S3 credential.

Mirrors `get_sts_policy_string` in Lakekeeper's `crates/lakekeeper/src/service/storage/s3.rs`:
object actions on `<bucket>/<key>/*`, `s3:ListBucket` only with `s3:prefix` like `<key>/*` (never
the bare `<key>`, so a credential for `.../t1` cannot list a sibling `.../t10/`), and
`s3:GetBucketLocation`. IAM glob characters (`*`, `?`, `$`) in the key are escaped as `${*}`,
`${?}`, `${$}` (`escape_iam_glob_literal`). Read access gets get actions only; read-write-delete
adds put, delete and multipart actions.
"""

from __future__ import annotations

import enum
import json
from urllib.parse import urlsplit

from devstack.emulator.errors import ApiError

READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
WRITE_ACTIONS = (
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)


class Permission(enum.Enum):
    """Storage permission level of a vended credential (part of the STC cache key)."""

    READ = "read"
    READ_WRITE_DELETE = "read-write-delete"


def split_s3_location(location: str) -> tuple[str, str]:
    """`s3://bucket/a/b/` -> ("bucket", "a/b")."""
    parts = urlsplit(location)
    if parts.scheme not in ("s3", "s3a", "s3n") or not parts.netloc:
        raise ApiError(400, "InvalidLocation", "Location is not an S3 location")
    return parts.netloc, parts.path.strip("/")


_IAM_ESCAPES = {"*": "${*}", "?": "${?}", "$": "${$}"}


def escape_iam_glob(value: str) -> str:
    """Make `*`, `?` and `$` match literally in an IAM Resource ARN or StringLike value."""
    return "".join(_IAM_ESCAPES.get(c, c) for c in value)


def session_policy(location: str, permission: Permission) -> dict[str, object]:
    """The policy document scoped to `location` (a table's base location)."""
    bucket, key = split_s3_location(location)
    actions = list(READ_ACTIONS)
    if permission is Permission.READ_WRITE_DELETE:
        actions.extend(WRITE_ACTIONS)
    key_wildcard = escape_iam_glob(f"{key}/") + "*"
    bucket_arn = f"arn:aws:s3:::{bucket}"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TableAccess",
                "Effect": "Allow",
                "Action": actions,
                "Resource": f"{bucket_arn}/{key_wildcard}",
            },
            {
                "Sid": "ListBucketForFolder",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": bucket_arn,
                "Condition": {"StringLike": {"s3:prefix": key_wildcard}},
            },
            {
                "Sid": "GetBucketLocation",
                "Effect": "Allow",
                "Action": "s3:GetBucketLocation",
                "Resource": bucket_arn,
            },
        ],
    }


def session_policy_json(location: str, permission: Permission) -> str:
    return json.dumps(session_policy(location, permission), separators=(",", ":"))
