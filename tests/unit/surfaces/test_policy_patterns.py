"""Caller names in the policy may be patterns: one entry per namespace's service accounts."""

from __future__ import annotations

from gateway.models import AccessMode, CallerIdentity
from gateway.surfaces.policy import CallerPolicy, parse_rules

DOC = {
    "callers": {
        "system:serviceaccount:team-a:*": [{"warehouse": "prod", "namespace": "team_a*"}],
        "system:serviceaccount:reporting:spark": [{"warehouse": "prod", "namespace": "*"}],
    }
}


def _allows(policy: CallerPolicy, caller: str, namespace: str) -> bool:
    who = CallerIdentity(name=caller, authenticated=True)
    return policy.allows(who, ["prod"], (namespace,), "t", AccessMode.READ)


def test_a_wildcard_caller_entry_covers_every_matching_service_account() -> None:
    policy = CallerPolicy(parse_rules(DOC, "policy.yaml"))
    assert _allows(policy, "system:serviceaccount:team-a:spark", "team_a_sales")
    assert _allows(policy, "system:serviceaccount:team-a:airflow", "team_a_x")
    assert _allows(policy, "SYSTEM:serviceaccount:Team-A:spark", "team_a_x")  # case-insensitive


def test_a_wildcard_entry_grants_nothing_outside_its_pattern_or_its_rules() -> None:
    policy = CallerPolicy(parse_rules(DOC, "policy.yaml"))
    assert not _allows(policy, "system:serviceaccount:team-b:spark", "team_a_sales")
    assert not _allows(policy, "system:serviceaccount:team-a:spark", "finance")
    assert not _allows(policy, "system:serviceaccount:team-a", "team_a_sales")


def test_exact_and_pattern_entries_combine() -> None:
    doc = {
        "callers": {
            "system:serviceaccount:reporting:*": [{"namespace": "public"}],
            "system:serviceaccount:reporting:spark": [{"namespace": "finance"}],
        }
    }
    policy = CallerPolicy(parse_rules(doc, "policy.yaml"))
    spark = "system:serviceaccount:reporting:spark"
    assert _allows(policy, spark, "finance")
    assert _allows(policy, spark, "public")
    assert not _allows(policy, "system:serviceaccount:reporting:other", "finance")
