"""Presets: each study of shared/studies.md as a plan, sized by a scale.

A preset is only data: the same dictionary a TOML plan file would hold.
"""

from __future__ import annotations

from alloclab.errors import AlloclabError

SCALES = ("smoke", "quick", "full")


def kv_allocators(scale: str) -> dict:
    """Study 2 (seed 001): TidesDB's benchtool allocator suite, nine parts.

    `full` uses the benchtool script's standard operation count (5,000,000 per test, large
    values /10 and /50, deletes /2); `quick` keeps the design with far fewer operations so
    that 3 engines x 5 allocators finish in minutes on 2 cores; `smoke` is for tests.
    """
    n = {"smoke": 2_000, "quick": 50_000, "full": 5_000_000}[scale]
    threads = [1, 4, 8, 16]
    parts = [
        # 1. small-value churn: many small unbatched allocations
        dict(part="churn_small", workload="write", pattern="random", key_bytes=16, value_bytes=64, batch=1,
             threads=threads, ops=n),
        # 2. contention: allocator lock contention
        dict(part="contention", workload="write", pattern="random", batch=100, threads=threads, ops=n),
        # 3. mixed read/write
        dict(part="mixed", workload="mixed", pattern="random", batch=100, threads=threads, ops=n),
        # 4. large values
        dict(part="large_4kb", workload="write", pattern="random", key_bytes=64, value_bytes=4096, batch=100,
             threads=8, ops=max(n // 10, 100)),
        dict(part="large_64kb", workload="write", pattern="random", key_bytes=64, value_bytes=65536, batch=10,
             threads=8, ops=max(n // 50, 10)),
        # 5. batch size impact
        dict(part="batch", workload="write", pattern="random", batch=[1, 100, 1000], threads=8, ops=n),
        # 6. sequential vs random
        dict(part="seq_vs_random", workload="write", pattern=["seq", "random"], batch=1000, threads=8, ops=n),
        # 7. zipfian (hot keys)
        dict(part="zipfian", workload="write", pattern="zipfian", batch=1000, threads=8, ops=n),
        dict(part="zipfian_mixed", workload="mixed", pattern="zipfian", batch=100, threads=8, ops=n),
        # 8. read-heavy after a populate phase
        dict(part="read_random", workload="read", pattern="random", batch=1, threads=8, ops=n),
        # 9. delete after populate (memory reclamation)
        dict(part="delete", workload="delete", pattern="seq", batch=1000, threads=8, ops=n // 2,
             keyspace=n // 2),
    ]
    return {
        "name": "kv-allocators",
        "engines": ["tidesdb", "rocksdb", "sqlite"],
        "runs": {"smoke": 1, "quick": 1, "full": 3}[scale],
        "warmup_s": {"smoke": 0.0, "quick": 0.2, "full": 2.0}[scale],
        "engine_options": {
            "memtable_bytes": "64MiB",
            "block_cache_bytes": "64MiB",
            "sync": "none",
            "compression": "none",
        },
        "workloads": parts,
    }


PRESETS = {
    "kv-allocators": (kv_allocators, "study 2: TidesDB benchtool allocator suite on embedded engines"),
}


def preset(name: str, scale: str) -> dict:
    if name not in PRESETS:
        raise AlloclabError(f"unknown preset '{name}'", "choose one of: " + ", ".join(PRESETS))
    if scale not in SCALES:
        raise AlloclabError(f"unknown scale '{scale}'", "choose one of: " + ", ".join(SCALES))
    plan = PRESETS[name][0](scale)
    plan["preset"] = name
    plan["scale"] = scale
    return plan
