import json

import jwt

from devstack import idp_config


def test_signing_key_is_created_once_and_reused(tmp_path):
    first = idp_config.load_or_create_key(tmp_path / "k.json")
    again = idp_config.load_or_create_key(tmp_path / "k.json")
    assert first == again
    assert first["alg"] == "RS256"
    assert (tmp_path / "k.json").stat().st_mode & 0o077 == 0
    token = jwt.encode({"sub": "x"}, jwt.PyJWK.from_dict(first).key, algorithm="RS256")
    public = {k: v for k, v in first.items() if k in ("kty", "n", "e", "kid")}
    assert jwt.decode(token, jwt.PyJWK.from_dict(public).key, algorithms=["RS256"])["sub"] == "x"


def test_config_registers_every_client_with_a_random_secret(tmp_path):
    clients = idp_config.make_clients()
    assert set(clients) >= {"gateway", "alice", "bob", "direct"}
    assert len({c.client_secret for c in clients.values()}) == len(clients)
    issuer = idp_config.write_config(
        tmp_path / "c.json", port=1234, token_ttl_s=60, clients=clients, jwk={"kty": "RSA"}
    )
    cfg = json.loads((tmp_path / "c.json").read_text())
    assert issuer == cfg["issuer"] == "http://127.0.0.1:1234"
    assert cfg["audience"] == "urn:lakekeeper"
    assert cfg["token_ttl_s"] == 60
    assert all(c.client_secret not in repr(c) for c in clients.values())
