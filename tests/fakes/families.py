"""A vended credential's config as Lakekeeper shapes it for each storage family.

Only the family's OWN expiry key is set (no `expiration-time`), so a test proves the gateway
reads `adls.sas-token-expires-at-ms.<account>.<host>` and `gcs.oauth2.token-expires-at` the
way it reads `s3.session-token-expires-at-ms`.
"""

from __future__ import annotations

FAMILIES = ("s3", "adls", "gcs")
ADLS_SUFFIX = "devstoreaccount1.dfs.core.windows.net"


def vended(family: str, table: str, n: int, expires_ms: int | None) -> tuple[str, dict[str, str]]:
    """(prefix, config) of credential number `n` for `table`."""
    if family == "adls":
        prefix = f"abfss://fs@{ADLS_SUFFIX}/lake/{table}"
        config = {f"adls.sas-token.{ADLS_SUFFIX}": f"sv=2022-11-02&sig=s{n}"}
        expiry_key = f"adls.sas-token-expires-at-ms.{ADLS_SUFFIX}"
    elif family == "gcs":
        prefix = f"gs://b/lake/{table}"
        config = {"gcs.oauth2.token": f"ya29.tok{n}", "gcs.project-id": "p"}
        expiry_key = "gcs.oauth2.token-expires-at"
    else:
        prefix = f"s3://b/{table}"
        config = {"s3.access-key-id": f"AK{n}", "s3.secret-access-key": "x",
                  "s3.session-token": f"tok{n}"}
        expiry_key = "s3.session-token-expires-at-ms"
    if expires_ms is not None:
        config[expiry_key] = str(expires_ms)
    return prefix, config
