import asyncio
import base64
import os
from urllib.parse import parse_qs

import pytest

from gateway.errors import IdentityProviderError
from gateway.metrics import Metrics
from gateway.secrets import Secret
from gateway.settings import TokenSettings
from gateway.upstream.token_source import (
    ClientCredentialsTokenSource,
    NoToken,
    StaticToken,
    TokenFile,
    build_token_source,
)
from tests.fakes.catalog import TOKEN_URL, FakeCatalog, FakeIdP
from tests.fakes.clock import FakeClock
from tests.fakes.rng import seeded
from tests.herd import gated_herd


def cc_settings(**kw):
    base = {"kind": "client_credentials", "token_url": TOKEN_URL, "client_id": "gw client",
            "client_secret": "s3cr&t", "refresh_fraction": 0.8}
    base.update(kw)
    return TokenSettings(**base)


def make_source(clock, idp, metrics=None, **kw):
    transport = FakeCatalog(clock).transport(idp)
    return ClientCredentialsTokenSource(cc_settings(**kw), transport, clock,
                                        metrics or Metrics(), rng=seeded(11))


async def test_client_secret_basic_sends_form_encoded_credentials_in_the_header():
    clock, idp = FakeClock(), FakeIdP()
    source = make_source(clock, idp, scope="lakekeeper", audience="urn:lakekeeper")
    assert (await source.token()).reveal() == "idp-token-1"
    headers, body = idp.requests[0]
    user, _, secret = base64.b64decode(headers["Authorization"].split()[1]).decode().partition(":")
    assert (user, secret) == ("gw+client".replace("+", "%20"), "s3cr%26t")
    form = parse_qs(body.decode())
    assert form == {"grant_type": ["client_credentials"], "scope": ["lakekeeper"],
                    "audience": ["urn:lakekeeper"]}


async def test_client_secret_post_sends_credentials_in_the_body():
    clock, idp = FakeClock(), FakeIdP()
    source = make_source(clock, idp, auth_method="client_secret_post", resource="urn:res")
    await source.token()
    headers, body = idp.requests[0]
    assert "Authorization" not in headers
    form = parse_qs(body.decode())
    assert form["client_id"] == ["gw client"]
    assert form["client_secret"] == ["s3cr&t"]
    assert form["resource"] == ["urn:res"]


async def test_concurrent_cold_callers_share_one_token_request(registry):
    clock, idp = FakeClock(), FakeIdP()
    idp.gate = asyncio.Event()
    source = make_source(clock, idp)
    source.start(registry.spawn)
    tokens = await gated_herd(200, source.token, idp.gate, settle=clock.settle)
    assert {t.reveal() for t in tokens} == {"idp-token-1"}
    assert idp.grants == 1
    await source.close()


async def test_token_is_refreshed_in_the_background_at_about_80_percent(registry):
    clock, idp = FakeClock(), FakeIdP(expires_in=1000)
    metrics = Metrics()
    source = make_source(clock, idp, metrics)
    source.start(registry.spawn)
    await clock.settle()
    assert idp.grants == 1
    assert metrics.idp_token_expiry._value.get() == pytest.approx(clock.now() + 1000)
    await clock.run_for(740, step=10)  # before 80% - 5% jitter
    assert idp.grants == 1
    await clock.run_for(120, step=10)  # past 80% + 5% jitter
    assert idp.grants == 2
    assert (await source.token()).reveal() == "idp-token-2"
    assert metrics.registry.get_sample_value(
        "lakegate_upstream_requests_total", {"target": "idp", "op": "token", "status": "200"}
    ) == 2
    await source.close()


async def test_idp_down_keeps_the_current_token_until_it_truly_expires(registry):
    clock, idp = FakeClock(), FakeIdP(expires_in=1000)
    source = make_source(clock, idp)
    source.start(registry.spawn)
    await clock.settle()
    idp.down = True
    await clock.run_for(990, step=5)
    assert (await source.token()).reveal() == "idp-token-1"
    attempts = len(idp.requests)
    assert 3 <= attempts <= 40  # backed off, not hammering
    await clock.run_for(15, step=5)
    with pytest.raises(IdentityProviderError):
        await source.token()
    idp.down = False
    await clock.run_for(60, step=5)
    assert (await source.token()).reveal() == "idp-token-2"
    await source.close()


async def test_force_refresh_replaces_a_rejected_token_once():
    clock, idp = FakeClock(), FakeIdP()
    source = make_source(clock, idp)
    old = await source.token()
    clock.advance(30)
    results = await asyncio.gather(*[source.force_refresh(old) for _ in range(10)])
    assert {r.reveal() for r in results} == {"idp-token-2"}
    assert idp.grants == 2
    # A second 401 with the already-replaced token does not refetch.
    assert (await source.force_refresh(old)).reveal() == "idp-token-2"
    assert idp.grants == 2


async def test_forced_refreshes_are_rate_limited():
    clock, idp = FakeClock(), FakeIdP()
    source = make_source(clock, idp)
    tok = await source.token()
    assert (await source.force_refresh(tok)).reveal() == tok.reveal()
    assert idp.grants == 1


async def test_idp_error_message_names_the_oauth_error_but_not_the_secret():
    clock = FakeClock()

    class RefusingIdP(FakeIdP):
        async def handle(self, method, url, headers, body):
            from gateway.upstream.transport import RawResponse
            return RawResponse(
                401, {}, b'{"error": "invalid_client", "error_description": "s3cr&t"}'
            )

    source = make_source(clock, RefusingIdP())
    with pytest.raises(IdentityProviderError) as info:
        await source.token()
    assert "invalid_client" in str(info.value)
    assert "s3cr&t" not in str(info.value)
    assert "s3cr&t" not in repr(source.__dict__)


async def test_token_file_is_reread_when_it_rotates(tmp_path):
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("first\n")
    source = TokenFile(path, clock, Metrics(), check_interval_s=1.0)
    assert (await source.token()).reveal() == "first"
    # Kubernetes-style rotation: a new file swapped in (new inode).
    new = tmp_path / "token.new"
    new.write_text("second")
    os.replace(new, path)
    assert (await source.token()).reveal() == "first"  # within the check interval
    clock.advance(1.5)
    assert (await source.token()).reveal() == "second"


async def test_token_file_force_refresh_rereads_and_survives_a_missing_file(tmp_path):
    clock = FakeClock()
    path = tmp_path / "token"
    path.write_text("first")
    source = TokenFile(path, clock, Metrics())
    await source.token()
    path.unlink()
    assert (await source.force_refresh(Secret("first"))).reveal() == "first"
    with pytest.raises(IdentityProviderError):
        await TokenFile(tmp_path / "absent", clock, Metrics()).token()


async def test_static_and_none_sources():
    assert (await StaticToken(Secret("abc")).token()).reveal() == "abc"
    assert await NoToken().token() is None
    assert NoToken().ready()


def test_build_token_source_follows_the_kind(tmp_path):
    clock, metrics = FakeClock(), Metrics()
    transport = FakeCatalog(clock).transport()
    assert isinstance(build_token_source(TokenSettings(kind="none"), transport, clock, metrics),
                      NoToken)
    static = TokenSettings(kind="static", token="t")  # noqa: S106
    assert isinstance(build_token_source(static, transport, clock, metrics), StaticToken)
    assert isinstance(build_token_source(TokenSettings(kind="file", path=tmp_path / "t"),
                                         transport, clock, metrics), TokenFile)
    assert isinstance(build_token_source(cc_settings(), transport, clock, metrics),
                      ClientCredentialsTokenSource)


def test_secret_never_shows_itself():
    s = Secret("hunter2")
    assert "hunter2" not in repr(s)
    assert "hunter2" not in str(s)
    assert "hunter2" not in f"{s}"


@pytest.mark.parametrize(("rand", "at"), [(0.0, 750.0), (0.5, 800.0), (0.99999, 850.0)])
def test_refresh_point_is_80_percent_of_lifetime_plus_minus_jitter(rand, at):
    from gateway.upstream.token_source import refresh_point_s
    assert refresh_point_s(0.0, 1000.0, 0.8, 0.05, rand) == pytest.approx(at, abs=0.1)


async def test_a_forced_refresh_moves_the_background_refresh_point(registry):
    clock, idp = FakeClock(), FakeIdP(expires_in=1000)
    source = make_source(clock, idp)
    source.start(registry.spawn)
    await clock.settle()
    await clock.run_for(500, step=10)
    await source.force_refresh(await source.token())  # new token at t=500
    assert idp.grants == 2
    await clock.run_for(400, step=10)  # t=900: past the first token's 80%, not the second's
    assert idp.grants == 2
    await clock.run_for(500, step=10)  # t=1400: past the second token's ~80% (t=1300)
    assert idp.grants == 3
    await source.close()


async def test_callers_fail_fast_while_the_idp_backs_off_instead_of_hammering_it():
    clock, idp = FakeClock(), FakeIdP()
    idp.down = True
    source = make_source(clock, idp)
    for _ in range(100):
        with pytest.raises(IdentityProviderError):
            await source.token()
    assert len(idp.requests) == 1
    idp.down = False
    clock.advance(31)  # past the longest backoff
    assert (await source.token()).reveal() == "idp-token-1"


async def test_wall_clock_steps_neither_expire_a_valid_token_nor_extend_an_expired_one():
    clock, idp = FakeClock(), FakeIdP()
    source = make_source(clock, idp)
    assert (await source.token()).reveal() == "idp-token-1"
    clock.step_wall(3600.0)  # a +1 h step: the token is still valid in real time
    assert source.ready()
    assert (await source.token()).reveal() == "idp-token-1"
    assert idp.grants == 1
    clock.step_wall(-7200.0)  # then -2 h, and real time moves past the token's lifetime
    clock.advance(idp.expires_in + 1)
    assert not source.ready()
    assert (await source.token()).reveal() == "idp-token-2"
    assert idp.grants == 2


@pytest.mark.parametrize("exp_offset_s", [0.0, -30.0, -3600.0])
async def test_a_token_that_arrives_expired_neither_spins_nor_goes_unnoticed(
    registry, caplog, exp_offset_s
):
    """Defect 4: no `expires_in` and a JWT `exp` at or before now (a skewed IdP) gave a
    lifetime of 0, and the refresh rescheduled itself at once: 2,001 grants in 0.2 s."""
    clock, idp = FakeClock(), FakeIdP(expires_in=None)
    idp.jwt_exp_s = clock.now() + exp_offset_s
    metrics = Metrics()
    source = make_source(clock, idp, metrics)
    source.start(registry.spawn)
    await clock.settle()
    for _ in range(120):  # one minute: callers ask all the time, the loop runs
        await source.token()
        await clock.run_for(0.5, step=0.5, ticks=20)
    # At most one grant per TOKEN_MIN_REFRESH_INTERVAL_S (5 s), whoever asks.
    assert 1 <= idp.grants <= 60 / 4 + 1
    expired = metrics.registry.get_sample_value("lakegate_idp_token_expired_on_arrival_total")
    assert expired == idp.grants
    warnings = [r for r in caplog.records if "token with" in r.getMessage()]
    assert warnings
    assert warnings[0].levelname == "WARNING"
    await source.close()


async def test_a_tokens_lifetime_counts_from_when_the_request_left(registry):
    """The token was issued after the request was sent: counting its lifetime from the
    answer overstated it by the round trip."""
    clock, idp = FakeClock(), FakeIdP(expires_in=100)
    idp.gate = asyncio.Event()
    source = make_source(clock, idp)
    pending = asyncio.ensure_future(source.token())
    await clock.settle()
    clock.advance(8)  # a slow IdP: the answer comes 8 s after the request left
    idp.gate.set()
    await pending
    clock.advance(100 - 8 - 1)  # 100 s after the request left, minus the 1 s margin
    assert not source.ready()
