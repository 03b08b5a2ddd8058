"""Settings from a secrets directory (a mounted Kubernetes Secret): one file per setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gateway.settings import Settings, SettingsError

CLIENT = {
    "LAKEGATE__UPSTREAM__URL": "http://catalog.test",
    "LAKEGATE__TOKEN__TOKEN_URL": "http://idp.test/token",
    "LAKEGATE__TOKEN__CLIENT_ID": "lakegate",
}
SECRET = "mounted-client-secret-0123456789"  # noqa: S105 (a test value)


def _secret_volume(tmp_path: Path, files: dict[str, str]) -> Path:
    """A directory laid out as the kubelet mounts a Secret: `..data/<key>` plus a symlink."""
    volume = tmp_path / "upstream"
    data = volume / "..data"
    data.mkdir(parents=True)
    for name, value in files.items():
        (data / name).write_text(value + "\n")
        os.symlink(f"..data/{name}", volume / name)
    return volume


def test_client_secret_comes_from_a_file_in_the_secrets_dir(tmp_path: Path) -> None:
    volume = _secret_volume(tmp_path, {"LAKEGATE__TOKEN__CLIENT_SECRET": SECRET})
    settings = Settings.load(environ=CLIENT | {"LAKEGATE_SECRETS_DIR": str(volume)})
    assert settings.token.client_secret is not None
    assert settings.token.client_secret.get_secret_value() == SECRET  # trailing newline stripped
    assert SECRET in settings.secret_values()  # so the log redactor knows it


def test_secrets_dir_argument_names_are_case_insensitive(tmp_path: Path) -> None:
    volume = _secret_volume(tmp_path, {"lakegate__token__client_secret": SECRET})
    settings = Settings.load(environ=CLIENT, secrets_dir=volume)
    assert settings.token.client_secret is not None
    assert settings.token.client_secret.get_secret_value() == SECRET


def test_env_wins_over_the_secrets_dir_and_the_secrets_dir_over_the_file(tmp_path: Path) -> None:
    volume = _secret_volume(tmp_path, {"LAKEGATE__TOKEN__CLIENT_SECRET": SECRET,
                                       "LAKEGATE__TOKEN__SCOPE": "from-secrets"})
    config = tmp_path / "lakegate.yaml"
    config.write_text("token:\n  scope: from-file\n  audience: from-file\n")
    env = CLIENT | {"LAKEGATE_SECRETS_DIR": str(volume), "LAKEGATE__TOKEN__CLIENT_SECRET": "env"}
    settings = Settings.load(config, environ=env)
    assert settings.token.client_secret is not None
    assert settings.token.client_secret.get_secret_value() == "env"
    assert settings.token.scope == "from-secrets"
    assert settings.token.audience == "from-file"


def test_missing_secrets_dir_is_a_settings_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"LAKEGATE_SECRETS_DIR=.*absent"):
        Settings.load(environ=CLIENT | {"LAKEGATE_SECRETS_DIR": str(tmp_path / "absent")})


def test_without_the_secret_file_the_error_names_the_setting(tmp_path: Path) -> None:
    volume = _secret_volume(tmp_path, {"unrelated-key": "x"})
    with pytest.raises(SettingsError, match="LAKEGATE__TOKEN__CLIENT_SECRET"):
        Settings.load(environ=CLIENT | {"LAKEGATE_SECRETS_DIR": str(volume)})


def test_a_secret_from_the_dir_is_never_echoed_in_an_error(tmp_path: Path) -> None:
    volume = _secret_volume(tmp_path, {"LAKEGATE__TOKEN__CLIENT_SECRET": SECRET,
                                       "LAKEGATE__TOKEN__REFRESH_FRACTION": SECRET})
    with pytest.raises(SettingsError) as info:
        Settings.load(environ=CLIENT | {"LAKEGATE_SECRETS_DIR": str(volume)})
    assert "LAKEGATE__TOKEN__REFRESH_FRACTION" in str(info.value)
    assert SECRET not in str(info.value)
