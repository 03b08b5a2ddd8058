"""lakegate_client's credentials for an Iceberg table: the same shapes as for a generic table."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.fs
import pytest
from pyiceberg.catalog.rest import RestCatalog

from lakegate_client import Client, NotFoundError
from tests.integration.client.test_client_gateway import FORMS, gateway_urls

pytestmark = pytest.mark.integration

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})


@pytest.fixture(scope="module")
def iceberg_table(devstack: Any) -> Any:
    """An Iceberg table with one append, created through the gateway by pyiceberg."""
    info = devstack.info
    rest = RestCatalog(
        "gateway", uri=info.gateway_url + "/catalog",
        warehouse=info.warehouse.name,
        **{"header.X-Lakegate-Request": "1",
           "header.X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    ident = (info.namespace, f"icl_{uuid.uuid4().hex[:8]}")
    table = rest.create_table(ident, schema=ROWS.schema)
    table.append(ROWS)
    yield rest.load_table(ident)
    rest.drop_table(ident)


@pytest.mark.parametrize("form", FORMS)
def test_iceberg_credentials_have_the_generic_shape_and_read_the_table(
    form: str, devstack: Any, iceberg_table: Any
) -> None:
    url = gateway_urls(devstack.info)[form]
    ns, name = iceberg_table.name()
    with Client(url, warehouse=devstack.info.warehouse.name, timeout_s=20) as client:
        creds = client.credentials(ns, name, kind="iceberg")
        assert creds.location.rstrip("/") == iceberg_table.location().rstrip("/")
        assert creds.storage == "s3"
        assert creds.access == "read"
        assert creds.remaining_s is not None
        assert creds.remaining_s > 300
        assert creds.warehouse_id == devstack.info.warehouse.id
        assert client.credentials(ns, name, kind="iceberg").outcome == "memo"
        # the read credential opens the table's current metadata file
        fs = creds.pyarrow_filesystem()
        path = iceberg_table.metadata_location.removeprefix("s3://")
        assert fs.get_file_info(path).type == pyarrow.fs.FileType.File
        # without kind the same name is looked up as a generic table, which it is not
        with pytest.raises(NotFoundError):
            client.credentials(ns, name, access="write")
