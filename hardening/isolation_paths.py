"""Isolation probes for issue #35 finding 1: generated raw paths on every forwarded route.

paula may read tables named `*_public` in team_a (PAULA_RULE). Each probe asks for alice's
`secret_a` spelt with a suffix the rule matches and a character that a URL, the upstream URL
library or the catalog read differently (`secret_a#_public`, `%23`, a full-width `#`, `%3F`,
`%2F`, dot segments, `%00`...), sent byte for byte (an HTTP library would strip a `#`), on every
forwarded and cached table route. Before the fix the gateway decided on `secret_a#_public` and
forwarded the raw path, which the URL library cut at the `#`: the catalog answered for
`secret_a`. A probe leaks when it is answered 2xx, 5xx or with a secret vended for `secret_a`.
The same property is proved on every route with hypothesis against a recording fake catalog in
tests/unit/surfaces/test_forwarded_paths.py.
"""

from __future__ import annotations

import random
import socket
from typing import Any
from urllib.parse import urlsplit

PAULA_RULE = {"warehouse": "*", "namespace": "team_a", "table": "*_public", "access": ["read"]}
# Characters and sequences that cut, fold or re-route a path somewhere between the gateway, the
# URL library and the catalog.
TRICKS = ("#", "%23", "%EF%BC%83", "%3F", "%3f", "%2F", "%2f", "%00", "%1F", "%25", "%2E%2E",
          "/..", "/.", "%2F..%2F", "#/../", ";", "%0A", "\\", "%5C")
ROUTES = (
    ("GET", "/lakekeeper/v1/{wh}/namespaces/{ns}/generic-tables/{t}", "client-managed"),
    ("GET", "/lakekeeper/v1/{wh}/namespaces/{ns}/generic-tables/{t}", "vended-credentials"),
    ("GET", "/lakekeeper/v1/{wh}/namespaces/{ns}/generic-tables/{t}/credentials", None),
    ("HEAD", "/catalog/v1/{wh}/namespaces/{ns}/tables/{t}", None),
    ("GET", "/catalog/v1/{wh}/namespaces/{ns}/tables/{t}", "client-managed"),
    ("GET", "/catalog/v1/{wh}/namespaces/{ns}/tables/{t}", "vended-credentials"),
    ("GET", "/catalog/v1/{wh}/namespaces/{ns}/tables/{t}/credentials", None),
    ("DELETE", "/catalog/v1/{wh}/namespaces/{ns}/tables/{t}", None),
    ("POST", "/catalog/v1/{wh}/namespaces/{ns}/tables/{t}", None),
)
GENERATED = 24  # seeded random spellings on top of the fixed ones, per route


def hostile_names(table: str, seed: int = 35) -> list[str]:
    """Raw `{table}` segments naming `table` with a `_public` suffix and a trick between."""
    names = [f"{table}{trick}_public" for trick in TRICKS]
    rng = random.Random(seed)  # noqa: S311 - probe variety, not cryptography
    for _ in range(GENERATED):
        names.append(table + "".join(rng.choice(TRICKS) for _ in range(rng.randint(1, 3)))
                     + rng.choice(("_public", "x_public", "%5Fpublic")))
    return names


def raw_http(base_url: str, method: str, target: str, token: str | None,
             headers: dict[str, str] | None = None, timeout_s: float = 15.0) -> tuple[int, str]:
    """One HTTP/1.1 request whose target is sent exactly as given; (status, body)."""
    url = urlsplit(base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
             "X-Lakegate-Request: 1"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    body = b'{"requirements": [], "updates": []}' if method == "POST" else b""
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0,
            rest.decode(errors="replace"))


def path_probes(prober: Any, tokens: dict[str, str], wh: str, target: Any) -> None:
    """paula, allowed `*_public`, asks for `target` (alice's) under hostile spellings."""
    base = prober.eps.http_url
    for method, template, delegation in ROUTES:
        headers = {"X-Iceberg-Access-Delegation": delegation} if delegation else None
        for name in hostile_names(target.table):
            path = template.format(wh=wh, ns=target.namespace, t=name)
            prober.expect_denied(
                f"rest:raw_path {method} {template.split('/{t}')[-1] or 'table'} {name!r}",
                lambda tok, p=path, m=method, h=headers: raw_http(base, m, p, tok, h),
                tokens["paula"], "paula", target)
