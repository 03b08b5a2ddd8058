"""The knobs of a bench run: `STANDARD` (what `make bench` runs, < ~10 min on 2 cores) and
`QUICK` (a smoke run of every scenario in about five minutes; the outage
timeline is the same, because it is pinned to the token and credential lifetimes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """Sizes and durations of every scenario (all bounded)."""

    name: str
    token_ttl_s: int = 90  # IdP access-token lifetime of the bench stack
    # 1. cold herd
    herd_ks: tuple[int, ...] = (1, 10, 100, 1_000, 10_000)
    herd_upstream_latency_ms: float = 50.0
    herd_processes: int = 4
    # A herd up to this K is repeated (each on a fresh table, each followed by the trivial
    # server's burst) and reported by its median repeat: the p99 of 10 requests is their
    # slowest one, and a single stall decided a target.
    herd_repeats: int = 5
    herd_repeat_max_k: int = 1_000
    # 2. surfaces
    surface_concurrencies: tuple[int, ...] = (1, 16, 64)
    surface_pairs: int = 5  # (gateway, trivial server) pairs per concurrency
    surface_duration_s: float = 1.5  # per side of a pair
    surface_slice_s: float = 0.2  # a pair alternates between its two servers this often
    surface_warmup_s: float = 0.5
    surface_open_duration_s: float = 4.0
    surface_processes: int = 2
    surface_profile_s: float = 6.0  # py-spy sampling per surface (`--profile` only)
    # 2b. Spark writes: the data source vs the same write made directly (per format and mode)
    write_rows: int = 100_000
    write_formats: tuple[str, ...] = ("parquet", "delta", "lance", "iceberg")
    write_partitions: tuple[int, ...] = (8, 200)
    write_pairs: int = 3  # every cell runs at least these (its share of the budget allowing)
    write_pairs_max: int = 9  # a quick cell runs more, while it has run under write_cell_s
    write_cell_s: float = 60.0
    # Within a pair the two sides alternate, up to write_side_max writes each, until each has
    # written write_side_s: a pair of 0.3 s writes is five of each, one of 7 s writes one.
    write_side_s: float = 1.5
    write_side_max: int = 5
    write_budget_s: float = 1500.0  # past its share of this, a cell runs no further pair
    # 3. executors
    exec_processes: int = 4
    exec_per_process: int = 100
    exec_tables: int = 50
    exec_duration_s: float = 30.0
    exec_think_s: float = 0.005
    # Time-compressed credential lifetime for executors and scaling: the advertised lifetime,
    # refresh lead and serve floor keep the proportions of deploy/k8s (3600 / 900 / 300 s is
    # 1 : 1/4 : 1/12; here 10 : 2 : 1 s, so the 50-100 % lifetime the catalog serves from its
    # own cache still leaves room above the lead).
    exec_lifetime_s: int = 10
    exec_refresh_lead_s: float = 2.0
    exec_min_remaining_s: float = 1.0
    # 3b. scaling: N gateways ("nodes") x E executors per node, one catalog
    scaling_nodes: tuple[int, ...] = (1, 2, 4)
    scaling_executors: tuple[int, ...] = (10, 100, 1_000)
    scaling_tables: int = 10
    scaling_duration_s: float = 20.0
    scaling_think_s: float = 0.02
    scaling_processes: int = 2
    # 4. refresh soak (time-compressed)
    soak_duration_s: float = 75.0
    soak_lifetime_s: int = 30
    soak_min_remaining_s: float = 4.0
    soak_refresh_lead_s: float = 10.0
    soak_keys: int = 10
    soak_executors: int = 40
    soak_warmup_s: float = 5.0
    # 5. outage
    outage_lifetime_s: int = 60
    outage_min_remaining_s: float = 3.0
    outage_refresh_lead_s: float = 22.0
    outage_catalog_start_s: float = 30.0  # after the warm-up fetch
    outage_catalog_s: float = 15.0
    outage_idp_start_s: float = 50.0  # the gateway's token refresh (80 % of 90 s) falls inside
    outage_idp_s: float = 35.0
    outage_keys: int = 10
    outage_executors: int = 20
    recovery_cap_s: float = 120.0
    # 6. capacity
    capacity_keys: int = 10_000
    capacity_lifetime_s: int = 60
    capacity_refresh_lead_s: float = 40.0
    capacity_idle_s: float = 8.0
    capacity_observe_s: float = 25.0
    capacity_idle_keys: int = 1_000
    # 7. signing (loadtest/scenarios/signing.py)
    signing_files: int = 8
    signing_rows_per_file: int = 50_000
    signing_rounds: int = 9
    signing_latency_n: int = 300
    signing_concurrency: int = 16
    signing_duration_s: float = 4.0


STANDARD = Profile(name="standard")

QUICK = Profile(
    name="quick",
    herd_ks=(1, 10, 100, 1_000),
    surface_concurrencies=(1, 32),
    surface_pairs=3,
    surface_duration_s=1.0,
    surface_open_duration_s=2.0,
    surface_profile_s=4.0,
    exec_processes=2,
    exec_per_process=50,
    exec_tables=20,
    exec_duration_s=10.0,
    scaling_nodes=(1, 2),
    scaling_executors=(10, 100),
    scaling_duration_s=10.0,
    soak_duration_s=35.0,
    soak_lifetime_s=20,
    soak_refresh_lead_s=7.0,
    soak_min_remaining_s=3.0,
    capacity_keys=1_000,
    capacity_observe_s=22.0,
    capacity_idle_keys=200,
    write_rows=40_000,
    write_partitions=(8, 50),
    write_pairs=1,
    write_pairs_max=1,
    write_side_max=1,
    write_budget_s=600.0,
)
