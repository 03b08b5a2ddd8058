"""What a running dev stack is (the content of its `stack.json`), as typed, frozen models.

Why typed: the tests, the bench, the hardening suites and the demo all read the stack's URLs,
client credentials and ids; a misspelt key in a dict fails far from the mistake, an attribute
fails where it is written (and under mypy, before it runs). The JSON on disk is unchanged:
every field is named as its key, so `stack.json` stays readable by anything else.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClientInfo(_Frozen):
    """An OAuth2 client registered at the IdP (`gateway`, `admin`, `direct`, ...)."""

    id: str
    secret: str = Field(repr=False)


class IdpInfo(_Frozen):
    issuer: str
    token_url: str
    jwks_uri: str
    audience: str
    token_ttl_s: int
    clients: dict[str, ClientInfo]


class S3Info(_Frozen):
    endpoint: str
    region: str
    bucket: str
    key_prefix: str
    admin_access_key: str
    admin_secret_key: str = Field(repr=False)
    role_arn: str
    metrics_url: str | None = None  # SeaweedFS's Prometheus endpoint (S3 requests by type)


class AzureInfo(_Frozen):
    """Azurite (the ADLS store): the development account, its blob endpoint and container."""

    blob_endpoint: str  # http://127.0.0.1:<port>/<account> (what clients override to)
    account: str
    host: str  # the profile's `host`: locations read abfss://<container>@<account>.<host>/...
    container: str
    key_prefix: str
    # Azurite itself, behind the SAS-checking layer (devstack/adls_guard.py) that
    # `blob_endpoint` names: tests and the launcher only.
    server_endpoint: str | None = None


class GcsInfo(_Frozen):
    """fake-gcs-server behind the token-checking layer (the GCS store)."""

    endpoint: str  # the token-checking layer, http://127.0.0.1:<port> (what clients use)
    server_endpoint: str  # fake-gcs-server itself (no auth: tests and the launcher only)
    bucket: str
    key_prefix: str
    project_id: str


class CatalogInfo(_Frozen):
    url: str
    auth: bool  # whether the catalog checks IdP tokens
    roles: dict[str, str]  # "read" / "write" -> the role id the gateway assumes


class WarehouseInfo(_Frozen):
    id: str
    name: str
    sts_validity_s: int
    delete_profile: str  # "soft" or "hard"


class NatsInfo(_Frozen):
    """The NATS server the catalog publishes its change events to (Lakekeeper's NATS sink)."""

    url: str  # nats://127.0.0.1:<port>
    subject: str  # LAKEKEEPER__NATS_TOPIC
    monitor_url: str  # http://127.0.0.1:<port> (/healthz)


class GatewayInfo(_Frozen):
    """The stack's own gateway (`up` starts one unless told not to)."""

    http_url: str
    grpc_target: str
    uds: str
    grpc_uds: str
    caller_token: str | None = Field(default=None, repr=False)


class StackInfo(_Frozen):
    """A running stack: where each part listens and what the catalog was bootstrapped with."""

    run_dir: str
    idp: IdpInfo
    s3: S3Info
    catalog: CatalogInfo
    warehouse: WarehouseInfo
    namespace: str
    gateway: GatewayInfo | None = None
    nats: NatsInfo | None = None
    azure: AzureInfo | None = None
    gcs: GcsInfo | None = None
    # The warehouse of each extra storage ("adls", "gcs", "s3-signing": S3 with STS off, only
    # remote signing reaches it); `warehouse` is the S3 one.
    storage_warehouses: dict[str, WarehouseInfo] = Field(default_factory=dict)
    pids: dict[str, int] = Field(default_factory=dict)
    startup_s: float | None = None

    @classmethod
    def load(cls, path: Path) -> StackInfo:
        """Read `stack.json` (or a run directory holding one).

        Raises:
            OSError: no such file. pydantic.ValidationError: a key is missing or mistyped
                (the message names it).
        """
        path = Path(path)
        if path.is_dir():
            path = path / "stack.json"
        return cls.model_validate_json(path.read_text())

    def write(self, path: Path) -> None:
        """Write `stack.json`, readable by its owner only (it holds client secrets)."""
        path.write_text(self.model_dump_json(indent=1))
        path.chmod(0o600)

    def warehouse_for(self, storage: str) -> WarehouseInfo:
        """The warehouse on `storage` (`s3`, `adls`, `gcs`, or `s3-signing`: S3 without STS).

        Raises:
            LookupError: the stack was started without that storage.
        """
        if storage == "s3":
            return self.warehouse
        if storage not in self.storage_warehouses:
            raise LookupError(f"this stack runs without {storage} (start it with that storage)")
        return self.storage_warehouses[storage]

    @property
    def gateway_url(self) -> str:
        """The stack gateway's HTTP URL.

        Raises:
            LookupError: the stack runs without a gateway.
        """
        if self.gateway is None:
            raise LookupError("this stack runs without a gateway (started with --no-gateway)")
        return self.gateway.http_url
