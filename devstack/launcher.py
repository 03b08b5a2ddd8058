"""Start and stop the local stack: IdP -> SeaweedFS -> catalog emulator -> (gateway).

With `storages` naming `adls` and/or `gcs`, Azurite and/or fake-gcs-server (behind its
token-checking layer) start too, each with a warehouse of its own (`demo_adls`, `demo_gcs`).

State lives in a run directory (default `.devstack/`): `pids.json` (what to stop),
`stack.json` (what tools and tests read, see docs/contracts.md §2), logs, keys and data.
A second `up` while recorded processes run is refused; `down` stops every recorded pid
(SIGTERM, then SIGKILL) and verifies they are gone.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import shutil
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from devstack import adls_guard, azurite, fake_gcs, idp_config, nats, processes, seaweed
from devstack.bootstrap import (
    WarehouseSpec,
    adls_warehouse,
    bootstrap_catalog,
    create_warehouse,
    fetch_token,
    gcs_warehouse,
)
from devstack.errors import DevstackError, StackRunningError, StartupError
from devstack.gateway_proc import start_gateway
from devstack.ports import free_ports
from devstack.processes import ProcessRecord
from devstack.readiness import http_ok, port_open, ready_check, s3_ready
from devstack.runstate import pids_path, read_pids, running_processes, write_pids
from devstack.stack_info import (
    AzureInfo,
    CatalogInfo,
    ClientInfo,
    GcsInfo,
    IdpInfo,
    NatsInfo,
    S3Info,
    StackInfo,
    WarehouseInfo,
)

BUCKET = "warehouse"
KEY_PREFIX = "lakehouse"
WAREHOUSE = "demo"
WAREHOUSE_ADLS = "demo_adls"
WAREHOUSE_GCS = "demo_gcs"
WAREHOUSE_SIGNING = "demo_signing"  # S3 with STS off: remote signing only
KEY_PREFIX_SIGNING = "lakehouse/signing"  # inside the STS role's resource prefix
ADLS_CONTAINER = "warehouse"
GCS_BUCKET = "warehouse"
NAMESPACE = "demo_ns"
READY_TIMEOUT_S = 20.0
START_ATTEMPTS = 2
STOP_ORDER = ("gateway", "catalog", "nats", "gcs-guard", "gcs", "adls-guard", "azurite", "s3",
              "idp")
STORAGES = ("s3", "adls", "gcs")
# Files `up` recreates; anything else in the run directory is left alone.
_STATE_FILES = (
    "catalog.db",
    "catalog.db-wal",
    "catalog.db-shm",
    "idp-key.json",
    "idp.json",
    "iam.json",
    "emulator.json",
    "stack.json",
    "ports.json",
    "gcs-guard.json",
    "adls-guard.json",
)
_STATE_DIRS = ("s3-data", "s3-logs", "s3-admin", "azurite")


@dataclass
class Stack:
    """A running stack: `info` is the content of stack.json."""

    run_dir: Path
    info: StackInfo
    records: dict[str, ProcessRecord] = field(default_factory=dict)

    def stop(self) -> None:
        stop_stack(self.run_dir)


def _clean_state(run_dir: Path) -> None:
    for name in _STATE_FILES:
        (run_dir / name).unlink(missing_ok=True)
    for name in _STATE_DIRS:
        shutil.rmtree(run_dir / name, ignore_errors=True)


def start_stack(
    run_dir: Path,
    *,
    with_gateway: bool = True,
    token_ttl_s: int = 3600,
    sts_validity_s: int = 3600,
    catalog_auth: bool = True,
    soft_delete: bool = False,
    gateway_env: Mapping[str, str] | None = None,
    storages: Sequence[str] = ("s3",),
) -> Stack:
    """Start the stack in `run_dir` and return it once every part is ready.

    Args:
        run_dir: state directory (created; previous stack state in it is replaced).
        with_gateway: also start `python -m gateway serve` against the stack.
        token_ttl_s: IdP access-token lifetime.
        sts_validity_s: the warehouse's `sts-token-validity-seconds` (>= 900 is what STS grants).
        catalog_auth: the emulator validates bearer JWTs (False: header ignored).
        soft_delete: warehouse delete profile soft (7 days) instead of hard.
        gateway_env: extra `LAKEGATE__*` variables for the gateway.
        storages: object stores to run, each with its warehouse: `s3` always (the `demo`
            warehouse), `adls` (Azurite, `demo_adls`), `gcs` (fake-gcs-server, `demo_gcs`).

    Raises:
        StackRunningError: processes recorded in `run_dir` still run.
        StartupError: a part did not become ready (everything started is stopped again).
    """
    unknown = set(storages) - set(STORAGES)
    if unknown:
        raise DevstackError(f"unknown storage {sorted(unknown)}; choose from {STORAGES}")
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    alive = running_processes(run_dir)
    if alive:
        pids = ", ".join(f"{n}={r.pid}" for n, r in alive.items())
        raise StackRunningError(
            f"a stack is already running in {run_dir} ({pids}); "
            f"run `lakegate-devstack down --dir {run_dir}` first"
        )
    for attempt in range(1, START_ATTEMPTS + 1):
        stop_stack(run_dir)  # clears leftovers of a crashed stack or a failed attempt
        _clean_state(run_dir)
        records: dict[str, ProcessRecord] = {}
        tmp_sockets: list[str] = []
        try:
            return _start(
                run_dir,
                records,
                tmp_sockets,
                with_gateway=with_gateway,
                token_ttl_s=token_ttl_s,
                sts_validity_s=sts_validity_s,
                catalog_auth=catalog_auth,
                soft_delete=soft_delete,
                gateway_env=gateway_env,
                storages=tuple(storages),
            )
        except StartupError as exc:
            write_pids(run_dir, records, tmp_sockets)
            stop_stack(run_dir)
            # A free port taken by someone else between choice and bind: try fresh ports once.
            if attempt == START_ATTEMPTS or not _port_clash(str(exc)):
                raise
        except BaseException:
            write_pids(run_dir, records, tmp_sockets)
            stop_stack(run_dir)
            raise
    raise AssertionError("unreachable")


def _port_clash(message: str) -> bool:
    text = message.lower()
    return "address already in use" in text or "eaddrinuse" in text


def _start(
    run_dir: Path,
    records: dict[str, ProcessRecord],
    tmp_sockets: list[str],
    *,
    with_gateway: bool,
    token_ttl_s: int,
    sts_validity_s: int,
    catalog_auth: bool,
    soft_delete: bool,
    gateway_env: Mapping[str, str] | None,
    storages: tuple[str, ...] = ("s3",),
) -> Stack:
    t0 = time.monotonic()
    ports = free_ports(4 + seaweed.SeaweedPorts.COUNT)
    idp_port, catalog_port, nats_port, nats_monitor_port = ports[:4]
    s3_ports = seaweed.SeaweedPorts.from_list(ports[4:])
    logs = run_dir / "logs"

    # IdP: key stable for the stack's life (reused if the IdP is restarted).
    clients = idp_config.make_clients()
    jwk = idp_config.load_or_create_key(run_dir / "idp-key.json")
    issuer = idp_config.write_config(
        run_dir / "idp.json", port=idp_port, token_ttl_s=token_ttl_s, clients=clients, jwk=jwk
    )
    records["idp"] = processes.spawn(
        "idp", idp_config.node_argv(run_dir / "idp.json"), log_path=logs / "idp.log"
    )

    keys = seaweed.SeaweedKeys.generate()
    iam = run_dir / "iam.json"
    seaweed.write_iam(iam, keys, bucket=BUCKET, key_prefix=KEY_PREFIX)
    records["s3"] = processes.spawn(
        "s3", seaweed.weed_argv(run_dir, s3_ports, iam, bucket=BUCKET), log_path=logs / "s3.log"
    )
    tmp_sockets.extend(seaweed.tmp_socket_patterns(s3_ports))
    s3_endpoint = f"http://127.0.0.1:{s3_ports.s3}"

    # NATS before the catalog: Lakekeeper (and the emulator) refuse to start without it.
    nats_info = NatsInfo(url=f"nats://127.0.0.1:{nats_port}", subject=nats.SUBJECT,
                         monitor_url=f"http://127.0.0.1:{nats_monitor_port}")
    records["nats"] = processes.spawn(
        "nats", nats.nats_argv(nats_port, nats_monitor_port), log_path=logs / "nats.log"
    )
    processes.wait_until(
        records["nats"], lambda: http_ok(f"{nats_info.monitor_url}/healthz"),
        timeout_s=READY_TIMEOUT_S, what="NATS", interval_s=0.1,
    )

    roles = {"read": str(uuid.uuid4()), "write": str(uuid.uuid4())}
    emulator_cfg = {
        "host": "127.0.0.1",
        "port": catalog_port,
        "db_path": str(run_dir / "catalog.db"),
        "openid_provider_uri": issuer if catalog_auth else None,
        "audiences": [idp_config.AUDIENCE],
        "read_role_id": roles["read"],
        "write_role_id": roles["write"],
        "nats_address": nats_info.url,
        "nats_topic": nats_info.subject,
        # Lakekeeper's directory SAS: the ADLS layer (devstack/adls_guard.py) enforces it.
        "adls_sas_scope": "directory",
    }
    (run_dir / "emulator.json").write_text(json.dumps(emulator_cfg, indent=1))
    records["catalog"] = processes.spawn(
        "catalog",
        [sys.executable, "-m", "devstack.emulator", "--config", str(run_dir / "emulator.json")],
        log_path=logs / "catalog.log",
        env_extra={"PYTHONUNBUFFERED": "1"},
    )
    write_pids(run_dir, records, tmp_sockets)
    catalog_url = f"http://127.0.0.1:{catalog_port}"

    processes.wait_until(
        records["idp"],
        lambda: http_ok(f"{issuer}/.well-known/openid-configuration"),
        timeout_s=READY_TIMEOUT_S,
        what="IdP",
    )
    processes.wait_until(
        records["s3"],
        lambda: s3_ready(s3_endpoint, keys, BUCKET),
        timeout_s=READY_TIMEOUT_S,
        what="SeaweedFS",
        interval_s=0.1,
    )
    processes.wait_until(
        records["catalog"],
        lambda: http_ok(f"{catalog_url}/health"),
        timeout_s=READY_TIMEOUT_S,
        what="catalog emulator",
    )
    azure_info = _start_azurite(run_dir, records) if "adls" in storages else None
    gcs_account = fake_gcs.service_account()
    gcs_info = _start_gcs(run_dir, records, gcs_account) if "gcs" in storages else None

    token_url = f"{issuer}/token"
    admin = clients["admin"]
    token = fetch_token(token_url, admin.client_id, admin.client_secret) if catalog_auth else None
    spec = WarehouseSpec(
        name=WAREHOUSE,
        bucket=BUCKET,
        key_prefix=KEY_PREFIX,
        endpoint=s3_endpoint,
        region=seaweed.REGION,
        role_arn=seaweed.ROLE_ARN,
        access_key=keys.catalog_access_key,
        secret_key=keys.catalog_secret_key,
        sts_validity_s=sts_validity_s,
        soft_delete=soft_delete,
    )
    warehouse_id = bootstrap_catalog(catalog_url, token, spec, NAMESPACE)
    storage_warehouses: dict[str, WarehouseInfo] = {}
    # The same store with STS off: only remote signing reaches its data (Lakekeeper's way for
    # stores without STS), through the catalog's signer or the gateway's.
    signing_spec = dataclasses.replace(
        spec, name=WAREHOUSE_SIGNING, key_prefix=KEY_PREFIX_SIGNING, sts_enabled=False,
        access_key=keys.signer_access_key, secret_key=keys.signer_secret_key)
    storage_warehouses["s3-signing"] = WarehouseInfo(
        id=create_warehouse(catalog_url, token, signing_spec, NAMESPACE), name=WAREHOUSE_SIGNING,
        sts_validity_s=sts_validity_s, delete_profile="soft" if soft_delete else "hard",
    )  # fmt: skip
    if azure_info is not None:
        adls_spec = adls_warehouse(
            WAREHOUSE_ADLS, account=azure_info.account, account_key=azurite.ACCOUNT_KEY,
            container=azure_info.container, key_prefix=azure_info.key_prefix,
            host=azure_info.host, validity_s=sts_validity_s,
        )  # fmt: skip
        storage_warehouses["adls"] = WarehouseInfo(
            id=create_warehouse(catalog_url, token, adls_spec, NAMESPACE), name=WAREHOUSE_ADLS,
            sts_validity_s=sts_validity_s, delete_profile="hard",
        )  # fmt: skip
    if gcs_info is not None:
        gcs_spec = gcs_warehouse(
            WAREHOUSE_GCS, bucket=gcs_info.bucket, key_prefix=gcs_info.key_prefix,
            service_account=gcs_account,
        )  # fmt: skip
        storage_warehouses["gcs"] = WarehouseInfo(
            id=create_warehouse(catalog_url, token, gcs_spec, NAMESPACE), name=WAREHOUSE_GCS,
            sts_validity_s=3600, delete_profile="hard",
        )  # fmt: skip

    info = StackInfo(
        run_dir=str(run_dir),
        idp=IdpInfo(
            issuer=issuer,
            token_url=token_url,
            jwks_uri=f"{issuer}/jwks",
            audience=idp_config.AUDIENCE,
            token_ttl_s=token_ttl_s,
            clients={
                n: ClientInfo(id=c.client_id, secret=c.client_secret) for n, c in clients.items()
            },
        ),
        s3=S3Info(
            endpoint=s3_endpoint,
            region=seaweed.REGION,
            bucket=BUCKET,
            key_prefix=KEY_PREFIX,
            admin_access_key=keys.admin_access_key,
            admin_secret_key=keys.admin_secret_key,
            role_arn=seaweed.ROLE_ARN,
            metrics_url=f"http://127.0.0.1:{s3_ports.metrics}",
        ),
        catalog=CatalogInfo(url=catalog_url, auth=catalog_auth, roles=roles),
        warehouse=WarehouseInfo(
            id=warehouse_id,
            name=WAREHOUSE,
            sts_validity_s=sts_validity_s,
            delete_profile="soft" if soft_delete else "hard",
        ),
        namespace=NAMESPACE,
        nats=nats_info,
        azure=azure_info,
        gcs=gcs_info,
        storage_warehouses=storage_warehouses,
    )
    if with_gateway:
        gw_record, gw_info = start_gateway(
            run_dir, info, extra_env=gateway_env, timeout_s=READY_TIMEOUT_S
        )
        records["gateway"] = gw_record
        info = info.model_copy(update={"gateway": gw_info})
    info = info.model_copy(update={
        "pids": {name: rec.pid for name, rec in records.items()},
        "startup_s": round(time.monotonic() - t0, 2),
    })
    write_pids(run_dir, records, tmp_sockets)
    info.write(run_dir / "stack.json")
    return Stack(run_dir=run_dir, info=info, records=dict(records))


def _start_azurite(run_dir: Path, records: dict[str, ProcessRecord]) -> AzureInfo:
    """Azurite's blob service on a free loopback port, with the warehouse's container, and in
    front of it the SAS-checking layer that clients use (it enforces Lakekeeper's directory
    SAS, which Azurite refuses)."""
    port, guard_port = free_ports(2)
    workdir = run_dir / "azurite"
    workdir.mkdir(parents=True, exist_ok=True)
    records["azurite"] = processes.spawn(
        "azurite", azurite.azurite_argv(port), log_path=run_dir / "logs" / "azurite.log",
        cwd=workdir,
    )  # fmt: skip
    endpoint = azurite.blob_endpoint(port)
    processes.wait_until(
        records["azurite"], lambda: port_open("127.0.0.1", port),
        timeout_s=READY_TIMEOUT_S, what="Azurite", interval_s=0.1,
    )  # fmt: skip
    azurite.create_container(endpoint, ADLS_CONTAINER)
    processes.wait_until(
        records["azurite"], lambda: azurite.azurite_ready(endpoint, ADLS_CONTAINER),
        timeout_s=READY_TIMEOUT_S, what="Azurite container", interval_s=0.1,
    )  # fmt: skip
    config = run_dir / "adls-guard.json"
    adls_guard.write_config(config, port=guard_port, upstream=f"http://127.0.0.1:{port}",
                            account=azurite.ACCOUNT, key_b64=azurite.ACCOUNT_KEY)
    records["adls-guard"] = processes.spawn(
        "adls-guard", [sys.executable, "-m", "devstack.adls_guard", "--config", str(config)],
        log_path=run_dir / "logs" / "adls-guard.log", env_extra={"PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    guarded = azurite.blob_endpoint(guard_port)
    processes.wait_until(
        records["adls-guard"], lambda: azurite.azurite_ready(guarded, ADLS_CONTAINER),
        timeout_s=READY_TIMEOUT_S, what="ADLS SAS-checking layer", interval_s=0.1,
    )  # fmt: skip
    return AzureInfo(
        blob_endpoint=guarded, account=azurite.ACCOUNT, host=azurite.HOST,
        container=ADLS_CONTAINER, key_prefix=KEY_PREFIX, server_endpoint=endpoint,
    )  # fmt: skip


def _start_gcs(
    run_dir: Path, records: dict[str, ProcessRecord], account: dict[str, str]
) -> GcsInfo:
    """fake-gcs-server and, in front of it, the token-checking layer that clients use."""
    server_port, guard_port = free_ports(2)
    logs = run_dir / "logs"
    records["gcs"] = processes.spawn(
        "gcs", fake_gcs.server_argv(server_port, guard_port), log_path=logs / "gcs.log"
    )
    server = f"http://127.0.0.1:{server_port}"
    processes.wait_until(
        records["gcs"], lambda: port_open("127.0.0.1", server_port),
        timeout_s=READY_TIMEOUT_S, what="fake-gcs-server", interval_s=0.1,
    )  # fmt: skip
    fake_gcs.create_bucket(server, GCS_BUCKET)
    config = run_dir / "gcs-guard.json"
    fake_gcs.write_guard_config(config, port=guard_port, upstream=server, accounts=[account])
    records["gcs-guard"] = processes.spawn(
        "gcs-guard", [sys.executable, "-m", "devstack.gcs_guard", "--config", str(config)],
        log_path=logs / "gcs-guard.log", env_extra={"PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{guard_port}"
    processes.wait_until(
        records["gcs-guard"], lambda: fake_gcs.guard_ready(endpoint),
        timeout_s=READY_TIMEOUT_S, what="GCS token-checking layer", interval_s=0.1,
    )  # fmt: skip
    return GcsInfo(
        endpoint=endpoint, server_endpoint=server, bucket=GCS_BUCKET, key_prefix=KEY_PREFIX,
        project_id=fake_gcs.PROJECT_ID,
    )  # fmt: skip


def stop_stack(run_dir: Path) -> list[str]:
    """Stop every recorded process (reverse start order); idempotent. Returns stopped names."""
    run_dir = Path(run_dir)
    records, tmp_sockets = read_pids(run_dir)
    stopped: list[str] = []
    names = [n for n in STOP_ORDER if n in records] + [n for n in records if n not in STOP_ORDER]
    for name in names:
        rec = records[name]
        if processes.is_alive(rec):
            processes.stop(rec)
            stopped.append(name)
    for pattern in tmp_sockets:
        for sock in glob.glob(pattern):
            Path(sock).unlink(missing_ok=True)
    pids_path(run_dir).unlink(missing_ok=True)
    (run_dir / "stack.json").unlink(missing_ok=True)
    return stopped


def stop_component(run_dir: Path, name: str) -> None:
    """Stop one part of a running stack (e.g. the catalog, to test an outage); keep its record."""
    records, _ = read_pids(Path(run_dir))
    if name not in records:
        raise DevstackError(f"no component {name!r} recorded in {run_dir}")
    processes.stop(records[name])


def start_component(run_dir: Path, name: str, *, timeout_s: float = READY_TIMEOUT_S) -> int:
    """Start a stopped part again on the same ports and state; waits until ready; returns its pid.

    The catalog keeps its SQLite state and the IdP its signing key, so existing tables and
    tokens stay valid.
    """
    run_dir = Path(run_dir)
    records, tmp_sockets = read_pids(run_dir)
    if name not in records:
        raise DevstackError(f"no component {name!r} recorded in {run_dir}")
    if processes.is_alive(records[name]):
        raise StackRunningError(f"{name} is still running (pid {records[name].pid})")
    info = StackInfo.load(run_dir)
    record = processes.respawn(records[name])
    records[name] = record
    write_pids(run_dir, records, tmp_sockets)
    processes.wait_until(
        record, ready_check(info, name), timeout_s=timeout_s, what=name, interval_s=0.1
    )
    info.model_copy(update={"pids": {**info.pids, name: record.pid}}).write(run_dir / "stack.json")
    return record.pid
