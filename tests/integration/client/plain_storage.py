"""How another engine sees a table's storage: the storage owner's keys, no session policy.

Why: "any engine can read it" is checked with a *default* ``pyarrow.dataset.dataset(location)``,
which HEADs the bare location first; a vended credential may not do that, an engine with its own
access can.
"""

from __future__ import annotations

import pyarrow.dataset as pads
import pyarrow.fs as pafs

from devstack.stack_info import StackInfo


def owner_filesystem(info: StackInfo) -> pafs.S3FileSystem:
    """SeaweedFS with the local stack's admin keys."""
    s3 = info.s3
    scheme, _, host = s3.endpoint.partition("://")
    return pafs.S3FileSystem(
        access_key=s3.admin_access_key,
        secret_key=s3.admin_secret_key,
        endpoint_override=host,
        scheme=scheme,
        region=s3.region,
        force_virtual_addressing=False,
    )


def plain_listing_ids(fs: pafs.FileSystem, location: str) -> list[int]:
    """The sorted ``id`` column of a default parquet dataset over ``location``."""
    root = location.split("://", 1)[1].rstrip("/")
    dataset = pads.dataset(root, filesystem=fs, format="parquet")
    return sorted(dataset.to_table().column("id").to_pylist())
