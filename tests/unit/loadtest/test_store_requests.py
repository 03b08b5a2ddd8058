"""The write benchmark's object-store tally (loadtest/store_requests.py): a write's requests by
type, from two scrapes of the store's Prometheus counters."""

from __future__ import annotations

from collections.abc import Iterator

from devstack.metrics_scrape import Samples, parse
from loadtest.store_requests import StoreRequests, StoreTally


def _scrape(puts: int, put_s: float, *, lists: int = 0, other_bucket_puts: int = 0) -> Samples:
    return parse(f"""
# TYPE SeaweedFS_s3_request_total counter
SeaweedFS_s3_request_total{{bucket="warehouse",code="200",type="PUT"}} {puts - 1}
SeaweedFS_s3_request_total{{bucket="warehouse",code="412",type="PUT"}} 1
SeaweedFS_s3_request_total{{bucket="warehouse",code="200",type="LIST"}} {lists}
SeaweedFS_s3_request_total{{bucket="other",code="200",type="PUT"}} {other_bucket_puts}
SeaweedFS_s3_request_total{{bucket="",code="200",type="IAM-Unified"}} {puts * 3}
SeaweedFS_s3_request_seconds_sum{{bucket="warehouse",type="PUT"}} {put_s}
SeaweedFS_s3_request_seconds_count{{bucket="warehouse",type="PUT"}} {puts}
SeaweedFS_s3_request_seconds_sum{{bucket="warehouse",type="LIST"}} {lists * 0.002}
""")


def test_a_scrape_counts_one_buckets_requests_by_type_whatever_their_status() -> None:
    tally = StoreTally.of(_scrape(10, 0.05, lists=2, other_bucket_puts=7), "warehouse")
    assert tally.requests == {"PUT": 10.0, "LIST": 2.0}  # a refused conditional PUT counts too
    assert tally.seconds == {"PUT": 0.05, "LIST": 0.004}


def test_the_growth_between_two_scrapes_is_what_was_asked_in_between() -> None:
    before = StoreTally.of(_scrape(10, 0.05, lists=2), "warehouse")
    after = StoreTally.of(_scrape(14, 0.07, lists=2, other_bucket_puts=9), "warehouse")
    grew = after.since(before)
    assert grew.requests == {"PUT": 4.0}  # no LIST in between: not listed as zero
    assert round(grew.seconds["PUT"], 6) == 0.02
    # a store restarted in between (its counters back to zero) never reads as negative
    assert StoreTally.of(_scrape(2, 0.01), "warehouse").since(after).requests == {}


def _reader(scrapes: list[Samples]) -> tuple[Iterator[Samples], list[str]]:
    urls: list[str] = []
    it = iter(scrapes)

    def read(url: str) -> Samples:
        urls.append(url)
        return next(it)
    return read, urls  # type: ignore[return-value]


def test_each_labels_writes_average_into_requests_and_store_milliseconds_per_write() -> None:
    # each write: the scrape before it, the one after it, and one more that agrees (settled)
    read, urls = _reader([_scrape(10, 0.05), *[_scrape(13, 0.062, lists=1)] * 2,  # 3 PUT, LIST
                          _scrape(13, 0.062, lists=1), *[_scrape(18, 0.082, lists=1)] * 2,  # 5 PUT
                          _scrape(18, 0.082, lists=1), *[_scrape(19, 0.083, lists=1)] * 2])
    tally = StoreRequests("http://127.0.0.1:9327", "warehouse", read=read)  # type: ignore[arg-type]
    tally.count("datasource append", tally.snapshot())
    tally.count("datasource append", tally.snapshot())
    tally.count("direct append", tally.snapshot())
    assert urls == ["http://127.0.0.1:9327"] * 9
    assert tally.per_write("datasource append") == {
        "writes": 2, "requests": {"LIST": 0.5, "PUT": 4.0},
        "server_ms": {"LIST": 1.0, "PUT": 16.0}}
    assert tally.per_write("direct append") == {
        "writes": 1, "requests": {"PUT": 1.0}, "server_ms": {"PUT": 1.0}}
    assert tally.per_write("direct overwrite") is None


def test_a_write_with_a_failed_scrape_is_left_out_not_counted_as_no_requests() -> None:
    read, _ = _reader([_scrape(10, 0.05), {}, {}, *[_scrape(12, 0.06)] * 2,
                       _scrape(12, 0.06), *[_scrape(14, 0.07)] * 2])
    tally = StoreRequests("http://127.0.0.1:9327", "warehouse", read=read)  # type: ignore[arg-type]
    tally.count("direct append", tally.snapshot())  # the after scrape failed
    tally.count("direct append", tally.snapshot())  # the before scrape failed
    assert tally.per_write("direct append") is None
    tally.count("direct append", tally.snapshot())
    assert tally.per_write("direct append") == {
        "writes": 1, "requests": {"PUT": 2.0}, "server_ms": {"PUT": 10.0}}


def test_the_scrape_after_a_write_waits_for_requests_the_store_records_late() -> None:
    """SeaweedFS records a request after writing its response: the first scrape after a write
    can lack its last LIST. The tally scrapes again until two scrapes agree, and counts it."""
    read, urls = _reader([_scrape(10, 0.05), _scrape(12, 0.06), _scrape(12, 0.06, lists=1),
                          _scrape(12, 0.06, lists=1)])
    tally = StoreRequests("http://127.0.0.1:9327", "warehouse", read=read)  # type: ignore[arg-type]
    tally.count("direct append", tally.snapshot())
    assert tally.per_write("direct append") == {
        "writes": 1, "requests": {"LIST": 1.0, "PUT": 2.0},
        "server_ms": {"LIST": 2.0, "PUT": 10.0}}
    assert len(urls) == 4


def test_a_store_still_busy_is_read_at_most_settle_scrapes_times_after_a_write() -> None:
    from loadtest.store_requests import SETTLE_SCRAPES

    moving = [_scrape(10 + n, 0.05 + n / 100) for n in range(SETTLE_SCRAPES + 1)]
    read, urls = _reader(moving)
    tally = StoreRequests("http://127.0.0.1:9327", "warehouse", read=read)  # type: ignore[arg-type]
    tally.count("direct append", tally.snapshot())
    assert len(urls) == 1 + SETTLE_SCRAPES
    counted = tally.per_write("direct append")
    assert counted is not None
    assert counted["requests"] == {"PUT": float(SETTLE_SCRAPES)}  # the last scrape's count
