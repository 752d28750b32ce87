"""The presets whose answer is memory over a server's life: memory-life, memory-cliffs and
small-server (plan.presets lists them with the others)."""

from __future__ import annotations

import os

from alloclab.catalog.allocators import CLIFF_TUNINGS, GLIBC_TWO_ARENAS, JEMALLOC_BACKGROUND, LEAN_TUNINGS
from alloclab.catalog.names import LIFE, NATIVE, SYSBENCH
from alloclab.plan.scales import rounds, seed004_shapes


def memory_life(scale: str) -> dict:
    """Memory over a server's life, on MariaDB (InnoDB), RocksDB embedded in the driver and
    PostgreSQL's pool of sessions: what each allocator (and tuning) keeps, gives back and lets
    creep, and what it costs in speed.

    MariaDB: cycles of sysbench's read/write, a mariadb-dump while the load goes on, a storm of
    short GROUP BY connections, then idle. RocksDB: block-cache churn (uniform reads and writes
    over data about eight times its 16 MiB cache, values of 128 B to 4 KiB), a swarm of 32
    short-lived threads each with its own iterators beside one full scan (a connection storm's
    shape), a flush and full compaction, then idle. PostgreSQL: a pool of 2 x cores + 1 sessions
    (HikariCP's formula) held for the whole life, OLTP read/write on it, every session's reports
    (a hash aggregate, a sort into string_agg) at a work_mem of 32 MiB, CREATE INDEX and VACUUM at
    64 MiB, a storm of short connections, then idle; measured on the pool's private memory.

    The price: each life's steady load alone (part `speed`: the same statements, threads, data and
    server settings on a fresh server; quick: two MariaDB servers of each allocator a round), its
    allocators in turns of 0.1 s (the workload's own slice_s), after the round's lives; side by
    side, a life's throughput is a share of the machine, told and never decided on (Plan.told).
    The rounds go on until memory's verdicts and the speed ones are decided (`decide_on`); quick's
    lives end after 5 rounds (side_by_side_rounds; another --budget scales them: 9 at 1h48m), and
    the steady loads go on alone in the rounds its budget leaves.

    `smoke` (CI): 3 short cycles, glibc and jemalloc, one life after another. `quick` (60 minutes):
    the seeds' four allocators and the two most deployed tunings, lives of 8 cycles (RocksDB's 6),
    the round's lives all side by side, two RocksDB lives and two PostgreSQL pools of each
    allocator a round, creep read once warm (from cycle 2 on), equivalent within ±5 % (±10 points
    given back, ±1 MiB a cycle of creep), one look at the comparisons, after the last round its
    budget affords. `full`: the first hand-measured MariaDB life (5 cycles of 25 s load at 64
    connections, 150-connection storms, 15 s idle), a longer RocksDB life on more data, and every
    tuning the public reports name, a cell's lives side by side. Why each number: DESIGN.md, "memory-life's
    design"."""
    steady = {"smoke": 3.0, "quick": 6.0, "full": 25.0}[scale]
    storm = {"smoke": 20, "quick": 60, "full": 150}[scale]
    idle = {"smoke": 3.0, "quick": 6.0, "full": 15.0}[scale]
    # MariaDB's idle in quick outlasts the leanest tuning's decay: jemalloc+bg5s's background thread
    # turns dirty pages muzzy within 5 s and purges them 5 s later, and muzzy pages (MADV_FREE) still
    # count in RSS until purged, so at 6 s a settled reading caught part of the last burst or none,
    # as the round's company stretched its phases (MariaDB's creep under it swung from -4 to +34 MiB
    # a cycle). At 13 s the reading (the idle's last 20 %, from 10.4 s) comes after both decays.
    # PostgreSQL's backends have no background thread (forked from the postmaster) and RocksDB's
    # comparisons were decided at 5 s: theirs stay
    mariadb_idle = {"smoke": 3.0, "quick": 13.0, "full": 15.0}[scale]
    phases = [
        {"name": "oltp", "kind": "steady", "duration_s": steady, "load": "oltp_read_write"},
        {"name": "dump", "kind": "burst", "burst": "dump", "load": "oltp_read_write",
         "duration_s": {"smoke": 1.0, "quick": 2.0, "full": 5.0}[scale]},
        {"name": "storm", "kind": "burst", "burst": "storm", "connections": storm},
        {"name": "rest", "kind": "idle", "duration_s": mariadb_idle},
    ]
    rocks_phases = [
        {"name": "churn", "kind": "steady", "duration_s": {"smoke": 2.0, "quick": 5.0, "full": 20.0}[scale],
         "load": "mixed"},
        # a swarm of short-lived threads, each with its own iterators (a connection storm's shape:
        # per-thread caches and arenas), beside one full scan
        {"name": "swarm", "kind": "burst", "burst": "scan", "load": "range",
         "threads": {"smoke": 16, "quick": 32, "full": 64}[scale], "duration_s": {"smoke": 1.0, "quick": 2.0,
                                                                                "full": 5.0}[scale]},
        {"name": "compact", "kind": "burst", "burst": "compact"},
        {"name": "rest", "kind": "idle", "duration_s": {"smoke": 2.0, "quick": 5.0, "full": 15.0}[scale]},
    ]
    allocators = {"smoke": ["glibc", "jemalloc"],
                  "quick": ["glibc", "jemalloc", "tcmalloc", "mimalloc", JEMALLOC_BACKGROUND, GLIBC_TWO_ARENAS],
                  "full": ["glibc", "jemalloc", "tcmalloc", "mimalloc", JEMALLOC_BACKGROUND, GLIBC_TWO_ARENAS,
                           *LEAN_TUNINGS]}[scale]
    # PostgreSQL's pool (its size as HikariCP's formula sizes a pool, 2 x cores + 1: 5 on 2 cores):
    # the load on it, reporting queries near work_mem on every session, CREATE INDEX and VACUUM, a
    # storm of short connections, then idle
    pool_phases = [
        {"name": "oltp", "kind": "steady", "duration_s": steady, "load": "oltp_read_write"},
        {"name": "report", "kind": "burst", "burst": "report", "work_mem": "32MiB"},
        {"name": "maint", "kind": "burst", "burst": "maintenance", "work_mem": "64MiB"},
        {"name": "storm", "kind": "burst", "burst": "storm", "connections": storm},
        {"name": "rest", "kind": "idle", "duration_s": idle},
    ]
    # quick: 8 cycles, creep read from the 7 after the first (the engine's warm-up). A settled reading
    # falls where the allocator's last purge left it (jemalloc without its background thread purges
    # only as it allocates: PostgreSQL's pool settled at 156 or 180 MiB from one cycle to the next),
    # and a slope's spread shrinks with the cycles' spread about their mean: 7 warm cycles give it
    # about a quarter of the spread of 3 (sums of squares 28 and 2: 1 / sqrt 14). With 4 cycles, two
    # of MariaDB's five creeps and one of PostgreSQL's stayed open after 7 rounds; with 8, after 4
    # rounds, MariaDB's were all decided. PostgreSQL's pools at 12 (q1, 2026-12-07, docs/results.md):
    # a round of lives 2 minutes longer, and the pools' creeps level off, so their differences to
    # glibc's shrank toward 0 and stayed as open as over 8 cycles
    cycles = {"smoke": 3, "quick": 8, "full": 5}[scale]
    rocks_cycles = {"smoke": 3, "quick": 6, "full": 5}[scale]  # quick: RocksDB's creeps are decided at 6
    # quick: two RocksDB lives and two PostgreSQL pools of each allocator a round. One pool's RSS over
    # its account under mimalloc read 27, 55, 39 and 29 MiB at its idle ends, and the pools of a round
    # differ from each other as much: two a round decided it after 4 rounds where one did not after 7
    per_round = 2 if scale == "quick" else 1
    engines = ["mariadb-innodb", "rocksdb", "postgres"]
    # each life's steady load alone, its allocators in turns (slice_s), between the round's lives: the
    # price in speed of each allocator and setting, decided at the study's margin
    # quick: two fresh MariaDB servers of each allocator a round, all twelve in turns (runs_per_round).
    # Its steady load's ratios to glibc spread 7.5 % a round from one server each (4 rounds, 2026-12-06),
    # about 3.7 % of it within a window (its 0.5 s turns: 12 % apiece) and about as much between two
    # fresh servers; windows of 12 s spread them 7.0-10.3 %, the mean of two servers' 4.3-5.9 %: a
    # second server halves what a longer window cannot reach. Read again over o3-o5's 28 rounds, most of
    # the spread is the turns' own (half the turns: about sqrt 2 more), so the second server buys
    # measured time, as a longer window would (DESIGN.md). Turns of 0.1 s: the host's speed moves
    # within a second, and a cycle of six allocators' 0.5 s turns (3 s) let one allocator meet a slow
    # second the others missed; in turns of 0.1 s (a cycle of 0.6 s) the ratios to glibc spread
    # 0.5-4.2 % a round where turns of 0.5 s spread 1.9-12.3 % in the same rounds (the turns bench,
    # 2026-12-06; 1.2-4.4 % in a study, o7), with the same effects (RocksDB's tcmalloc +8 %, jemalloc
    # +5 %) and against runs alone within 3 % (MariaDB's jemalloc and mimalloc 2.0 and 2.6 % low over 138
    # rounds, told apart; the rest not; DESIGN.md)
    window = {"smoke": 2.0, "quick": 6.0, "full": 20.0}[scale]
    alone = {"part": "speed", "duration_s": window, "slice_s": 0.1}
    oltp = {**alone, "workload": SYSBENCH, "test": ["oltp_read_write"], "client": [NATIVE], "profile": "life",
            "tables": {"smoke": 2, "quick": 4, "full": 4}[scale],
            "table_size": {"smoke": 2_000, "quick": 20_000, "full": 20_000}[scale]}
    return {
        "name": "memory-life",
        "engines": engines,
        "allocators": allocators,
        **rounds(scale, "60m"),
        # quick: the lives in the first 5 rounds (8 cycles' lives decided as many memory verdicts in 4
        # rounds as 4 cycles' in 7), the steady loads alone on through the rounds the budget then
        # affords (10-11 in all at 2 cores); one look, after the last round, at the plain 95 %: looks before
        # it decided few
        **({"looks": 1, "side_by_side_rounds": 5} if scale == "quick" else {}),
        "warmup_s": {"smoke": 0.5, "quick": 1.0, "full": 2.0}[scale],  # the speed runs' (a life has its own)
        # the round's lives all at once (quick), a cell's (full): see the docstring
        **({"side_by_side": len(allocators) * (1 + 2 * per_round if scale == "quick" else 1)}
           if scale != "smoke" else {}),
        # the rounds go on for memory's verdicts; throughput, a share of the machine, is told as it stands
        "decide_on": ["creep", "given_back", "overhead", "throughput"],
        # quick's coarser bar (see the docstring); full and smoke keep ±2 % and given back's ±5 points
        **({"margin_pct": 5.0, "margins_pct": {"given_back": 10.0}} if scale == "quick" else {}),
        # RocksDB's: a 16 MiB block cache and 8 MiB memtables (of data about 8x the cache)
        "engine_options": {"block_cache_bytes": "16MiB", "memtable_bytes": "8MiB", "sync": "none",
                           "compression": "none"},
        "workloads": [{"part": LIFE, "workload": LIFE, "engines": ["mariadb-innodb"],
                       "cycles": cycles, "phases": phases,
                       "threads": {"smoke": [8], "quick": [16], "full": [64]}[scale],
                       "tables": {"smoke": 2, "quick": 4, "full": 4}[scale],
                       "table_size": {"smoke": 2_000, "quick": 20_000, "full": 20_000}[scale]},
                      {"part": LIFE, "workload": LIFE, "engines": ["rocksdb"], "cycles": rocks_cycles,
                       "phases": rocks_phases, "threads": [2], "pattern": ["uniform"], "key_bytes": [16],
                       "value_bytes": [4096], "value_bytes_min": 128,
                       "keyspace": {"smoke": 20_000, "quick": 60_000, "full": 250_000}[scale],
                       **({"runs_per_round": per_round} if per_round > 1 else {})},
                      {"part": LIFE, "workload": LIFE, "engines": ["postgres"], "cycles": cycles,
                       "phases": pool_phases, "threads": [2 * len(os.sched_getaffinity(0)) + 1],
                       "tables": {"smoke": 2, "quick": 4, "full": 4}[scale],
                       "table_size": {"smoke": 2_000, "quick": 20_000, "full": 20_000}[scale],
                       **({"runs_per_round": per_round} if per_round > 1 else {})},
                      {**oltp, "engines": ["mariadb-innodb"],
                       "threads": {"smoke": [8], "quick": [16], "full": [64]}[scale],
                       **({"runs_per_round": 2} if scale == "quick" else {})},
                      {**alone, "workload": "mixed", "engines": ["rocksdb"], "threads": [2], "pattern": ["uniform"],
                       "key_bytes": [16], "value_bytes": [4096], "value_bytes_min": 128,
                       "keyspace": {"smoke": 20_000, "quick": 60_000, "full": 250_000}[scale]},
                      {**oltp, "engines": ["postgres"], "threads": [2 * len(os.sched_getaffinity(0)) + 1]}],
    }


def memory_cliffs(scale: str) -> dict:
    """memory-life's MariaDB and RocksDB lives with the settings public reports found a cliff at
    (catalog.allocators.CLIFF_TUNINGS: one arena, purging at once, decommitting at once), each on
    the frontier of memory saved against speed lost. One RocksDB life of each a round (22 lives
    side by side), then each steady load alone in turns; smoke: glibc and one arena."""
    # its looks: plan_looks' own; its lives in every round (memory-life's 7 were measured for its allocators)
    plan = {k: v for k, v in memory_life(scale).items() if k not in ("looks", "side_by_side_rounds")}
    allocators = ["glibc", "glibc+MALLOC_ARENA_MAX=1"] if scale == "smoke" else [
        "glibc", "jemalloc", "tcmalloc", "mimalloc", *CLIFF_TUNINGS]
    engines = ["mariadb-innodb", "rocksdb"]
    workloads = [{k: v for k, v in w.items() if k != "runs_per_round"} for w in plan["workloads"]
                 if w["engines"][0] in engines]
    return {**plan, "name": "memory-cliffs", "engines": engines, "allocators": allocators, "workloads": workloads,
            **rounds(scale, "90m"), **({"side_by_side": len(allocators) * len(engines)} if scale != "smoke" else {})}


def small_server(scale: str) -> dict:
    """Seed 004's small servers, answering speed and memory together: memory-life's
    MariaDB life (its steady throughput is the speed answer; creep, given back, overhead and OOM
    kills the memory answer) with the server in seed 004's shapes, scaled to this machine: 1 core
    and 2 GiB; 4 cores and 1 GiB (as many cores as leave one for the client); and the 1 GiB shape
    scaled to this life's footprint, 320 MiB (the life holds a 128 MiB buffer pool and settled at
    200-350 MiB here), where what an allocator keeps meets the limit and the OOM killer answers.
    The seed's four allocators (smoke: glibc and jemalloc), a cell's lives side by side."""
    allocators = ["glibc", "jemalloc"] if scale == "smoke" else ["glibc", "jemalloc", "tcmalloc", "mimalloc"]
    return {
        "name": "small-server",
        "engines": ["mariadb-innodb"],
        "allocators": allocators,
        **rounds(scale, "30m"),
        **({"side_by_side": len(allocators)} if scale != "smoke" else {}),
        "shapes": seed004_shapes("1GiB", "320MiB"),
        # memory-life's MariaDB life (its first table on MariaDB; the steady load alone follows it)
        "workloads": [w for w in memory_life(scale)["workloads"] if w["engines"] == ["mariadb-innodb"]][:1],
    }
