"""The newest Lance version from one page of manifest names (``engine/formats/lance_manifests.py``):
it is the version Lance itself opens, on each store's listing, and a name that is not a committed V2
manifest never counts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lakegate_client.engine.formats.lance_manifests import PAGE, U64_MAX, newest_version
from lakegate_client.engine.stores.base import ObjectStore, S3Location
from lakegate_client.engine.stores.s3 import S3Store

from ..stores.fake_adls import FakeAdls
from ..stores.fake_gcs import FakeGcs
from ..stores.fake_s3 import FakeS3

WHERE = S3Location("b", "wh/ds")
STORES: dict[str, Callable[[], ObjectStore]] = {
    "s3": lambda: S3Store(FakeS3(), "b"),
    "adls": FakeAdls,
    "gcs": FakeGcs,
}


def v2(version: int) -> str:
    return f"{U64_MAX - version:020}.manifest"


def manifests(store: ObjectStore, *names: str) -> ObjectStore:
    for name in names:
        store.put(WHERE.key(f"_versions/{name}"), b"")
    return store


@pytest.mark.parametrize("kind", STORES)
def test_the_newest_version_is_the_one_lance_opens(kind: str, tmp_path: Path) -> None:
    lance = pytest.importorskip("lance")
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"id": [1, 2]})
    lance.write_dataset(table, str(tmp_path))
    for _ in range(PAGE + 4):  # more versions than one page holds: the newest sorts first
        lance.write_dataset(table, str(tmp_path), mode="append")
    store = manifests(STORES[kind](), *(f.name for f in (tmp_path / "_versions").iterdir()))
    assert newest_version(store, WHERE) == lance.dataset(str(tmp_path)).version == PAGE + 5


@pytest.mark.parametrize("kind", STORES)
def test_detached_and_temporary_names_never_count(kind: str) -> None:
    detached = f"d{(1 << 63) | 9}.manifest"
    in_flight = f"{v2(4)}-1f0e.tmp"  # a commit's temporary name, before version 3's
    store = manifests(STORES[kind](), v2(1), v2(2), v2(3), detached, in_flight)
    assert newest_version(store, WHERE) == 3


@pytest.mark.parametrize("names", [
    (),
    ("1.manifest", "2.manifest", "10.manifest"),
    (*(f"{v2(99)}-{n:02d}.tmp" for n in range(PAGE)), v2(5)),  # version 5 is past the page
], ids=["no dataset", "v1 names", "a page of strays"])
def test_a_page_without_a_v2_manifest_answers_none(names: tuple[str, ...]) -> None:
    # the caller then opens the dataset (committer.lance_version)
    assert newest_version(manifests(S3Store(FakeS3(), "b"), *names), WHERE) is None
