"""The client's GCS store (engine/stores/gcs.py) on the real fake-gcs-server behind the stack's
token-checking layer: what the write protocols rely on, proven there (markers with
`ifGenerationMatch`, staging hidden until the completion composes it, idempotent completion,
abandon, the conditional-writes probe)."""

from __future__ import annotations

import uuid

import pytest

from lakegate_client.engine.conditional_writes import ConditionalWriteProbe
from lakegate_client.engine.staged import PART_BYTES, StagedWriter
from lakegate_client.engine.stores.base import PendingUpload
from lakegate_client.engine.stores.gcs import GcsStore, GcsStoreError
from lakegate_client.tables.directory import is_visible
from tests.integration import local_gcs as _local
from tests.integration.local_gcs import LocalGcs

pytestmark = pytest.mark.integration
local_gcs = _local.local_gcs  # the fixture


@pytest.fixture
def prefix() -> str:
    return f"t/{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(local_gcs: LocalGcs, prefix: str) -> GcsStore:
    return GcsStore(local_gcs.guard, local_gcs.bucket, local_gcs.token(prefix))


def _visible(store: GcsStore, prefix: str) -> list[str]:
    return sorted(k for k in store.list(prefix + "/") if is_visible(k[len(prefix) + 1 :]))


def test_conditional_puts_and_generations(store: GcsStore, prefix: str) -> None:
    key = f"{prefix}/_lakegate_marker.json"
    first = store.put_if(key, b"one", None)
    assert first is not None
    assert store.put_if(key, b"two", None) is None  # only if absent
    assert store.get(key) == (b"one", first)
    assert store.head(key) == first
    assert store.list(prefix + "/") == {key: first}
    second = store.put_if(key, b"three", first)  # only if unchanged
    assert second not in (None, first)
    assert store.put_if(key, b"four", first) is None  # stale
    assert store.put_if(f"{prefix}/absent", b"x", second) is None  # If-Match on a missing key
    assert store.get(key) == (b"three", second)
    store.delete(key)
    store.delete(key)  # idempotent
    assert store.get(key) is None
    assert store.head(key) is None


def test_a_staged_file_is_hidden_until_completed(store: GcsStore, prefix: str) -> None:
    key = f"{prefix}/part-w1-00000-a.parquet"
    data = b"x" * (2 * PART_BYTES + 5)  # three parts
    writer = StagedWriter(store, store.bucket, key)
    writer.write(data)
    upload = writer.finish()
    assert len(upload.parts) == 3
    assert _visible(store, prefix) == []  # readers skip the `_lakegate_staging` parts
    assert store.head(key) is None
    assert list(store.pending_staged(prefix + "/")) == [(key, upload.upload_id)]
    store.complete_staged(upload)
    assert _visible(store, prefix) == [key]
    assert store.get(key) is not None
    assert store.get(key)[0] == data  # type: ignore[index]
    assert list(store.pending_staged(prefix + "/")) == []  # the parts are gone
    store.complete_staged(upload)  # again (a lost answer, a recoverer): already done is fine
    assert store.get(key)[0] == data  # type: ignore[index]


def test_an_abandoned_upload_cannot_be_completed_and_leaves_nothing(store, prefix) -> None:
    key = f"{prefix}/part-w1-00001-b.parquet"
    upload_id = store.start_staged(key)
    tag = store.stage_part(key, upload_id, 1, b"data")
    assert store.abandon_staged(key, upload_id) is True
    assert store.abandon_staged(key, upload_id) is False
    with pytest.raises(GcsStoreError):
        store.complete_staged(PendingUpload(key, upload_id, ((1, tag),), 4))
    assert store.list(prefix + "/") == {}


def test_abandon_never_touches_a_completed_file(store: GcsStore, prefix: str) -> None:
    key = f"{prefix}/part-w1-00002-c.parquet"
    upload_id = store.start_staged(key)
    upload = PendingUpload(key, upload_id, ((1, store.stage_part(key, upload_id, 1, b"d")),), 1)
    store.complete_staged(upload)
    assert store.abandon_staged(key, upload_id) is False
    assert store.get(key) is not None


def test_the_conditional_writes_probe_passes_on_the_stand_in(store, prefix) -> None:
    probe = ConditionalWriteProbe()
    probe.ensure(store, store.bucket, prefix)  # raises UnsafeStoreError on a store that ignores
    assert store.list(prefix + "/") == {}  # the probe cleaned up after itself


def test_a_read_token_cannot_write(local_gcs: LocalGcs, prefix: str) -> None:
    reader = GcsStore(local_gcs.guard, local_gcs.bucket, local_gcs.token(prefix, "read"))
    with pytest.raises(GcsStoreError) as info:
        reader.put_if(f"{prefix}/x", b"x", None)
    assert info.value.status == 403
    assert "ya29" not in str(info.value)
