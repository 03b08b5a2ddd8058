import pytest

from gateway.settings import CallerMode, Settings, SettingsError, TokenKind

BASE = {"LAKEGATE__UPSTREAM__URL": "http://catalog.test", "LAKEGATE__TOKEN__KIND": "none"}


def load(tmp_path=None, text=None, **env):
    cfg = None
    if text is not None:
        cfg = tmp_path / "lakegate.yaml"
        cfg.write_text(text)
    return Settings.load(cfg, environ={**BASE, **env})


def test_defaults_match_the_contract():
    s = load()
    assert s.cache.min_remaining_s == 300
    assert s.cache.refresh_lead_s == 900
    assert (s.cache.max_entries, s.cache.idle_s, s.cache.negative_ttl_s) == (10000, 1800, 5)
    assert (s.cache.no_expiry_ttl_s, s.cache.refresh_rate_per_s) == (60, 20)
    assert (s.upstream.timeout_s, s.upstream.deadline_s, s.upstream.max_retries) == (10, 30, 4)
    assert (s.listen.host, s.listen.http_port, s.listen.grpc_port) == ("127.0.0.1", 8765, 8766)
    assert s.callers.mode is CallerMode.NONE
    assert s.shutdown_grace_s == 10
    assert s.log.level == "INFO"
    assert s.log.format == "json"


def test_token_kind_defaults_to_client_credentials_and_names_missing_fields():
    with pytest.raises(SettingsError) as info:
        Settings.load(environ={"LAKEGATE__UPSTREAM__URL": "http://x"})
    msg = str(info.value)
    assert "LAKEGATE__TOKEN__KIND=client_credentials requires" in msg
    for var in ("LAKEGATE__TOKEN__TOKEN_URL", "LAKEGATE__TOKEN__CLIENT_ID",
                "LAKEGATE__TOKEN__CLIENT_SECRET"):
        assert var in msg


def test_missing_upstream_url_names_the_env_var():
    with pytest.raises(SettingsError, match="LAKEGATE__UPSTREAM__URL"):
        Settings.load(environ={"LAKEGATE__TOKEN__KIND": "none"})


def test_precedence_is_defaults_then_file_then_env(tmp_path):
    text = "cache:\n  min_remaining_s: 100\n  refresh_lead_s: 400\n  max_entries: 7\n"
    s = load(tmp_path, text, LAKEGATE__CACHE__MAX_ENTRIES="9")
    assert s.cache.min_remaining_s == 100  # file over default
    assert s.cache.max_entries == 9  # env over file
    assert s.cache.idle_s == 1800  # default


def test_config_file_can_come_from_the_environment(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("upstream:\n  url: http://from-file\ntoken:\n  kind: none\n")
    s = Settings.load(environ={"LAKEGATE_CONFIG_FILE": str(cfg)})
    assert s.upstream.url == "http://from-file"


def test_env_is_case_insensitive_and_nested():
    s = load(lakegate__upstream__project_id="p1")
    assert s.upstream.project_id == "p1"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LAKEGATE__CACHE__REFRESH_LEAD_S": "200"},
         "LAKEGATE__CACHE__REFRESH_LEAD_S must be greater than LAKEGATE__CACHE__MIN_REMAINING_S"),
        ({"LAKEGATE__LISTEN__HOST": "0.0.0.0"},  # noqa: S104
         "LAKEGATE__LISTEN__HOST=0.0.0.0 is not loopback: set LAKEGATE__CALLERS__MODE"),
        ({"LAKEGATE__UPSTREAM__TIMEOUT_S": "40"},
         "LAKEGATE__UPSTREAM__TIMEOUT_S must not exceed LAKEGATE__UPSTREAM__DEADLINE_S"),
        ({"LAKEGATE__TOKEN__KIND": "static"},
         "LAKEGATE__TOKEN__KIND=static requires LAKEGATE__TOKEN__TOKEN"),
        ({"LAKEGATE__TOKEN__KIND": "file"},
         "LAKEGATE__TOKEN__KIND=file requires LAKEGATE__TOKEN__PATH"),
        ({"LAKEGATE__CALLERS__MODE": "token"},
         "LAKEGATE__CALLERS__MODE=token requires LAKEGATE__CALLERS__TOKENS_FILE"),
        ({"LAKEGATE__CALLERS__MODE": "jwt"},
         "LAKEGATE__CALLERS__MODE=jwt requires LAKEGATE__CALLERS__JWKS_URL"),
        ({"LAKEGATE__UPSTREAM__URL": "ftp://x"}, "LAKEGATE__UPSTREAM__URL must be an http(s) URL"),
        ({"LAKEGATE__CACHE__MAX_ENTRIES": "0"}, "LAKEGATE__CACHE__MAX_ENTRIES:"),
        ({"LAKEGATE__LISTEN__HTTP_PORT": "70000"}, "LAKEGATE__LISTEN__HTTP_PORT:"),
        ({"LAKEGATE__LOG__LEVEL": "LOUD"}, "LAKEGATE__LOG__LEVEL must be"),
        ({"LAKEGATE__CACHE__METADATA_TTL_S": "11"}, "LAKEGATE__CACHE__METADATA_TTL_S:"),
    ],
)
def test_every_invariant_is_rejected_with_a_readable_message(env, message):
    with pytest.raises(SettingsError) as info:
        load(**env)
    assert message in str(info.value)


def test_non_loopback_bind_is_allowed_with_caller_auth(tmp_path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("{}")
    s = load(LAKEGATE__LISTEN__HOST="0.0.0.0",  # noqa: S104
             LAKEGATE__CALLERS__MODE="token",
             LAKEGATE__CALLERS__TOKENS_FILE=str(tokens))
    assert not s.listen.is_loopback


def test_secrets_are_not_echoed_in_errors_or_reprs():
    env = {"LAKEGATE__TOKEN__KIND": "client_credentials",
           "LAKEGATE__TOKEN__CLIENT_SECRET": "planted-secret-value",
           "LAKEGATE__TOKEN__CLIENT_ID": "id", "LAKEGATE__TOKEN__TOKEN_URL": "http://idp",
           "LAKEGATE__CACHE__REFRESH_LEAD_S": "nope"}
    with pytest.raises(SettingsError) as info:
        load(**env)
    assert "planted-secret-value" not in str(info.value)
    env["LAKEGATE__CACHE__REFRESH_LEAD_S"] = "900"
    s = load(**env)
    assert "planted-secret-value" not in repr(s)
    assert s.secret_values() == ["planted-secret-value"]
    assert s.token.kind is TokenKind.CLIENT_CREDENTIALS


def test_unreadable_config_file_is_a_settings_error(tmp_path):
    with pytest.raises(SettingsError, match="cannot read config file"):
        Settings.load(tmp_path / "absent.yaml", environ=BASE)
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(SettingsError, match="must hold a mapping"):
        Settings.load(bad, environ=BASE)


def test_refresh_capacity_is_advice_not_an_error():
    s = load(LAKEGATE__CACHE__REFRESH_RATE_PER_S="1", LAKEGATE__CACHE__MAX_ENTRIES="10000")
    assert any("REFRESH_RATE_PER_S" in w for w in s.warnings())
    assert load().warnings() == []


@pytest.mark.parametrize(
    ("env", "message"),
    [({"LAKEGATE__CAHCE__MIN_REMAINING_S": "3"}, "LAKEGATE__CAHCE__MIN_REMAINING_S: unknown"),
     ({"LAKEGATE__CACHE__MIN_REMAINING": "3"},
      "LAKEGATE__CACHE__MIN_REMAINING: Extra inputs are not permitted")],
)
def test_misspelled_env_vars_are_refused_not_ignored(env, message):
    with pytest.raises(SettingsError, match=message):
        load(**env)


def test_misspelled_file_keys_are_refused(tmp_path):
    with pytest.raises(SettingsError, match="LAKEGATE__CAHCE"):
        load(tmp_path, "cahce:\n  idle_s: 5\n")


def test_allowed_hosts_are_exact_names() -> None:
    """Issue #28 finding 3: names only (a wildcard or a port would widen the Host rule)."""
    s = load(lakegate__listen__allowed_hosts="lakegate-local.lakegate.svc.cluster.local, a.b")
    assert s.listen.allowed_hosts == "lakegate-local.lakegate.svc.cluster.local, a.b"
    for bad in ("*.svc.cluster.local", "a.b:8765", "a b"):
        with pytest.raises(SettingsError, match="LAKEGATE__LISTEN__ALLOWED_HOSTS"):
            load(lakegate__listen__allowed_hosts=bad)



def test_the_auth_failure_delay_defaults_to_1_s_and_is_bounded() -> None:
    base = {"LAKEGATE__UPSTREAM__URL": "http://127.0.0.1:1", "LAKEGATE__TOKEN__KIND": "none"}
    assert Settings.load(environ=base).callers.auth_failure_delay_s == 1.0
    assert Settings.load(environ=base | {
        "LAKEGATE__CALLERS__AUTH_FAILURE_DELAY_S": "0"}).callers.auth_failure_delay_s == 0.0
    with pytest.raises(SettingsError, match="AUTH_FAILURE_DELAY_S"):
        Settings.load(environ=base | {"LAKEGATE__CALLERS__AUTH_FAILURE_DELAY_S": "60"})
