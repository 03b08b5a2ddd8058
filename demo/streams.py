"""The long job's tasks: each streams ONE object slowly, for longer than its first credential lives.

Why one object per task: the failure Lakegate must prevent is a single long write (a multipart
upload that keeps adding parts) whose later requests are signed with an expired key. Each engine
gets its credentials through its own refresh mechanism, fed by the node's gateway
(``lakegate_client.refresh``); nothing here hands a library a static key.

Runs on executors (imported there through ``PYTHONPATH``); no secret is ever logged or returned.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from lakegate_client.refresh import ContainerCredentials

# Engine -> table format. ``*-static`` engines are the baseline without refresh: the static key
# pair of one vended credential, as any job gets it from a catalog (expected to fail).
ENGINES = {
    "pyarrow": "parquet", "boto3": "parquet", "s3fs": "parquet", "deltalake": "delta",
    "lance": "lance",
    "pyarrow-static": "parquet", "deltalake-static": "delta", "lance-static": "lance",
}
DEFAULT_ENGINES = ("pyarrow", "boto3", "s3fs", "deltalake", "lance")
# Credential rejections as each library words them (SeaweedFS answers an expired session key with
# InvalidAccessKeyId or 403; pyarrow spells the codes in upper case).
EXPIRED = re.compile(
    r"ExpiredToken|EXPIRED_TOKEN|InvalidAccessKeyId|INVALID_ACCESS_KEY_ID|InvalidToken"
    r"|token is expired|credentials? ha(?:s|ve) expired|lacked the necessary privileges",
)
_MIN_PART = 5 * 1024 * 1024  # S3's smallest non-final multipart part


@dataclass(frozen=True)
class StreamSpec:
    """What one task writes and for how long (picklable, no secrets)."""

    engine: str
    namespace: str
    table: str
    location: str  # s3://bucket/prefix of the table
    warehouse: str
    region: str
    endpoint: str
    chunk_rows: int
    interval_s: float
    margin_s: float  # keep streaming this long after the first credential expired
    stream_s: float  # > 0: stream this long instead (smoke runs)
    max_s: float  # hard bound on the stream
    raise_errors: bool = True  # False: return the error in the result (baseline runs)

    @property
    def format(self) -> str:
        return ENGINES[self.engine]


@dataclass(frozen=True)
class StreamResult:
    """What a task measured (returned to the driver)."""

    engine: str
    format: str
    node: str  # the LAKEGATE_URL the task saw (its node's gateway)
    started: float
    ended: float
    first_expiry: float  # epoch s of the first credential the task received
    lifetime_s: float  # that credential's real STS lifetime (session token exp - iat)
    rows: int
    chunks: int
    error: str = ""

    @property
    def duration_s(self) -> float:
        return self.ended - self.started

    @property
    def outlived_first_credential(self) -> bool:
        return self.ended > self.first_expiry

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _first_credential(cc: ContainerCredentials) -> tuple[float, float]:
    """(expiry epoch s, STS lifetime s) of what the gateway serves now: what the SDK gets first."""
    import httpx

    answer = httpx.get(cc.uri, headers={"Authorization": cc.token}, timeout=10.0, trust_env=False)
    answer.raise_for_status()
    doc = answer.json()
    expiry = datetime.fromisoformat(doc["Expiration"].replace("Z", "+00:00")).timestamp()
    return expiry, _token_lifetime(doc.get("Token", ""))


def _token_lifetime(token: str) -> float:
    """SeaweedFS session tokens are JWTs: exp - iat is the lifetime STS granted (0 if unknown)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"]) - float(claims["iat"])
    except (IndexError, KeyError, ValueError, TypeError):
        return 0.0


def _batches(spec: StreamSpec, deadline: float, counter: list[int]) -> Iterator[pa.RecordBatch]:
    """``chunk_rows`` rows every ``interval_s`` until ``deadline`` (epoch s), bounded by max_s."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(7)
    max_chunks = int(spec.max_s / spec.interval_s) + 2
    for index in range(max_chunks):
        if index:
            time.sleep(spec.interval_s)
        base = index * spec.chunk_rows
        ids = np.arange(base, base + spec.chunk_rows, dtype=np.int64)
        yield pa.record_batch({"id": ids, "value": rng.random(spec.chunk_rows)})
        counter[0] += 1
        counter[1] += spec.chunk_rows
        if time.time() >= deadline:
            return


def _schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("value", pa.float64())])


def _path(location: str) -> tuple[str, str]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    return bucket, prefix.rstrip("/")


def _write_pyarrow(spec: StreamSpec, cc: ContainerCredentials, batches: Iterator[Any]) -> None:
    import pyarrow.parquet as pq

    fs = cc.pyarrow_filesystem()  # AWS SDK container provider, re-fetches from the gateway
    bucket, prefix = _path(spec.location)
    with fs.open_output_stream(f"{bucket}/{prefix}/part-00000.parquet") as out, \
            pq.ParquetWriter(out, _schema()) as writer:
        for batch in batches:
            writer.write_batch(batch)


class _MultipartSink(io.RawIOBase):
    """A write-only file that uploads every >= 5 MiB as one part of a boto3 multipart upload."""

    def __init__(self, s3: Any, bucket: str, key: str) -> None:
        self._s3, self._bucket, self._key = s3, bucket, key
        self._upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        self._buffer = bytearray()
        self._parts: list[dict[str, Any]] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._buffer += chunk
        self._position += len(chunk)
        if len(self._buffer) >= _MIN_PART:
            self._flush_part()
        return len(chunk)

    def _flush_part(self) -> None:
        number = len(self._parts) + 1
        answer = self._s3.upload_part(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload,
            PartNumber=number, Body=bytes(self._buffer),
        )
        self._parts.append({"PartNumber": number, "ETag": answer["ETag"]})
        self._buffer.clear()

    def complete(self) -> None:
        if self._buffer or not self._parts:
            self._flush_part()
        self._s3.complete_multipart_upload(
            Bucket=self._bucket, Key=self._key, UploadId=self._upload,
            MultipartUpload={"Parts": self._parts},
        )


def _write_boto3(spec: StreamSpec, batches: Iterator[Any]) -> None:
    import pyarrow.parquet as pq
    from botocore.config import Config

    from lakegate_client import Client
    from lakegate_client.refresh import boto3_session

    with Client(warehouse=spec.warehouse) as client:
        session = boto3_session(  # botocore RefreshableCredentials fed by the gateway
            client, spec.namespace, spec.table, access="write", region=spec.region
        )
        s3 = session.client("s3", endpoint_url=spec.endpoint,
                            config=Config(s3={"addressing_style": "path"}))
        bucket, prefix = _path(spec.location)
        sink = _MultipartSink(s3, bucket, f"{prefix}/part-00000.parquet")
        with pq.ParquetWriter(sink, _schema()) as writer:
            for batch in batches:
                writer.write_batch(batch)
        sink.complete()


def _write_s3fs(spec: StreamSpec, batches: Iterator[Any]) -> None:
    import pyarrow.parquet as pq

    from lakegate_client import Client
    from lakegate_client.refresh import s3fs_filesystem

    with Client(warehouse=spec.warehouse) as client:
        fs = s3fs_filesystem(  # aiobotocore refreshable credentials fed by the gateway
            client, spec.namespace, spec.table, access="write", region=spec.region,
            endpoint=spec.endpoint,
        )
        bucket, prefix = _path(spec.location)
        with fs.open(f"{bucket}/{prefix}/part-00000.parquet", "wb", block_size=_MIN_PART) as out, \
                pq.ParquetWriter(out, _schema()) as writer:
            for batch in batches:
                writer.write_batch(batch)


def _write_delta(spec: StreamSpec, cc: ContainerCredentials, batches: Iterator[Any]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    token_file = cc.token_file()
    try:
        reader = pa.RecordBatchReader.from_batches(_schema(), batches)
        with cc.environment():  # delta-rs builds its AWS credential chain from these too
                write_deltalake(spec.location, reader, mode="overwrite", target_file_size=1 << 40,
                            storage_options=cc.delta_storage_options(token_file))
    finally:
        os.unlink(token_file)


def _write_lance(spec: StreamSpec, cc: ContainerCredentials, batches: Iterator[Any]) -> None:
    import lance
    import pyarrow as pa

    token_file = cc.token_file()
    try:
        reader = pa.RecordBatchReader.from_batches(_schema(), batches)
        with cc.environment():  # Lance's AWS credential chain (aws-config) reads these
            lance.write_dataset(reader, spec.location, schema=_schema(), mode="overwrite",
                                max_rows_per_file=10**9,  # one data file (1 << 40 splits per batch)
                                storage_options=cc.lance_storage_options(token_file))
    finally:
        os.unlink(token_file)


def _write_static(spec: StreamSpec, batches: Iterator[Any]) -> None:
    """Baseline: one vended credential's static keys, which nothing refreshes."""
    import pyarrow as pa

    from lakegate_client import Client

    with Client(warehouse=spec.warehouse) as client:
        creds = client.credentials(spec.namespace, spec.table, access="write")
    if spec.format == "parquet":
        import pyarrow.parquet as pq

        bucket, prefix = _path(spec.location)
        with creds.pyarrow_filesystem().open_output_stream(
            f"{bucket}/{prefix}/part-00000.parquet"
        ) as out, pq.ParquetWriter(out, _schema()) as writer:
            for batch in batches:
                writer.write_batch(batch)
        return
    reader = pa.RecordBatchReader.from_batches(_schema(), batches)
    if spec.format == "delta":
        from deltalake import write_deltalake

        write_deltalake(spec.location, reader, mode="overwrite", target_file_size=1 << 40,
                        storage_options=creds.delta_storage_options())
        return
    import lance

    lance.write_dataset(reader, spec.location, schema=_schema(), mode="overwrite",
                        max_rows_per_file=10**9, storage_options=creds.lance_storage_options())


def run_stream(spec: StreamSpec) -> dict[str, Any]:
    """The Spark task: stream one object past the first credential's expiry."""
    from lakegate_client.refresh import container_credentials

    os.environ.setdefault("LANCE_LOG", "error")
    started = time.time()
    cc = container_credentials(spec.namespace, spec.table, access="write",
                               warehouse=spec.warehouse, region=spec.region,
                               endpoint=spec.endpoint)
    first_expiry, lifetime = _first_credential(cc)
    deadline = started + spec.stream_s if spec.stream_s > 0 else first_expiry + spec.margin_s
    deadline = min(deadline, started + spec.max_s)
    counter = [0, 0]
    batches = _batches(spec, deadline, counter)
    writers: dict[str, Callable[[], None]] = {
        "pyarrow": lambda: _write_pyarrow(spec, cc, batches),
        "boto3": lambda: _write_boto3(spec, batches),
        "s3fs": lambda: _write_s3fs(spec, batches),
        "deltalake": lambda: _write_delta(spec, cc, batches),
        "lance": lambda: _write_lance(spec, cc, batches),
    }
    error = ""
    try:
        if spec.engine.endswith("-static"):
            _write_static(spec, batches)
        else:
            writers[spec.engine]()
    except Exception as exc:
        if spec.raise_errors:
            raise  # fails the Spark task (the driver counts it)
        error = f"{type(exc).__name__}: {str(exc)[:1500]}"
    result = StreamResult(spec.engine, spec.format, os.environ.get("LAKEGATE_URL", ""), started,
                          time.time(), first_expiry, lifetime, counter[1], counter[0], error)
    return result.to_json()
