import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.models import (
    AccessMode,
    CacheKey,
    CredentialSet,
    GenericTable,
    LoadResult,
    StorageCredential,
    TableRef,
    Warehouse,
    join_namespace,
    normalize_delegation,
    split_namespace,
)

LEVEL = st.text(alphabet=st.characters(blacklist_characters="\x1f", blacklist_categories=["Cs"]),
                min_size=1, max_size=12)


@given(st.lists(LEVEL, min_size=1, max_size=5))
def test_namespace_round_trips_through_the_0x1f_segment(levels):
    assert split_namespace(join_namespace(levels)) == tuple(levels)


@given(st.lists(LEVEL, min_size=1, max_size=5))
def test_dot_is_not_a_namespace_separator(levels):
    joined = ".".join(levels)
    assert split_namespace(joined) == (joined,)


@pytest.mark.parametrize("segment", ["", "a\x1f", "\x1fa", "a\x1f\x1fb"])
def test_empty_namespace_levels_are_rejected(segment):
    with pytest.raises(ValueError, match="non-empty"):
        split_namespace(segment)


@pytest.mark.parametrize(
    ("header", "mode"),
    [(None, "vended"), ("vended-credentials", "vended"), ("client-managed", "vended"),
     (" vended-credentials , client-managed", "vended"), ("remote-signing", "remote-signing"),
     ("remote-signing,vended-credentials", "remote-signing,vended-credentials"), ("", "vended")],
)
def test_delegation_modes_in_the_cache_key(header, mode):
    assert normalize_delegation(header) == mode


def test_cache_key_folds_case():
    a = CacheKey.of(project=None, warehouse_id="WH", namespace=("Sales",), table="Orders",
                    access=AccessMode.READ)
    b = CacheKey.of(project="", warehouse_id="wh", namespace=("SALES",), table="orders",
                    access=AccessMode.READ)
    assert a == b
    assert hash(a) == hash(b)
    assert (a.namespace, a.table) == (("sales",), "orders")
    assert a != CacheKey.of(project=None, warehouse_id="wh", namespace=("sales",),
                            table="orders", access=AccessMode.WRITE)
    assert a.same_table("Wh", ("sAles",), "ORDERS")


@pytest.mark.parametrize(("a", "b"), [
    ("straße_secret", "strasse_secret"), ("\ufb01le", "FILE"), ("\ufb06ack", "stack"),
    ("\u03c3\u03bf\u03c6\u03bf\u03c2", "\u03a3\u039f\u03a6\u039f\u03a3"), ("\u00b5", "\u039c"),
])
def test_cache_key_uses_the_one_folded_form_of_names(a: str, b: str) -> None:
    """The key the policy's twin shares (issue #28): `str.lower()` keeps these apart."""
    ka = CacheKey.of(project=None, warehouse_id="wh", namespace=(a,), table=a,
                     access=AccessMode.READ)
    kb = CacheKey.of(project=None, warehouse_id="wh", namespace=(b,), table=b,
                     access=AccessMode.READ)
    assert ka == kb
    assert ka.same_table("wh", (b,), b)


def test_plus_in_an_iceberg_key_is_a_space_but_not_in_a_generic_one() -> None:
    def k(ns: str, t: str, kind: str) -> CacheKey:
        return CacheKey.of(project=None, warehouse_id="wh", namespace=(ns,), table=t,
                           access=AccessMode.READ, kind=kind)  # type: ignore[arg-type]
    assert k("a+b", "t+1", "iceberg") == k("a b", "t 1", "iceberg")
    assert k("a+b", "t", "generic") == k("a b", "t", "generic")
    assert k("a", "t+1", "generic") != k("a", "t 1", "generic")


def test_reprs_never_show_secret_values():
    cred = StorageCredential(prefix="s3://b/t", config={
        "s3.access-key-id": "AKIAPLANTED", "s3.secret-access-key": "planted-secret",
        "s3.session-token": "planted-session", "s3.region": "us-east-1",
        "s3.session-token-expires-at-ms": "1800000000000"}, expires_at_ms=1_800_000_000_000)
    creds = CredentialSet(credentials=(cred,), expires_at_ms=1_800_000_000_000, location="x")
    load = LoadResult(table=GenericTable(name="t", format="lance", base_location="s3://b/t"),
                      config=dict(cred.config), credentials=(cred,),
                      warehouse=Warehouse(id="i", name="n"))
    for text in (repr(cred), repr(creds), repr(load)):
        assert "planted" not in text
        assert "us-east-1" in text
        assert "1800000000000" in text


def test_models_are_frozen():
    cred = StorageCredential(prefix="p", config={"a": "b"})
    with pytest.raises(TypeError):
        cred.config["a"] = "c"  # type: ignore[index]
    with pytest.raises(AttributeError):
        cred.prefix = "q"  # type: ignore[misc]


def test_remaining_seconds_from_the_earliest_expiry():
    creds = CredentialSet(credentials=(), expires_at_ms=1_800_000_100_000, location="")
    assert creds.remaining_s(1_800_000_000.0) == pytest.approx(100.0)
    assert CredentialSet(credentials=(), expires_at_ms=None).remaining_s(0) is None


def test_table_refs_compare_by_every_field_and_equal_refs_hash_alike():
    base = dict(warehouse="wh", namespace=("a", "b"), name="t", kind="generic")
    ref = TableRef(**base)
    assert ref == TableRef(**base)
    assert hash(ref) == hash(TableRef(**base))
    for name, other in (("warehouse", "wh2"), ("namespace", ("a",)), ("name", "u"),
                        ("kind", "iceberg")):
        changed = TableRef(**{**base, name: other})
        assert ref != changed, name
    assert ref != ("wh", ("a", "b"), "t")
