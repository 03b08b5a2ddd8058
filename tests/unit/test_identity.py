"""gateway/identity.py: comparing storage locations."""

from __future__ import annotations

from gateway.identity import covers, same_location


def test_same_location_ignores_trailing_slash_scheme_case_and_hadoop_spellings() -> None:
    assert same_location("s3://b/wh/t1/", "s3://b/wh/t1")
    assert same_location("S3A://b/wh/t1", "s3://b/wh/t1/")
    assert not same_location("s3://b/wh/t1", "s3://b/wh/t10")
    assert not same_location("s3://B/wh/t1", "s3://b/wh/t1")  # bucket names are case-sensitive
    assert not same_location("gs://b/wh/t1", "s3://b/wh/t1")


def test_a_prefix_covers_a_location_only_on_a_slash_boundary() -> None:
    # #33 finding 7: `startswith` let `s3://b/t` cover `s3://b/t2`.
    assert covers("s3://b/t", "s3://b/t/data/x.parquet")
    assert covers("s3://b/t/", "s3://b/t")
    assert covers("s3://b/", "s3://b/t2")
    assert covers("S3A://b/t", "s3://b/t/x")
    assert not covers("s3://b/t", "s3://b/t2")
    assert not covers("s3://b/t", "s3://b/t2/x")
    assert not covers("s3://b/t/x", "s3://b/t")
