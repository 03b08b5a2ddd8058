"""Client / AsyncClient facades over a fake transport: memo, lifecycle, argument handling."""

from __future__ import annotations

from typing import Any

import pytest

from lakegate_client import (
    AsyncClient,
    Client,
    ClientClosedError,
    ClientConfig,
    ClientState,
    ConfigurationError,
    GatewayConnectionError,
    LoadedTable,
    NotFoundError,
    StorageCredential,
    TableCredentials,
    TableIdentifier,
)
from lakegate_client._facade import resolve_warehouse
from lakegate_client._models import TableRef, TableSpec
from lakegate_client._ops import (
    CreateTable,
    DropTable,
    GetCredentials,
    ListPage,
    LoadTable,
    Operation,
    RenameTable,
)

NOW = 1_800_000_000.0


class FakeClock:
    def __init__(self) -> None:
        self.t = NOW

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t


class FakeTransport:
    """In-memory gateway: vends a one-hour credential, counts every call."""

    def __init__(self, clock: FakeClock, lifetime_s: float = 3600) -> None:
        self.clock = clock
        self.lifetime_s = lifetime_s
        self.calls: list[tuple[str, Any]] = []
        self.closed = False
        self.locations: dict[str, str] = {}  # table → location (default s3://w/<table>)
        self.sent: list[GetCredentials] = []
        # The gateway's word on each answer's identity (long: the floor alone decides here).
        self.identity_ttl_s: float | None = 86_400.0
        self.down = False  # the gateway cannot be reached

    @property
    def connection_id(self) -> str:
        return f"0:{id(self):x}"

    def credentials(self, ref: TableRef, access: str) -> TableCredentials:
        self.calls.append(("credentials", (ref, access)))
        if self.down:
            raise GatewayConnectionError("cannot reach the gateway", type="GatewayUnreachable")
        if ref.name == "missing":
            raise NotFoundError("no such table", type="NoSuchGenericTableException")
        location = self.locations.get(ref.name, f"s3://w/{ref.name}")
        return TableCredentials.from_parts(
            location=location,
            credentials=[StorageCredential(location, {"s3.access-key-id": "AK"})],
            expires_at_ms=int((self.clock.now() + self.lifetime_s) * 1000),
            outcome="miss",
            access=access,
            identity_ttl_s=self.identity_ttl_s,
        )

    def load(self, ref: TableRef, vended: bool, access: str) -> LoadedTable:
        self.calls.append(("load", (ref, vended, access)))
        return LoadedTable(
            namespace=ref.namespace,
            name=ref.name,
            format="parquet",
            base_location=f"s3://w/{ref.name}",
        )

    def list_page(self, warehouse: str, namespace: tuple[str, ...], token: str | None) -> Any:
        self.calls.append(("list", token))
        pages = {None: (["a", "b"], "2"), "2": (["c"], "3"), "3": ([], None)}
        names, nxt = pages[token]
        return [TableIdentifier(namespace, n) for n in names], nxt

    def create(self, ref: TableRef, spec: TableSpec, idempotency_key: str) -> LoadedTable:
        self.calls.append(("create", (ref, spec.format, idempotency_key)))
        return LoadedTable(
            namespace=ref.namespace,
            name=ref.name,
            format=spec.format,
            base_location=spec.base_location or "",
        )

    def drop(self, ref: TableRef, purge: bool, force: bool) -> None:
        self.calls.append(("drop", (ref, purge, force)))

    def rename(self, source: TableRef, destination: TableRef) -> None:
        self.calls.append(("rename", (source, destination)))

    def send(self, op: Operation[Any]) -> Any:
        """The one transport method: dispatch on the operation's type."""
        if isinstance(op, GetCredentials):
            self.sent.append(op)
            return self.credentials(op.ref, op.access)
        if isinstance(op, LoadTable):
            return self.load(op.ref, op.vended, op.access)
        if isinstance(op, ListPage):
            return self.list_page(op.warehouse, op.namespace, op.page_token)
        if isinstance(op, CreateTable):
            return self.create(op.ref, op.spec, op.idempotency_key)
        if isinstance(op, DropTable):
            return self.drop(op.ref, op.purge, op.force)
        if isinstance(op, RenameTable):
            return self.rename(op.source, op.destination)
        raise AssertionError(f"unexpected operation {op!r}")

    def close(self) -> None:
        self.closed = True


class AsyncFakeTransport:
    """The same fake behind coroutines."""

    def __init__(self, inner: FakeTransport) -> None:
        self.inner = inner

    @property
    def connection_id(self) -> str:
        return self.inner.connection_id

    async def send(self, op: Operation[Any]) -> Any:
        return self.inner.send(op)

    async def aclose(self) -> None:
        self.inner.close()


CONFIG = ClientConfig.resolve("http://127.0.0.1:1", warehouse="demo", environ={})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def transport(clock: FakeClock) -> FakeTransport:
    return FakeTransport(clock)


@pytest.fixture
def client(clock: FakeClock, transport: FakeTransport) -> Client:
    return Client(config=CONFIG, clock=clock, transport_factory=lambda _: transport)


def credential_calls(transport: FakeTransport) -> int:
    return sum(1 for name, _ in transport.calls if name == "credentials")


def test_tight_loop_reaches_the_gateway_once(client: Client, transport: FakeTransport) -> None:
    first = client.credentials("ns", "orders")
    outcomes = {client.credentials("ns", "orders").outcome for _ in range(10_000)}
    assert first.outcome == "miss"
    assert outcomes == {"memo"}
    assert credential_calls(transport) == 1


def test_memo_refetches_once_the_credential_nears_the_floor(
    client: Client, transport: FakeTransport, clock: FakeClock
) -> None:
    client.credentials("ns", "orders")
    clock.t += 3600 - 300 - 1
    assert client.credentials("ns", "orders").outcome == "memo"
    clock.t += 1
    assert client.credentials("ns", "orders").outcome == "miss"
    assert credential_calls(transport) == 2


def test_access_modes_and_tables_are_memoised_separately(
    client: Client, transport: FakeTransport
) -> None:
    for _ in range(3):
        client.credentials("ns", "orders", access="read")
        client.credentials("ns", "orders", access="write")
        client.credentials(["ns"], "customers")
    assert credential_calls(transport) == 3


def test_short_lived_credentials_are_never_memoised(clock: FakeClock) -> None:
    transport = FakeTransport(clock, lifetime_s=200)
    client = Client(config=CONFIG, clock=clock, transport_factory=lambda _: transport)
    for _ in range(3):
        client.credentials("ns", "t")
    assert credential_calls(transport) == 3


def test_memo_can_be_switched_off(clock: FakeClock, transport: FakeTransport) -> None:
    client = Client(config=CONFIG, clock=clock, memo=False, transport_factory=lambda _: transport)
    client.credentials("ns", "t")
    client.credentials("ns", "t")
    assert credential_calls(transport) == 2


def test_errors_are_not_memoised(client: Client, transport: FakeTransport) -> None:
    for _ in range(2):
        with pytest.raises(NotFoundError):
            client.credentials("ns", "missing")
    assert credential_calls(transport) == 2


def test_drop_and_rename_forget_the_tables_memo(client: Client, transport: FakeTransport) -> None:
    client.credentials("ns", "t")
    client.drop("ns", "t")
    client.credentials("ns", "t")
    client.rename("ns", "t", "ns2", "u")
    client.credentials("ns", "t")
    assert credential_calls(transport) == 3


def test_clear_memo_forgets_everything(client: Client, transport: FakeTransport) -> None:
    client.credentials("ns", "t")
    client.clear_memo()
    client.credentials("ns", "t")
    assert credential_calls(transport) == 2


def test_namespace_forms_and_default_warehouse_resolve_to_one_ref(
    client: Client, transport: FakeTransport
) -> None:
    client.load("a.b", "t")
    client.load(["a", "b"], "t", warehouse="other", vended=True, access="write")
    refs = [args for name, args in transport.calls if name == "load"]
    assert refs[0] == (TableRef("demo", ("a", "b"), "t"), False, "read")
    assert refs[1] == (TableRef("other", ("a", "b"), "t"), True, "write")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.credentials("ns", "t", access="admin"), "access"),
        (lambda c: c.credentials("", "t"), "namespace"),
        (lambda c: c.credentials("a..b", "t"), "namespace"),
        (lambda c: c.credentials("ns", ""), "table"),
    ],
)
def test_bad_arguments_fail_before_any_call(
    client: Client, transport: FakeTransport, call: Any, match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        call(client)
    assert transport.calls == []


def test_no_warehouse_anywhere_is_a_configuration_error(transport: FakeTransport) -> None:
    config = ClientConfig.resolve("http://127.0.0.1:1", environ={})
    client = Client(config=config, transport_factory=lambda _: transport)
    with pytest.raises(ConfigurationError, match="LAKEGATE_WAREHOUSE"):
        client.credentials("ns", "t")


def test_list_follows_every_page(client: Client) -> None:
    assert [t.name for t in client.list("ns")] == ["a", "b", "c"]


def test_create_sends_a_fresh_idempotency_key_per_call(
    client: Client, transport: FakeTransport
) -> None:
    client.create("ns", "t", format="delta")
    client.create("ns", "t", format="delta")
    keys = [args[2] for name, args in transport.calls if name == "create"]
    assert len(set(keys)) == 2
    assert all(len(k) == 36 for k in keys)


def test_lifecycle_unopened_opened_closed(client: Client, transport: FakeTransport) -> None:
    assert client.state is ClientState.UNOPENED
    client.credentials("ns", "t")
    assert client.state is ClientState.OPENED
    client.close()
    assert client.state is ClientState.CLOSED
    assert transport.closed
    with pytest.raises(ClientClosedError):
        client.credentials("ns", "other")
    client.close()  # idempotent


def test_context_manager_opens_and_closes(clock: FakeClock, transport: FakeTransport) -> None:
    with Client(config=CONFIG, clock=clock, transport_factory=lambda _: transport) as client:
        assert client.state is ClientState.OPENED
    assert client.state is ClientState.CLOSED
    assert transport.closed


def test_transport_is_built_once_per_process(clock: FakeClock) -> None:
    built: list[FakeTransport] = []

    def factory(_: ClientConfig) -> FakeTransport:
        built.append(FakeTransport(clock))
        return built[-1]

    client = Client(config=CONFIG, clock=clock, memo=False, transport_factory=factory)
    first = client.connection_id
    for _ in range(5):
        client.credentials("ns", "t")
    assert len(built) == 1
    assert client.connection_id == first


def test_repr_shows_url_and_state_but_never_the_token() -> None:
    config = ClientConfig.resolve("grpc://127.0.0.1:1", token="secret-token", environ={})  # noqa: S106
    client = Client(config=config)
    assert repr(client) == "Client(url='grpc://127.0.0.1:1', state=unopened)"


async def test_async_client_memo_and_lifecycle(clock: FakeClock, transport: FakeTransport) -> None:
    async with AsyncClient(
        config=CONFIG, clock=clock, transport_factory=lambda _: AsyncFakeTransport(transport)
    ) as client:
        first = await client.credentials("ns", "t")
        again = await client.credentials("ns", "t")
        assert (first.outcome, again.outcome) == ("miss", "memo")
        assert [t.name for t in await client.list("ns")] == ["a", "b", "c"]
        await client.drop("ns", "t")
        await client.credentials("ns", "t")
    assert credential_calls(transport) == 2
    assert client.state is ClientState.CLOSED
    assert transport.closed
    with pytest.raises(ClientClosedError):
        await client.load("ns", "t")


def test_missing_warehouse_is_a_configuration_error_naming_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="LAKEGATE_WAREHOUSE"):
        resolve_warehouse(ClientConfig.resolve(environ={}), None)


def test_list_is_lazy_and_fetches_the_next_page_only_when_needed(
    client: Client, transport: FakeTransport
) -> None:
    listing = client.list("ns")
    assert [name for name, _ in transport.calls] == []  # nothing sent before iteration
    iterator = iter(listing)
    assert next(iterator).name == "a"
    assert [args for name, args in transport.calls if name == "list"] == [None]
    assert [t.name for t in iterator] == ["b", "c"]
    assert [args for name, args in transport.calls if name == "list"] == [None, "2", "3"]


def test_list_pages_come_as_the_gateway_sent_them(client: Client) -> None:
    assert [[t.name for t in page] for page in client.list("ns").pages()] == [["a", "b"], ["c"], []]


async def test_async_list_is_an_async_iterator_and_awaitable(clock: FakeClock) -> None:
    transport = FakeTransport(clock)
    client = AsyncClient(
        config=CONFIG, clock=clock, transport_factory=lambda _: AsyncFakeTransport(transport)
    )
    listing = client.list("ns")
    assert transport.calls == []
    names = [t.name async for t in listing]
    assert names == ["a", "b", "c"]
    assert [t.name for t in await client.list("ns")] == ["a", "b", "c"]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.drop("ns", "t", "demo", True),
        lambda c: c.drop("ns", "t", "demo", False, True),
        lambda c: c.load("ns", "t", "demo", True),
    ],
)
def test_boolean_parameters_are_keyword_only(
    client: Client, transport: FakeTransport, call: Any
) -> None:
    with pytest.raises(TypeError):
        call(client)
    assert transport.calls == []


def test_drop_passes_purge_and_force_by_name(client: Client, transport: FakeTransport) -> None:
    client.drop("ns", "t", purge=True)
    client.drop("ns", "u", force=True)
    drops = [args for name, args in transport.calls if name == "drop"]
    assert drops == [
        (TableRef("demo", ("ns",), "t"), True, False),
        (TableRef("demo", ("ns",), "u"), False, True),
    ]


def test_memo_is_bypassed_by_a_request_naming_another_identity(
    client: Client, transport: FakeTransport
) -> None:
    old = client.credentials("ns", "orders")
    transport.locations["orders"] = "s3://w/orders-v2"  # replaced behind the client's back
    assert client.credentials("ns", "orders").location == old.location  # plain memo hit
    assert client.credentials("ns", "orders", expected_location=old.location + "/").outcome == (
        "memo")
    new = client.credentials("ns", "orders", expected_location="s3://w/orders-v2")
    assert (new.outcome, new.location) == ("miss", "s3://w/orders-v2")
    assert transport.sent[-1].expected_location == "s3://w/orders-v2"
    # The memo now holds the new identity, for every caller of this process.
    again = client.credentials("ns", "orders", expected_location="s3://w/orders-v2")
    assert (again.outcome, again.location) == ("memo", "s3://w/orders-v2")
    assert client.credentials("ns", "orders").location == "s3://w/orders-v2"
    assert credential_calls(transport) == 2


def test_a_table_id_the_memo_cannot_confirm_goes_to_the_gateway(
    client: Client, transport: FakeTransport
) -> None:
    client.credentials("ns", "orders")
    client.credentials("ns", "orders", table_id="0198-abc")
    assert transport.sent[-1].table_id == "0198-abc"
    assert credential_calls(transport) == 2


# -- the memo and the table identity (issue #33, finding 1) ------------------------------------


@pytest.fixture
def bounded(transport: FakeTransport) -> FakeTransport:
    """A gateway that vouches for each answer's identity for 30 s."""
    transport.identity_ttl_s = 30.0
    return transport


def test_a_replaced_table_is_never_served_from_the_memo_past_the_gateways_identity_ttl(
    client: Client, bounded: FakeTransport, clock: FakeClock
) -> None:
    old = client.credentials("ns", "orders")
    bounded.locations["orders"] = "s3://w/orders-v2"  # dropped and created again elsewhere
    clock.t += 29.9
    assert (client.credentials("ns", "orders").outcome, old.outcome) == ("memo", "miss")
    clock.t += 0.1  # the gateway's word on the identity has lapsed: ask again
    new = client.credentials("ns", "orders")
    assert (new.outcome, new.location) == ("miss", "s3://w/orders-v2")
    assert client.credentials("ns", "orders").outcome == "memo"  # and memoised again
    assert credential_calls(bounded) == 2


def test_an_expected_location_is_not_served_from_the_memo_past_the_identity_ttl(
    client: Client, bounded: FakeTransport, clock: FakeClock
) -> None:
    """A Spark task planned against the old table gets the gateway's 409, not the memo's
    old credential for ever."""
    old = client.credentials("ns", "orders", expected_location="s3://w/orders")
    clock.t += 10
    assert client.credentials("ns", "orders", expected_location=old.location).outcome == "memo"
    clock.t += 20
    client.credentials("ns", "orders", expected_location=old.location)
    assert bounded.sent[-1].expected_location == "s3://w/orders"  # the gateway decides
    assert credential_calls(bounded) == 2


def test_an_unreachable_gateway_is_bridged_by_the_memo_only_above_the_floor(
    client: Client, bounded: FakeTransport, clock: FakeClock
) -> None:
    first = client.credentials("ns", "orders")
    bounded.down = True
    clock.t += 60
    bridged = client.credentials("ns", "orders")  # asked, unreachable: the last answer
    assert (bridged.outcome, bridged.location) == ("memo", first.location)
    with pytest.raises(GatewayConnectionError):  # not for another identity
        client.credentials("ns", "orders", expected_location="s3://w/orders-v2")
    with pytest.raises(GatewayConnectionError):  # nor for a table never asked for
        client.credentials("ns", "other")
    clock.t += 3600 - 300 - 60
    with pytest.raises(GatewayConnectionError):  # nor below the floor
        client.credentials("ns", "orders")


def test_an_unreachable_gateway_is_the_callers_error_with_the_memo_off(
    clock: FakeClock, bounded: FakeTransport
) -> None:
    client = Client(config=CONFIG, clock=clock, memo=False, transport_factory=lambda _: bounded)
    client.credentials("ns", "orders")
    bounded.down = True
    with pytest.raises(GatewayConnectionError):
        client.credentials("ns", "orders")


async def test_the_async_client_follows_the_same_identity_rule(
    clock: FakeClock, bounded: FakeTransport
) -> None:
    async with AsyncClient(
        config=CONFIG, clock=clock, transport_factory=lambda _: AsyncFakeTransport(bounded)
    ) as client:
        await client.credentials("ns", "orders")
        bounded.locations["orders"] = "s3://w/orders-v2"
        clock.t += 29
        assert (await client.credentials("ns", "orders")).location == "s3://w/orders"
        clock.t += 1
        assert (await client.credentials("ns", "orders")).location == "s3://w/orders-v2"
        bounded.down = True
        clock.t += 31
        bridged = await client.credentials("ns", "orders")
        assert (bridged.outcome, bridged.location) == ("memo", "s3://w/orders-v2")
