"""The node's S3 signer: Iceberg's `POST /catalog/v1/{prefix}/namespaces/{ns}/tables/{t}/sign`.

The route a signing load advertises (gateway/signing/config.py), answered with Iceberg's
`RemoteSignResult` (`uri`, `headers`). The body is parsed under the JSON limits and checked
(gateway/signing/request.py) before the caller policy is asked for the access the request needs
(a GET or HEAD needs read, anything else write) on the table the path names; only then does the
service sign (gateway/service/signing.py). The HTTP `Cache-Control` is `private` for GET/HEAD
(Iceberg Java caches those for 30 s), `no-cache` otherwise, never inside the JSON map.
"""

from __future__ import annotations

from aiohttp import web

from gateway.service.signing import SigningService
from gateway.signing.request import access_for, parse_sign_request
from gateway.surfaces.http_iceberg import iceberg_ref
from gateway.surfaces.http_lakekeeper import LakekeeperApi
from gateway.surfaces.http_pipeline import HttpDeps
from gateway.surfaces.http_routing import HttpCall, Route
from gateway.surfaces.render import json_response

SIGN_ROUTE = ("catalog", "v1", "{wh}", "namespaces", "{ns}", "tables", "{table}", "sign")


class SignerApi(LakekeeperApi):
    """The sign route (mounted only when the App built a SigningService)."""

    def __init__(self, deps: HttpDeps) -> None:
        super().__init__(deps)
        self._signing: SigningService | None = deps.signing

    def routes(self) -> list[Route]:
        if self._signing is None:
            return []
        return [self.route("POST", SIGN_ROUTE, self.sign, "credential")]

    async def sign(self, call: HttpCall) -> web.StreamResponse:
        assert self._signing is not None  # routes() mounts this only with a service
        ref = iceberg_ref(call)
        req = parse_sign_request(await self._body(call))
        await self._authorize(call, ref, access_for(req))
        signed = await self._signing.sign(ref, req, call.ctx)
        call.tally.served("miss" if signed.mode == "forwarded" else "hit")
        cache = "private" if signed.cacheable else "no-cache"
        return json_response({"uri": signed.uri, "headers": signed.headers},
                             headers={"Cache-Control": cache})
