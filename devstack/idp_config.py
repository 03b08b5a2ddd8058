"""Configuration of the stack's IdP (deploy/devstack/idp/server.mjs): key, clients, argv.

The RSA signing key is generated once per run directory and reused, so tokens stay valid across
an IdP restart for the stack's whole life.
"""

from __future__ import annotations

import json
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "urn:lakekeeper"
SCOPE = "lakekeeper catalog sts"
CLIENT_NAMES = ("gateway", "alice", "bob", "direct", "admin")
IDP_DIR = Path(__file__).resolve().parent / "idp"


@dataclass(frozen=True)
class IdpClient:
    """One registered OAuth2 client (the secret is never logged)."""

    client_id: str
    client_secret: str

    def __repr__(self) -> str:
        return f"IdpClient(client_id={self.client_id!r}, client_secret=***)"


def load_or_create_key(path: Path) -> dict[str, str]:
    """The stack's private RSA JWK (kid, alg RS256, use sig), created on first use."""
    if path.exists():
        data: dict[str, str] = json.loads(path.read_text())
        return data
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, str] = json.loads(RSAAlgorithm.to_jwk(key))
    jwk.update({"kid": "devstack-" + secrets.token_hex(4), "alg": "RS256", "use": "sig"})
    path.write_text(json.dumps(jwk))
    path.chmod(0o600)
    return jwk


def make_clients(names: tuple[str, ...] = CLIENT_NAMES) -> dict[str, IdpClient]:
    """One client per name with a random secret."""
    return {n: IdpClient(client_id=n, client_secret=secrets.token_urlsafe(24)) for n in names}


def write_config(
    path: Path,
    *,
    port: int,
    token_ttl_s: int,
    clients: dict[str, IdpClient],
    jwk: dict[str, str],
) -> str:
    """Write the server's JSON config (mode 0600); returns the issuer URL."""
    issuer = f"http://127.0.0.1:{port}"
    cfg = {
        "port": port,
        "issuer": issuer,
        "token_ttl_s": token_ttl_s,
        "audience": AUDIENCE,
        "scope": SCOPE,
        "clients": [
            {"client_id": c.client_id, "client_secret": c.client_secret} for c in clients.values()
        ],
        "jwk": jwk,
    }
    path.write_text(json.dumps(cfg))
    path.chmod(0o600)
    return issuer


def node_argv(config_path: Path) -> list[str]:
    """argv for the IdP; fails early if npm dependencies are missing."""
    node = shutil.which("node")
    if node is None:
        raise FileNotFoundError("node not found (Node 20 is required for the local IdP)")
    if not (IDP_DIR / "node_modules" / "oidc-provider").exists():
        raise FileNotFoundError(f"run `npm ci` in {IDP_DIR} (make venv does)")
    return [node, str(IDP_DIR / "server.mjs"), str(config_path)]
