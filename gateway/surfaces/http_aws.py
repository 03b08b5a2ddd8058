"""The AWS container-credentials endpoint, one URL per table (docs/contracts.md §4).

Unmodified AWS SDKs (botocore, pyarrow's C++ SDK) read `AWS_CONTAINER_CREDENTIALS_FULL_URI` and
send `AWS_CONTAINER_AUTHORIZATION_TOKEN` as the raw Authorization header, then refresh by
themselves before `Expiration`. botocore only accepts plain-http URIs on loopback hosts.
In caller mode `none` the token may be any value: it only serves as the anti-SSRF marker.
"""

from __future__ import annotations

from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any

from gateway.errors import ProtocolViolationError
from gateway.models import AccessMode, CredentialLookup, TableRef
from gateway.surfaces.bytes_response import BytesResponse
from gateway.surfaces.http_codec import call_target
from gateway.surfaces.http_pipeline import HttpApi
from gateway.surfaces.http_routing import HttpCall, Match, Route
from gateway.surfaces.render import NO_STORE, RenderedBody, dumps
from gateway.tuning import AWS_SDK_MIN_LEFT_S

_KEYS = ("s3.access-key-id", "s3.secret-access-key", "s3.session-token")


def aws_doc(lookup: CredentialLookup) -> dict[str, Any]:
    """The container-credentials JSON for the S3 credential covering the table's location.

    Raises:
        ProtocolViolationError: the catalog vended no S3 session credential for the table.
    """
    creds = lookup.credentials
    best = None
    for cred in creds.credentials:
        if all(k in cred.config for k in _KEYS) and creds.location.startswith(
            cred.prefix.rstrip("/")
        ):
            if best is None or len(cred.prefix) > len(best.prefix):
                best = cred
    if best is None:
        best = next((c for c in creds.credentials if all(k in c.config for k in _KEYS)), None)
    expires_at_ms = best.expires_at_ms if best is not None else None
    expires_at_ms = expires_at_ms or creds.expires_at_ms
    if best is None or expires_at_ms is None:
        raise ProtocolViolationError("the catalog vended no expiring S3 credential for this table")
    expiration = datetime.fromtimestamp(expires_at_ms / 1000.0, UTC)
    return {
        "AccessKeyId": best.config["s3.access-key-id"],
        "SecretAccessKey": best.config["s3.secret-access-key"],
        "Token": best.config["s3.session-token"],
        "Expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def aws_body(match: Match, lookup: CredentialLookup) -> bytes:
    """The `aws_doc` JSON bytes, rendered once per served credential set (the match's memo).

    The answer depends on the credential set only; a rotated credential is a new set object,
    so `fits` re-renders it at once. Raises like `aws_doc` (nothing is kept then).
    """
    body = match.body
    if body is None or not body.fits(lookup):
        body = match.body = RenderedBody(lookup, dumps(aws_doc(lookup)))
    return body.render(lookup)


class AwsApi(HttpApi):
    """`GET /v1/aws-credentials/{wh}/{ns}/{table}?access=read`."""

    def routes(self) -> list[Route]:
        return [Route("GET", ("v1", "aws-credentials", "{wh}", "{ns}", "{table}"), self.get,
                      "aws", "credential")]

    def get(self, call: HttpCall) -> BytesResponse | Coroutine[Any, Any, BytesResponse]:
        """A confirmed cache hit with more than botocore's advisory window left, for a caller
        the policy allowed, is answered at once (no coroutine); everything else by `_get`."""
        # Same {wh}/{ns}/{table} captures and ?access= as the native credential route.
        ref, access = call_target(call)
        if not self._gate.authorize_now(call.caller, call.ctx, ref.scope, access):
            return self._get(call, ref, access, authorized=False)
        lookup = self._ops.credentials_now(ref, access, call.ctx, min_left_s=AWS_SDK_MIN_LEFT_S)
        if lookup is None:
            return self._get(call, ref, access, authorized=True)
        return self._answer(call, lookup)

    async def _get(self, call: HttpCall, ref: TableRef, access: AccessMode, *,
                   authorized: bool) -> BytesResponse:
        if not authorized:
            await self._authorize(call, ref, access)
        # More than botocore's advisory window left, so an SDK refreshes once (tuning.py).
        lookup = ((None if authorized else self._ops.credentials_now(
                      ref, access, call.ctx, min_left_s=AWS_SDK_MIN_LEFT_S))
                  or await self._ops.get_credentials(ref, access, call.ctx,
                                                     min_left_s=AWS_SDK_MIN_LEFT_S))
        return self._answer(call, lookup)

    def _answer(self, call: HttpCall, lookup: CredentialLookup) -> BytesResponse:
        body = aws_body(call.match, lookup)
        call.tally.served(lookup.outcome, lookup.remaining_s)
        return BytesResponse(body, self._d.date, NO_STORE)
