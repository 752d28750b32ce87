"""The figures the seeds published, shown beside a preset's own as shape references, and what a
reader of them must know about the engine they came from."""

from __future__ import annotations

from alloclab.catalog import tidesql

# The seeds' published figures, shown beside ours as shape references (../shared/studies.md):
# preset -> target -> allocator -> NOPM. Their hardware differs: compare shapes, not levels.
PUBLISHED = {
    "tpcc-allocators": {
        "source": "seed 000: MariaDB 11.8.6, HammerDB, 40 warehouses, 8 VU, 2 runs per cell",
        "mariadb11-innodb": {"glibc": 16_900, "mimalloc": 16_600},
        "mariadb11-tidesdb": {"glibc": 68_800, "jemalloc": 75_100, "mimalloc": 42_700, "tcmalloc": 74_500},
    },
}


def published_caveats(plan: dict, engines: list[str]) -> list[str]:
    """What a reader of the published figures must know about the engine they came from."""
    if "mariadb11-tidesdb" not in PUBLISHED.get(plan.get("preset") or "", {}) \
            or not any(e.startswith("mariadb11-tidesdb") for e in engines):
        return []
    seed, fixed = tidesql.BUILDS[tidesql.SEED_BUILD], tidesql.BUILDS[tidesql.FIXED_BUILD]
    ours = "; ".join(f"{e} is {tidesql.build(e.partition('@')[2] or None).describe()}"
                     for e in engines if e.startswith("mariadb11-tidesdb"))
    return [f"The seeds' TidesDB figures came from {seed.describe()}, which returns wrong results through string "
            f"secondary indexes once rows reach its SSTables (most by-last-name lookups find nobody, and HammerDB's "
            f"procedures commit such transactions as work); TidesDB {tidesql.FIRST_FIXED_TIDESDB} fixed it "
            f"(mariadb11-tidesdb@{fixed.name} is {fixed.describe()}). Here {ours}."]
