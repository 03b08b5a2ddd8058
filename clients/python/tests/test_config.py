"""ClientConfig: URL forms, precedence of arguments over LAKEGATE_* variables, readable errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakegate_client import ClientConfig, ConfigurationError, parse_url


@pytest.mark.parametrize(
    ("url", "protocol", "uds", "host", "port"),
    [
        ("http://127.0.0.1:8765", "http", None, "127.0.0.1", 8765),
        ("HTTP://localhost:1", "http", None, "localhost", 1),
        ("unix:/run/lakegate/http.sock", "http", "/run/lakegate/http.sock", None, None),
        ("unix:///run/lakegate/http.sock", "http", "/run/lakegate/http.sock", None, None),
        ("grpc://127.0.0.1:8766", "grpc", None, "127.0.0.1", 8766),
        ("grpc+unix:/run/g.sock", "grpc", "/run/g.sock", None, None),
        ("grpc+unix:///run/g.sock", "grpc", "/run/g.sock", None, None),
        ("http://[::1]:9000", "http", None, "::1", 9000),
    ],
)
def test_url_forms_choose_protocol_and_socket(
    url: str, protocol: str, uds: str | None, host: str | None, port: int | None
) -> None:
    endpoint = parse_url(url)
    assert (endpoint.protocol, endpoint.uds, endpoint.host, endpoint.port) == (
        protocol,
        uds,
        host,
        port,
    )


def test_grpc_target_and_http_base_url_per_form() -> None:
    assert parse_url("grpc+unix:/s.sock").grpc_target == "unix:/s.sock"
    assert parse_url("grpc://127.0.0.1:1").grpc_target == "127.0.0.1:1"
    assert parse_url("grpc://[::1]:1").grpc_target == "[::1]:1"
    assert parse_url("unix:/s.sock").http_base_url == "http://localhost"
    assert parse_url("https://gw:443").http_base_url == "https://gw:443"


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://host:1", "use http://host:port"),
        ("grpc://host", "needs a port"),
        ("http://:80", "no host"),
        ("unix:", "no socket path"),
        ("http://user:pw@host:1", "must not carry credentials"),
        ("http://host:notaport", "invalid port"),
    ],
)
def test_bad_urls_are_rejected_with_a_reason(url: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        parse_url(url)


def test_environment_supplies_url_token_warehouse_and_timeout() -> None:
    env = {
        "LAKEGATE_URL": "grpc+unix:/x.sock",
        "LAKEGATE_TOKEN": "tok-123",
        "LAKEGATE_WAREHOUSE": "demo",
        "LAKEGATE_TIMEOUT_S": "2.5",
        "LAKEGATE_MEMO_FLOOR_S": "60",
    }
    config = ClientConfig.resolve(environ=env)
    assert config.endpoint.uds == "/x.sock"
    assert config.token == "tok-123"  # noqa: S105
    assert config.warehouse == "demo"
    assert config.timeout_s == 2.5
    assert config.memo_floor_s == 60


def test_arguments_win_over_environment() -> None:
    env = {"LAKEGATE_URL": "grpc://h:1", "LAKEGATE_TOKEN": "env", "LAKEGATE_WAREHOUSE": "env"}
    config = ClientConfig.resolve(
        "unix:/a.sock",
        token="arg",  # noqa: S106
        warehouse="arg",
        timeout_s=1,
        environ=env,
    )
    assert (config.endpoint.url, config.token, config.warehouse, config.timeout_s) == (
        "unix:/a.sock",
        "arg",
        "arg",
        1,
    )


def test_defaults_point_at_the_local_http_port() -> None:
    config = ClientConfig.resolve(environ={})
    assert config.endpoint.url == "http://127.0.0.1:8765"
    assert config.token is None
    assert config.warehouse is None
    assert config.timeout_s == 10
    assert config.memo_floor_s == 300


def test_token_file_is_read_when_no_token_is_given(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("file-token\n")
    assert ClientConfig.resolve(environ={"LAKEGATE_TOKEN_FILE": str(path)}).token == "file-token"  # noqa: S105


def test_unreadable_token_file_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="LAKEGATE_TOKEN_FILE"):
        ClientConfig.resolve(environ={"LAKEGATE_TOKEN_FILE": str(tmp_path / "missing")})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LAKEGATE_TIMEOUT_S", "abc"),
        ("LAKEGATE_TIMEOUT_S", "0"),
        ("LAKEGATE_MEMO_FLOOR_S", "x"),
        ("LAKEGATE_MEMO_FLOOR_S", "-1"),
    ],
)
def test_bad_numbers_name_the_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=name):
        ClientConfig.resolve(environ={name: value})


def test_repr_never_shows_the_token() -> None:
    config = ClientConfig.resolve(token="very-secret-token", environ={})  # noqa: S106
    assert "very-secret-token" not in repr(config)
