"""Audit a table on the local stack as its storage owner: rows by the format's own reader, and
every object under its location that no version of the table references (an orphan).

Why the owner's keys: a vended credential may not list pending multipart uploads or HEAD the bare
location; an audit must see everything that is there. Shared by the e2e write-protocol tests and
the hardening write suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from devstack.stack_info import StackInfo

PLAIN_FORMATS = ("parquet", "csv", "json")
PLAIN_MARKER = "_lakegate_commit.json"
LANCE_LEDGER = "_lakegate_attempts"  # lakegate_client.tables.attempts.LEDGER


@dataclass(frozen=True)
class Audit:
    """What is under one table's location. ``awaiting_sweep`` (Lance): the records of attempts
    that finished after their job ended, and the unreferenced files they name, which the next
    commit, abort or recovery on the dataset deletes (``attempts.sweep_ended``); not orphans,
    as a pending upload is not."""

    native_ids: list[int]
    orphans: list[str]
    pending_uploads: int
    awaiting_sweep: list[str] = field(default_factory=list)


class TableAuditor:
    """Owner-keyed access to the stack's S3 (boto3 and pyarrow), or with ``storage="adls"`` to
    its Azurite container (an account-key-signed container SAS, the Blob REST store), or with
    ``storage="gcs"`` to fake-gcs-server itself (plain tables)."""

    def __init__(self, info: StackInfo, storage: str = "s3") -> None:
        import boto3

        s3 = info.s3
        self._info, self.storage = info, storage
        self.s3: Any = boto3.session.Session().client(
            "s3", endpoint_url=s3.endpoint, region_name=s3.region,
            aws_access_key_id=s3.admin_access_key, aws_secret_access_key=s3.admin_secret_key,
        )
        self._adls: Any = None
        if storage == "adls":
            self._adls = self._adls_settings(info)
        # GCS: fake-gcs-server itself, which checks no token (the owner's view, past the layer)
        self._gcs_server = info.gcs.server_endpoint if storage == "gcs" and info.gcs else None

    @staticmethod
    def _adls_settings(info: StackInfo) -> Any:
        """The owner's ADLS facts: a container SAS signed with the development account key."""
        from devstack import azurite
        from lakegate_client._azure import AdlsSettings

        assert info.azure is not None, "the stack runs without adls"
        return AdlsSettings(account_name=info.azure.account, host_suffix=info.azure.host,
                            sas_token=azurite.owner_sas(info.azure.container),
                            account_host=None, expires_at_ms=None,
                            endpoint=info.azure.blob_endpoint)

    def _store(self, location: str) -> Any:
        from lakegate_client.engine.stores.adls import AzureBlobStore
        from lakegate_client.engine.stores.base import S3Location
        from lakegate_client.engine.stores.s3 import S3Store

        bucket = S3Location.parse(location).bucket
        if self._gcs_server is not None:
            from lakegate_client.engine.stores.gcs import GcsStore

            return GcsStore(self._gcs_server, bucket, "owner")
        if self._adls is not None:
            return AzureBlobStore(self._adls.blob_endpoint, bucket, self._adls.sas_token)
        return S3Store(self.s3, bucket)

    def _split(self, location: str) -> tuple[str, str]:
        from lakegate_client.engine.stores.base import S3Location

        where = S3Location.parse(location)
        return where.bucket, where.prefix

    def objects(self, location: str) -> list[str]:
        """Every object under the location (relative paths)."""
        _, key = self._split(location)
        return sorted(k[len(key) + 1 :] for k in self._store(location).list(key + "/"))

    def pending_uploads(self, location: str) -> int:
        """Staged files nobody completed (S3 multipart uploads, ADLS uncommitted blobs)."""
        _, key = self._split(location)
        return len(list(self._store(location).pending_staged(key + "/")))

    def _read(self, location: str, rel: str) -> bytes:
        _, key = self._split(location)
        found = self._store(location).get(f"{key}/{rel}")
        assert found is not None, f"{rel} vanished"
        body: bytes = found[0]
        return body

    def _storage_options(self) -> dict[str, str]:
        if self._adls is not None:
            return dict(self._adls.delta())
        s3 = self._info.s3
        return {"aws_access_key_id": s3.admin_access_key,
                "aws_secret_access_key": s3.admin_secret_key, "aws_region": s3.region,
                "aws_endpoint": s3.endpoint, "aws_allow_http": "true",
                "allow_http": "true", "aws_virtual_hosted_style_request": "false"}

    def iceberg_table(self, namespace: str, name: str) -> Any:
        """The Iceberg table through the gateway's catalog (pyiceberg), for its own reader."""
        from pyiceberg.catalog.rest import RestCatalog

        rest = RestCatalog("audit", uri=self._info.gateway_url + "/catalog",
                           warehouse=self._info.warehouse.name,
                           **{"header.X-Lakegate-Request": "1"})
        return rest.load_table((namespace, name))

    def audit(self, fmt: str, location: str, table: Any = None) -> Audit:
        """Rows by the format's reader, orphans and pending uploads under ``location``."""
        if self.storage == "adls":  # a fresh owner SAS (it lives an hour)
            self._adls = self._adls_settings(self._info)
        objects = self.objects(location)
        awaiting: list[str] = []
        if fmt in PLAIN_FORMATS:
            ids, orphans = self._plain(fmt, location, objects)
        elif fmt == "delta":
            ids, orphans = self._delta(location, objects)
        elif fmt == "lance":
            ids, orphans, awaiting = self._lance(location, objects)
        elif fmt == "iceberg":
            ids, orphans = self._iceberg(table, objects)
        else:
            raise ValueError(f"no audit for {fmt!r}")
        return Audit(sorted(ids), orphans, self.pending_uploads(location), awaiting)

    def _plain(self, fmt: str, location: str, objects: list[str]) -> tuple[list[int], list[str]]:
        import pyarrow.dataset as pads
        import pyarrow.fs as pafs

        if self._adls is not None or self._gcs_server is not None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            data = [r for r in objects if not r.startswith(("_", ".")) and r.endswith(f".{fmt}")]
            ids = [i for r in data for i in pq.read_table(pa.BufferReader(
                self._read(location, r)), columns=["id"]).column("id").to_pylist()]
            staged = "_lakegate_staging/"  # GCS's staged parts: counted as pending uploads
            return ids, [r for r in objects if r not in data and r != PLAIN_MARKER
                         and not r.startswith(staged) and f"/{staged}" not in r]
        s3 = self._info.s3
        scheme, _, host = s3.endpoint.partition("://")
        fs = pafs.S3FileSystem(access_key=s3.admin_access_key, secret_key=s3.admin_secret_key,
                               endpoint_override=host, scheme=scheme, region=s3.region,
                               force_virtual_addressing=False)
        root = location.split("://", 1)[1].rstrip("/")
        data = [r for r in objects if not r.startswith(("_", ".")) and r.endswith(f".{fmt}")]
        ids = (pads.dataset([f"{root}/{r}" for r in data], filesystem=fs, format=fmt)
               .to_table(columns=["id"]).column("id").to_pylist()) if data else []
        orphans = [r for r in objects if r not in data and r != PLAIN_MARKER]
        return ids, orphans

    def _delta(self, location: str, objects: list[str]) -> tuple[list[int], list[str]]:
        from deltalake import DeltaTable

        referenced: set[str] = set()
        for rel in objects:
            if rel.startswith("_delta_log/") and rel.endswith(".json"):
                for line in self._read(location, rel).splitlines():
                    action = json.loads(line) if line.strip() else {}
                    if "add" in action:
                        referenced.add(str(action["add"]["path"]))
        table = DeltaTable(location, storage_options=self._storage_options())
        ids = table.to_pyarrow_table(columns=["id"]).column("id").to_pylist()
        orphans = [r for r in objects if not r.startswith("_delta_log/") and r not in referenced]
        return ids, orphans

    def _lance(self, location: str,
               objects: list[str]) -> tuple[list[int], list[str], list[str]]:
        import lance

        options = dict(self._adls.lance()) if self._adls is not None else self._storage_options()
        latest = lance.dataset(location, storage_options=options)
        referenced: set[str] = set()
        for version in latest.versions():
            ds = lance.dataset(location, version=version["version"], storage_options=options)
            for fragment in ds.get_fragments():
                referenced.update(f"data/{d.path}" for d in fragment.data_files())
        ids = latest.to_table(columns=["id"]).column("id").to_pylist()
        awaiting = self._awaiting_sweep(location, objects, referenced)
        # the attempt ledger keeps only its create claim (and an older client's closed-jobs
        # list); any other leftover record is debris too
        kept = {f"{LANCE_LEDGER}/closed.json", f"{LANCE_LEDGER}/create.json", *awaiting}
        orphans = [r for r in objects if ((r.startswith("data/") and r not in referenced)
                   or r.startswith(f"{LANCE_LEDGER}/")) and r not in kept]
        return ids, orphans, awaiting

    def _awaiting_sweep(self, location: str, objects: list[str],
                        referenced: set[str]) -> list[str]:
        """The ledger records whose job's intent is gone (late attempts), with the files they
        name; a record naming a referenced file is not here: the sweep would delete data."""
        from lakegate_client.engine.attempts import SWEEP, named_files
        from lakegate_client.engine.job_intent import intent_name

        present = set(objects)
        out: list[str] = []
        for rel in objects:
            parts = rel.split("/")
            if len(parts) != 3 or parts[0] != LANCE_LEDGER or intent_name(parts[1]) in present:
                continue
            files = named_files(rel)  # a name carrying its files is always swept
            if files is None:  # a record with its files in its body, swept if marked
                body = json.loads(self._read(location, rel) or b"{}")
                if body.get("sweep") != SWEEP:
                    continue
                files = [str(f) for f in body.get("files", ())]
            if not referenced.intersection(files):
                out += [rel, *(f for f in files if f in present)]
        return out

    def _iceberg(self, table: Any, objects: list[str]) -> tuple[list[int], list[str]]:
        """``table``: :meth:`iceberg_table`; orphans are data files no snapshot references."""
        location = str(table.location()).rstrip("/")
        table.refresh()
        referenced = {str(p)[len(location) + 1 :]
                      for p in table.inspect.all_files().column("file_path").to_pylist()}
        ids = table.scan().to_arrow().column("id").to_pylist()
        orphans = [r for r in objects if r.startswith("data/") and r not in referenced]
        return ids, orphans
