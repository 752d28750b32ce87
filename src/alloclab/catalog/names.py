"""Every name a plan may use for engines and workloads: what each key of a plan accepts.

Embedded engines run inside alloclab's driver; servers are catalog.targets'; TideSQL builds
catalog.tidesql's.
"""

from __future__ import annotations

# embedded engines (the driver's); the `null` engine stores nothing and tests the harness
ENGINES = ("tidesdb", "rocksdb", "sqlite", "null")
DEFAULT_ENGINES = ("tidesdb", "rocksdb", "sqlite")  # a plan that names none
KV_WORKLOADS = ("write", "read", "mixed", "delete", "seek", "range")
TPCC = "tpcc"
SYSBENCH = "sysbench"  # sysbench's OLTP tests against a server (the workload), and sysbench itself (a client)
LIFE = "life"  # memory over a server's life: cycles of steady load, bursts and idle
WORKLOADS = KV_WORKLOADS + (TPCC, SYSBENCH, LIFE)
# sysbench's OLTP tests, run by the real sysbench or natively by alloclab's driver
SYSBENCH_TESTS = ("oltp_point_select", "oltp_read_only", "oltp_read_write")
NATIVE = "native"  # alloclab's own client, the driver
HAMMERDB = "hammerdb"  # HammerDB's TPROC-C, the seeds' client
HAMMERDB_VERSION = "4.12"
SYSBENCH_CLIENTS = (SYSBENCH, NATIVE)
TPCC_ENGINES = ("tidesdb", "rocksdb", "sqlite")
TPCC_MIXES = ("spec", HAMMERDB)
# TPC-C's clients: alloclab's own (native) or HammerDB (its TPROC-C, against MariaDB)
TPCC_CLIENTS = (NATIVE, HAMMERDB)
# how the client drives TPC-C: one CALL per transaction (servers' default, as HammerDB),
# prepared set-based statements (SQL engines), or row at a time (every engine)
TPCC_MODES = ("procedures", "statements", "rows")


def default_tpcc_mode(engine: str) -> str:
    return "rows" if engine in ENGINES else "procedures"


PATTERNS = ("seq", "random", "zipfian", "uniform")
SYNC = ("none", "full")
COMPRESSION = ("none", "lz4", "zstd")


# a life's phases: what each kind runs, and the bursts a MariaDB life knows
LIFE_PHASE_KINDS = ("steady", "burst", "idle")
# a server's bursts: mariadb-dump to nowhere; short GROUP BY connections; one big GROUP BY
LIFE_SERVER_BURSTS = ("dump", "storm", "groupby")
# an embedded engine's (the driver's `life`): flush and compact everything; one iterator over every key
LIFE_ENGINE_BURSTS = ("compact", "scan")
# PostgreSQL's, on its pool (clients/pglife.py): hash aggregates and sorts near work_mem on every
# session; CREATE INDEX and VACUUM at maintenance_work_mem; short GROUP BY connections
LIFE_POOL_BURSTS = ("report", "maintenance", "storm")
LIFE_POOL_LOADS = ("oltp_read_only", "oltp_read_write")
LIFE_BURSTS = tuple(dict.fromkeys(LIFE_SERVER_BURSTS + LIFE_ENGINE_BURSTS + LIFE_POOL_BURSTS))
# the metrics verdicts are made on, and what a study's rounds may go on for: catalog.metrics
