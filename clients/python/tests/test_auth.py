"""CallerAuth: the anti-forgery header always, the bearer token when configured, file rotation."""

from __future__ import annotations

import os
from pathlib import Path

from lakegate_client import ClientConfig
from lakegate_client._auth import CallerAuth


def test_without_a_token_only_the_anti_forgery_header_is_sent() -> None:
    auth = CallerAuth(ClientConfig.resolve(environ={}))
    assert auth.headers() == {"X-Lakegate-Request": "1"}
    assert auth.metadata() == (("x-lakegate-request", "1"),)


def test_a_token_is_sent_as_bearer_beside_the_anti_forgery_header() -> None:
    auth = CallerAuth(ClientConfig.resolve(token="tok", environ={}))  # noqa: S106
    assert auth.headers() == {"X-Lakegate-Request": "1", "Authorization": "Bearer tok"}
    assert auth.metadata() == (("x-lakegate-request", "1"), ("authorization", "Bearer tok"))


def test_a_rotated_token_file_is_picked_up_on_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    auth = CallerAuth(ClientConfig.resolve(environ={"LAKEGATE_TOKEN_FILE": str(path)}))
    assert auth.token() == "first"
    # The kubelet writes a new file and swaps it in; a different inode/size/mtime means re-read.
    replacement = tmp_path / "token.new"
    replacement.write_text("second-token\n")
    os.replace(replacement, path)
    assert auth.token() == "second-token"
    assert auth.headers()["Authorization"] == "Bearer second-token"


def test_a_missing_token_file_mid_rotation_keeps_the_last_good_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first")
    auth = CallerAuth(ClientConfig.resolve(environ={"LAKEGATE_TOKEN_FILE": str(path)}))
    assert auth.token() == "first"
    path.unlink()
    assert auth.token() == "first"


def test_an_explicit_token_wins_over_the_token_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("from-file")
    env = {"LAKEGATE_TOKEN_FILE": str(path), "LAKEGATE_TOKEN": "from-env"}
    assert CallerAuth(ClientConfig.resolve(environ=env)).token() == "from-env"
