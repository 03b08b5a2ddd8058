"""Small sync clients for the stack's test hooks (emulator `/_emulator/*`, IdP `/_idp/stats`)."""

from __future__ import annotations

from typing import Any

import httpx


class EmulatorHooks:
    """Read/reset the emulator's exact counters and set/clear its faults."""

    def __init__(self, catalog_url: str, timeout_s: float = 10.0) -> None:
        self.url = catalog_url.rstrip("/")
        self._timeout_s = timeout_s

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        resp = httpx.request(method, self.url + path, json=body, timeout=self._timeout_s)
        resp.raise_for_status()
        data: dict[str, Any] = resp.json()
        return data

    def stats(self) -> dict[str, int]:
        """Counters per operation (and `sts_assume_role`), exact since the last reset."""
        return {k: int(v) for k, v in self._call("GET", "/_emulator/stats").items()}

    def reset(self) -> None:
        self._call("POST", "/_emulator/stats/reset")

    def set_faults(self, **spec: Any) -> dict[str, Any]:
        """E.g. `set_faults(status=503, count=2, operations=["load_generic_table_credentials"])`."""
        return self._call("POST", "/_emulator/faults", spec)

    def clear_faults(self) -> None:
        self._call("POST", "/_emulator/faults", {"clear": True})

    def faults(self) -> dict[str, Any]:
        return self._call("GET", "/_emulator/faults")

    def clear_credential_cache(self) -> None:
        """Forget the emulator's server-side (Lakekeeper STC) credential cache."""
        self._call("POST", "/_emulator/stc/clear")


class IdpHooks:
    """Read/reset the IdP's token-request counter."""

    def __init__(self, issuer: str, timeout_s: float = 10.0) -> None:
        self.url = issuer.rstrip("/")
        self._timeout_s = timeout_s

    def token_requests(self) -> int:
        resp = httpx.get(self.url + "/_idp/stats", timeout=self._timeout_s)
        resp.raise_for_status()
        return int(resp.json()["token_requests"])

    def stats(self) -> dict[str, int]:
        return {"token_requests": self.token_requests()}

    def reset(self) -> None:
        httpx.post(self.url + "/_idp/stats/reset", timeout=self._timeout_s).raise_for_status()
