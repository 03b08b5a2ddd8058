"""The Iceberg load `config`: raw credential keys of every storage family, never an expiry key."""

from __future__ import annotations

import pytest

from gateway.surfaces.http_iceberg import load_config
from gateway.surfaces.lakekeeper_compat import REFRESH_ENDPOINT_KEY

ADLS_LOCATION = "abfss://fs@acct.dfs.core.windows.net/lake/t1"
CASES = {
    "s3": ("s3://b/lake/t1", {"s3.access-key-id": "AK", "s3.session-token": "tok"},
           {"s3.session-token-expires-at-ms": "1800000000000"}),
    "adls": (ADLS_LOCATION, {"adls.sas-token.acct.dfs.core.windows.net": "sv=1&sig=x"},
             {"adls.sas-token-expires-at-ms.acct.dfs.core.windows.net": "1800000000000"}),
    "gcs": ("gs://b/lake/t1", {"gcs.oauth2.token": "ya29.x", "gcs.project-id": "p"},
            {"gcs.oauth2.token-expires-at": "1800000000000"}),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_load_config_keeps_raw_keys_and_drops_the_familys_expiry_keys(family: str) -> None:
    location, raw, expiry = CASES[family]
    creds = [{"prefix": location, "config": {
        **raw, **expiry, "expiration-time": "1800000000000", REFRESH_ENDPOINT_KEY: "http://x",
    }}]  # fmt: skip
    assert load_config({"region": "r"}, creds, location) == {"region": "r", **raw}
