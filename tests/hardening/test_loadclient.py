"""The load client's audit: what counts as expired, below the floor, or unknown."""

from __future__ import annotations

from hardening.loadclient import LoadStats, aws_expiry_ms, expiries_from_credentials

NOW = 1_800_000_000.0


def test_expired_and_below_floor_are_counted_separately() -> None:
    stats = LoadStats(surface="http")
    stats.served([int((NOW - 1) * 1000)], NOW, floor_s=300, tolerance_s=2)
    stats.served([int((NOW + 100) * 1000)], NOW, floor_s=300, tolerance_s=2)
    stats.served([int((NOW + 299) * 1000)], NOW, floor_s=300, tolerance_s=2)  # within tolerance
    stats.served([int((NOW + 3600) * 1000)], NOW, floor_s=300, tolerance_s=2)
    assert (stats.ok, stats.expired, stats.below_floor) == (4, 1, 1)
    assert stats.min_remaining_s == -1.0


def test_the_earliest_of_all_claimed_expiries_is_audited() -> None:
    # The summary says one hour, the credential itself says one second ago: that is expired.
    creds = [
        {
            "expires_at_ms": 0,
            "config": {"s3.session-token-expires-at-ms": str(int((NOW - 1) * 1000))},
        }
    ]
    stats = LoadStats(surface="grpc")
    stats.served(
        expiries_from_credentials(creds, int((NOW + 3600) * 1000)), NOW, floor_s=300, tolerance_s=2
    )
    assert stats.expired == 1


def test_answers_without_any_expiry_are_counted_not_trusted() -> None:
    stats = LoadStats(surface="http")
    stats.served(
        expiries_from_credentials([{"config": {"s3.access-key-id": "x"}}], None), NOW, 300, 2
    )
    assert (stats.ok, stats.no_expiry, stats.expired) == (1, 1, 0)


def test_aws_expiration_is_read_as_utc() -> None:
    assert aws_expiry_ms({"Expiration": "2027-01-15T08:00:00Z"}) == [1_800_000_000_000]
    assert aws_expiry_ms({}) == []


def test_remembered_secrets_are_bounded_and_deduplicated() -> None:
    stats = LoadStats(surface="http")
    for i in range(200):
        stats.remember(
            {"s3.access-key-id": f"ASIA{i:016d}", "s3.secret-access-key": "same-secret-value"}
        )
    assert len(stats.planted) == 64
    assert stats.planted.count("same-secret-value") == 1


def test_errors_are_attributed_to_the_surface_that_saw_them() -> None:
    stats = LoadStats(surface="aws")
    stats.error("http_503", NOW)
    stats.error("http_503", NOW + 1)
    assert stats.errors_by_kind == {"aws:http_503": 2}
    assert stats.error_times == [NOW, NOW + 1]
