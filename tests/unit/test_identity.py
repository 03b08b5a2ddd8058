"""gateway/identity.py: comparing storage locations."""

from __future__ import annotations

from gateway.identity import same_location


def test_same_location_ignores_trailing_slash_scheme_case_and_hadoop_spellings() -> None:
    assert same_location("s3://b/wh/t1/", "s3://b/wh/t1")
    assert same_location("S3A://b/wh/t1", "s3://b/wh/t1/")
    assert not same_location("s3://b/wh/t1", "s3://b/wh/t10")
    assert not same_location("s3://B/wh/t1", "s3://b/wh/t1")  # bucket names are case-sensitive
    assert not same_location("gs://b/wh/t1", "s3://b/wh/t1")
