"""Remote signing for boto3: every S3 request signed by the node's gateway, no key here.

The gateway serves Iceberg's signer API for a table (`POST .../tables/{table}/sign`, the
`signer.uri` + `signer.endpoint` of a load made with `X-Iceberg-Access-Delegation:
remote-signing`). `RemoteSigner` is a botocore `before-sign.s3` handler that sends the request's
method, URI, region and headers there and puts the answer's headers on the request; the client
itself is built with `signature_version=UNSIGNED`, so it holds no credential at all and a
signer that does not answer fails the request instead of sending it unsigned.

Which libraries can sign this way: boto3 / botocore (this module) and everything built on
them that exposes its client or session events: s3fs / aiobotocore (register the handler on the
session, not on `fs.s3`, with s3fs >= 2026.2.0), and pyiceberg's `FsspecFileIO` (its own
`S3V4RestSigner`). Those that sign natively with no hook cannot: pyarrow's S3FileSystem, Lance,
deltalake (object_store), DuckDB httpfs; they keep using vended credentials
(`TableCredentials`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import httpx

from lakegate_client._errors import LakegateError

_HANDLER_ID = "lakegate-remote-signer"


class SigningError(LakegateError):
    """The node's signer refused or could not sign a request (nothing was sent to the store)."""


class RemoteSigner:
    """A botocore `before-sign.s3` handler asking a REST signer (the node's gateway).

    Args:
        signer_url: the full sign URL (`signer.uri` joined with `signer.endpoint`).
        headers: sent with every sign request (the gateway's caller token, its request mark).
        timeout_s: per sign request.
    """

    def __init__(self, signer_url: str, *, headers: Mapping[str, str] | None = None,
                 timeout_s: float = 10.0) -> None:
        self._url = signer_url
        self._headers = dict(headers or {})
        self._timeout_s = timeout_s
        self._local = threading.local()  # one HTTP client per thread (boto3 is threaded)
        self.signed = 0

    @classmethod
    def from_config(cls, config: Mapping[str, str], **kwargs: Any) -> RemoteSigner:
        """From a signing load's `config` (`signer.*`, else `s3.signer.*`)."""
        base = config.get("signer.uri") or config.get("s3.signer.uri")
        endpoint = config.get("signer.endpoint") or config.get("s3.signer.endpoint")
        if not base or not endpoint:
            raise SigningError("the load config names no signer (ask for remote-signing)")
        return cls(f"{base.rstrip('/')}/{endpoint.strip().lstrip('/')}", **kwargs)

    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = httpx.Client(timeout=self._timeout_s, trust_env=False)
        return client

    def __call__(self, request: Any, **_: Any) -> None:
        body: dict[str, Any] = {
            "method": request.method,
            "region": request.context["client_region"],
            "uri": request.url,
            "headers": {k: [str(v)] for k, v in request.headers.items()},
        }
        if request.method == "POST" and "?delete" in request.url and request.body:
            raw = request.body if isinstance(request.body, bytes) else request.body.read()
            body["body"] = raw.decode() if isinstance(raw, bytes) else str(raw)
            if hasattr(request.body, "seek"):
                request.body.seek(0)
        try:
            resp = self._client().post(self._url, json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise SigningError(f"the signer could not be reached: {type(exc).__name__}") from exc
        if resp.status_code != 200:
            raise SigningError(f"the signer refused the request: HTTP {resp.status_code} "
                               f"{resp.text[:200]}")
        doc = resp.json()
        for name, values in doc["headers"].items():
            if name in request.headers:
                del request.headers[name]
            request.headers[name] = ", ".join(values)
        request.url = doc["uri"]
        self.signed += 1

    def attach(self, client: Any) -> Any:
        """Register on a botocore client (built with `signature_version=UNSIGNED`)."""
        client.meta.events.register_last("before-sign.s3", self, unique_id=_HANDLER_ID)
        return client


def signing_s3_client(signer: RemoteSigner, *, region: str, endpoint_url: str | None = None,
                      path_style: bool = False) -> Any:
    """A boto3 S3 client with no credentials whose every request the gateway signs."""
    import boto3  # the [s3] extra
    from botocore import UNSIGNED
    from botocore.config import Config

    config = Config(signature_version=UNSIGNED,
                    s3={"addressing_style": "path" if path_style else "virtual"},
                    # no aws-chunked trailer bodies: a remote signer cannot sign chunks
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required")
    client = boto3.session.Session().client("s3", region_name=region, endpoint_url=endpoint_url,
                                            config=config)
    return signer.attach(client)
