"""First calls against a fresh catalog: bootstrap, the `demo` warehouse, the `demo_ns` namespace.

Uses the emulator's real HTTP API with a token from the real IdP (the `admin` client), as an
operator would against Lakekeeper.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from devstack.errors import StartupError


@dataclass(frozen=True)
class WarehouseSpec:
    """A warehouse the launcher creates (S3 profile on SeaweedFS; STS on unless told)."""

    name: str
    bucket: str
    key_prefix: str
    endpoint: str
    region: str
    role_arn: str
    access_key: str
    secret_key: str
    sts_validity_s: int
    soft_delete: bool
    # False: a warehouse that only signs (Lakekeeper's remote signing reaches its data).
    sts_enabled: bool = True

    def __repr__(self) -> str:
        return f"WarehouseSpec(name={self.name!r}, bucket={self.bucket!r}, secret=***)"

    def body(self) -> dict[str, object]:
        delete_profile: dict[str, object] = (
            {"type": "soft", "expiration-seconds": 604800} if self.soft_delete else {"type": "hard"}
        )
        return {
            "warehouse-name": self.name,
            "project-id": "00000000-0000-0000-0000-000000000000",
            "storage-profile": {
                "type": "s3",
                "bucket": self.bucket,
                "region": self.region,
                "endpoint": self.endpoint,
                "path-style-access": True,
                "key-prefix": self.key_prefix,
                "sts-enabled": self.sts_enabled,
                "flavor": "s3-compat",
                "sts-role-arn": self.role_arn,
                "sts-token-validity-seconds": self.sts_validity_s,
            },
            "storage-credential": {
                "type": "s3",
                "credential-type": "access-key",
                "access-key-id": self.access_key,
                "secret-access-key": self.secret_key,
            },
            "delete-profile": delete_profile,
        }


@dataclass(frozen=True)
class CloudWarehouseSpec:
    """A warehouse on ADLS or GCS: the storage profile and credential in Lakekeeper's shape."""

    name: str
    storage_profile: dict[str, object]
    storage_credential: dict[str, object]

    def __repr__(self) -> str:
        return f"CloudWarehouseSpec(name={self.name!r}, secret=***)"

    def body(self) -> dict[str, object]:
        return {
            "warehouse-name": self.name,
            "project-id": "00000000-0000-0000-0000-000000000000",
            "storage-profile": self.storage_profile,
            "storage-credential": self.storage_credential,
            "delete-profile": {"type": "hard"},
        }


def adls_warehouse(
    name: str, *, account: str, account_key: str, container: str, key_prefix: str, host: str,
    validity_s: int,
) -> CloudWarehouseSpec:  # fmt: skip
    """Lakekeeper's `AdlsProfile` with a `shared-access-key` credential."""
    return CloudWarehouseSpec(
        name=name,
        storage_profile={
            "type": "adls", "filesystem": container, "account-name": account, "host": host,
            "key-prefix": key_prefix, "sas-token-validity-seconds": validity_s,
        },
        storage_credential={
            "type": "az", "credential-type": "shared-access-key", "key": account_key,
        },
    )  # fmt: skip


def gcs_warehouse(
    name: str, *, bucket: str, key_prefix: str, service_account: dict[str, str]
) -> CloudWarehouseSpec:
    """Lakekeeper's `GcsProfile` with a `service-account-key` credential."""
    return CloudWarehouseSpec(
        name=name,
        storage_profile={"type": "gcs", "bucket": bucket, "key-prefix": key_prefix},
        storage_credential={
            "type": "gcs", "credential-type": "service-account-key", "key": service_account,
        },
    )  # fmt: skip


def create_warehouse(
    catalog_url: str, token: str | None, spec: CloudWarehouseSpec, namespace: str
) -> str:
    """Create one more warehouse (and its namespace) on a bootstrapped catalog; returns its id."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=catalog_url, headers=headers, timeout=10) as http:
        resp = http.post("/management/v1/warehouse", json=spec.body())
        if resp.status_code != 201:
            raise StartupError(
                f"warehouse {spec.name} create failed: HTTP {resp.status_code} {resp.text[:200]}"
            )
        warehouse_id = str(resp.json()["warehouse-id"])
        resp = http.post(f"/catalog/v1/{warehouse_id}/namespaces", json={"namespace": [namespace]})
        if resp.status_code not in (200, 409):
            raise StartupError(
                f"namespace create failed: HTTP {resp.status_code} {resp.text[:200]}"
            )
    return warehouse_id


def fetch_token(token_url: str, client_id: str, client_secret: str) -> str:
    """A client-credentials access token from the stack's IdP."""
    resp = httpx.post(
        token_url,
        data={"grant_type": "client_credentials"},
        auth=(client_id, client_secret),
        timeout=10,
    )
    if resp.status_code != 200:
        raise StartupError(f"IdP refused the {client_id} client: HTTP {resp.status_code}")
    return str(resp.json()["access_token"])


def bootstrap_catalog(
    catalog_url: str, token: str | None, spec: WarehouseSpec, namespace: str
) -> str:
    """Bootstrap, create the warehouse and namespace; returns the warehouse id."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=catalog_url, headers=headers, timeout=10) as http:
        resp = http.post("/management/v1/bootstrap", json={"accept-terms-of-use": True})
        if resp.status_code not in (204, 400):
            raise StartupError(f"bootstrap failed: HTTP {resp.status_code} {resp.text[:200]}")
        resp = http.post("/management/v1/warehouse", json=spec.body())
        if resp.status_code == 409:
            listing = http.get("/management/v1/warehouse").json()["warehouses"]
            warehouse_id = str(next(w["warehouse-id"] for w in listing if w["name"] == spec.name))
        elif resp.status_code == 201:
            warehouse_id = str(resp.json()["warehouse-id"])
        else:
            raise StartupError(
                f"warehouse create failed: HTTP {resp.status_code} {resp.text[:200]}"
            )
        resp = http.post(f"/catalog/v1/{warehouse_id}/namespaces", json={"namespace": [namespace]})
        if resp.status_code not in (200, 409):
            raise StartupError(
                f"namespace create failed: HTTP {resp.status_code} {resp.text[:200]}"
            )
    return warehouse_id
