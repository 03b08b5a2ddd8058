"""GCS: a vended downscoped OAuth2 access token → the option names each engine wants.

Not every library can take a raw token: deltalake has no raw-token key (:data:`DELTALAKE_REASON`),
and neither the stock Hadoop GCS connector nor boto3 can. Those adapters raise
:class:`UnsupportedStorageError` instead of returning options that silently fail.

Lakekeeper's GCS profile has no endpoint field: a local store (fake-gcs-server) is reached
through a client setting, the JSON API's base URL (``LAKEGATE_GCS_ENDPOINT`` or
``TableCredentials.with_storage_endpoint``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from lakegate_client._errors import UnsupportedStorageError

__all__ = ["DELTALAKE_REASON", "GcsSettings"]

DELTALAKE_REASON = (
    "deltalake (1.6.6 and earlier) bundles object_store 0.13, whose GCS store takes no OAuth "
    "bearer token: only a service account, a service-account key or application credentials "
    "(google_bearer_token arrived in object_store 0.14, apache/arrow-rs-object-store#717). "
    "Without one it would use this machine's own Google credentials, never the vended token"
)


@dataclass(frozen=True, repr=False)
class GcsSettings:
    """The GCS facts of one vended credential."""

    token: str = field(repr=False)
    project_id: str | None
    expires_at_ms: int | None
    endpoint: str | None = None

    def __repr__(self) -> str:
        return f"GcsSettings(project_id={self.project_id!r}, <redacted>)"

    @classmethod
    def from_config(
        cls, config: Mapping[str, str], expires_at_ms: int | None, endpoint: str | None = None
    ) -> GcsSettings:
        """Read ``gcs.oauth2.token`` and ``gcs.project-id``.

        Raises:
            UnsupportedStorageError: no token in the credential.
        """
        token = config.get("gcs.oauth2.token")
        if not token:
            raise UnsupportedStorageError(
                "the credential has no GCS OAuth2 token", type="NoVendedCredential"
            )
        return cls(
            token=token,
            project_id=config.get("gcs.project-id"),
            expires_at_ms=expires_at_ms,
            endpoint=endpoint.rstrip("/") if endpoint else None,
        )

    @property
    def is_http(self) -> bool:
        return self.endpoint is not None and self.endpoint.lower().startswith("http://")

    def lance(self) -> dict[str, str]:
        """Lance ``storage_options`` (Lance's own bearer-token key)."""
        options = {"google_storage_token": self.token}
        if self.endpoint:
            options["google_base_url"] = self.endpoint
            if self.is_http:
                options["allow_http"] = "true"
        if self.expires_at_ms:
            options["expires_at_millis"] = str(self.expires_at_ms)
        return options

    def fsspec(self) -> dict[str, Any]:
        """gcsfs keyword arguments: the token as a ``google.oauth2`` credentials object.

        Given a raw string, gcsfs asks Google's tokeninfo endpoint for its expiry and refuses a
        token with 300 s or less left, so every vended token broke in its last five minutes (and
        could not work at all off Google). The object carries no expiry on purpose: with one,
        gcsfs tries to refresh it in those same 300 s, which a vended token cannot do. The store
        enforces the real expiry; ask the client again for a fresh one per task.

        With a local endpoint use ``gcsfs.core.GCSFileSystem`` (or set
        ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` before importing gcsfs): the default
        ``gcsfs.GCSFileSystem`` first asks Google's storage-control API over gRPC/TLS for the
        bucket's layout, which no local store serves (a 60 s timeout per bucket).
        """
        from google.oauth2.credentials import Credentials  # optional: gcsfs brings google-auth

        kwargs: dict[str, Any] = {"token": Credentials(self.token)}  # type: ignore[no-untyped-call]
        if self.project_id:
            kwargs["project"] = self.project_id
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        return kwargs

    def pyarrow_kwargs(self) -> dict[str, Any]:
        """``pyarrow.fs.GcsFileSystem`` keyword arguments (it requires the expiry with a token)."""
        if not self.expires_at_ms:
            raise UnsupportedStorageError(
                "pyarrow GcsFileSystem needs the token's expiry, which the credential lacks"
            )
        kwargs: dict[str, Any] = {
            "access_token": self.token,
            "credential_token_expiration": datetime.fromtimestamp(
                self.expires_at_ms / 1000, tz=UTC
            ),
        }
        if self.project_id:
            kwargs["project_id"] = self.project_id
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            kwargs["endpoint_override"] = parts.netloc
            kwargs["scheme"] = parts.scheme or "https"
        return kwargs

    @staticmethod
    def unsupported(target: str) -> UnsupportedStorageError:
        """The error for an engine that cannot take a raw GCS access token."""
        if target == "deltalake":
            return UnsupportedStorageError(
                f"deltalake cannot use a vended GCS access token: {DELTALAKE_REASON}"
            )
        return UnsupportedStorageError(
            f"{target} cannot use a vended GCS access token (no raw-token option)"
        )
