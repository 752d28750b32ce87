"""The workloads, one module each (go-tpc's `Workloader`), registered with plan.workload when
this package is imported (every entry point imports it):

    tpcc.py    TPC-C: alloclab's client (procedures, statements, rows) or HammerDB's TPROC-C
    oltp.py    sysbench's OLTP tests against a server: the real sysbench or the driver natively
    kv.py      the key-value suite of TidesDB's benchtool on an embedded engine
    life.py    memory over a server's life: cycles of a steady load, bursts and idle

Each owns its plan keys and their validation, its cells and labels, its driver arguments, its
kinds of run (what it starts, its client, its golden data), its CLI flags, its headline metric
and its report section. Adding a workload is adding a module here and its object to ALL.
"""

from alloclab.plan.workload import every, of, register
from alloclab.workloads import kv, life, oltp, tpcc

# the order plan validation checks a table's keys in, and the order of the report's sections
ALL = (tpcc.TPCC_WORKLOAD, oltp.OLTP_WORKLOAD, kv.KV, life.LIFE_WORKLOAD)
for _w in ALL:
    register(_w)

__all__ = ["ALL", "every", "kv", "life", "of", "oltp", "tpcc"]
