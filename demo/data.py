"""A raw "orders" drop as it might arrive from an upstream system: several CSV files, some dirt.

Why dirty: the pipeline's cleaning step must have something to do, and the expected row counts
after cleaning must be known exactly, so the generator returns them alongside the data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta

import pyarrow as pa

COUNTRIES = ("DE", "FR", "NL", "US", "BR", "JP", "IN", "ZA")
PRODUCTS = ("widget", "gadget", "sprocket", "gizmo", "doohickey", "flange")


@dataclass(frozen=True)
class Drop:
    """The raw files and the facts a correct cleaning step must reproduce."""

    files: tuple[pa.Table, ...]
    raw_rows: int
    clean_rows: int
    customers: int
    country_days: int


def generate(rows: int, files: int, seed: int = 7) -> Drop:
    """``rows`` raw order lines split over ``files`` CSV files.

    Dirt: about 2% duplicated order lines (same ``order_id``), 1% with no customer, 1% with a
    non-positive quantity, and country codes in mixed case with stray spaces.
    """
    rng = random.Random(seed)  # noqa: S311 -- reproducible demo data, not a secret
    start = date(2026, 10, 1)
    records: list[dict[str, object]] = []
    clean: dict[int, tuple[str, str, date]] = {}
    order_id = 100_000
    while len(records) < rows:
        if records and rng.random() < 0.02:
            records.append(dict(rng.choice(records)))  # duplicate delivery of an earlier line
            continue
        order_id += 1
        country = rng.choice(COUNTRIES)
        day = start + timedelta(days=rng.randrange(30))
        customer = f"c{rng.randrange(1, 600):04d}" if rng.random() >= 0.01 else ""
        quantity = rng.randrange(1, 20) if rng.random() >= 0.01 else rng.choice((0, -1, -5))
        records.append(
            {
                "order_id": order_id,
                "order_date": day.isoformat(),
                "customer_id": customer,
                "country": _mess_up(country, rng),
                "product": rng.choice(PRODUCTS),
                "quantity": quantity,
                "unit_price": round(rng.uniform(1.0, 250.0), 2),
            }
        )
        if customer and quantity > 0:
            clean[order_id] = (customer, country, day)
    per_file = -(-len(records) // files)
    tables = tuple(
        pa.Table.from_pylist(records[i : i + per_file]) for i in range(0, len(records), per_file)
    )
    return Drop(
        files=tables,
        raw_rows=len(records),
        clean_rows=len(clean),
        customers=len({c for c, _, _ in clean.values()}),
        country_days=len({(k, d) for _, k, d in clean.values()}),
    )


def _mess_up(country: str, rng: random.Random) -> str:
    variant = rng.random()
    if variant < 0.1:
        return f" {country.lower()}"
    if variant < 0.2:
        return f"{country.title()} "
    return country
