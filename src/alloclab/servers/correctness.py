"""Reads a workload depends on, checked on a server before its data is prepared: numbers
measured on an engine that returns wrong results measure work that never happened.

One restart covers every check (so the rows are in the engine's files, not its write buffer):
- string index (a failure): TPC-C's Payment and Order-Status find a customer by last name
  through a secondary index on (w, d, last, first). 3,000 rows of 50 names, every name looked up
  through the index and counted by a scan. TideSQL on TidesDB <= 9.2.0 finds none of the rows
  of most names (its block index keeps a 16-byte key prefix): the study's runs on that target
  fail with the sentence `check` returns.
- backward reads (notes): the last row of a key prefix read backwards, as `ORDER BY id DESC
  LIMIT 1` through a secondary index (w, d, c, id) and `MAX(b) ... WHERE a = ?` over a primary
  key (a, b) ask for it. TideSQL (every build here) answers NULL for most of them. alloclab's
  TPC-C reads forward only (Order-Status reads a customer's orders in o_id order and keeps the
  last; the consistency check scans), so this is a note for the report, not a failure.
"""

from __future__ import annotations

import random

from alloclab.alloc import environment
from alloclab.catalog import tidesql
from alloclab.core.errors import AlloclabError

DATABASE = "alloclab_probe"
NAMES, PER_NAME = 50, 60
DISTRICTS, CUSTOMERS, ORDERS = 2, 1000, 3000


def _restart(srv) -> None:
    if not srv.stop():
        raise AlloclabError(f"{srv.target.name} did not shut down cleanly during its correctness check: "
                            f"{srv.log_tail()}")
    srv.start(environment.clean())


def _what(target) -> str:
    if target.tidesql:
        return f"{target.name} ({tidesql.build(target.tidesql).describe()})"
    return target.name


def _rows(srv, sql: str) -> list[list[str]]:
    return [line.split("\t") for line in srv.sql(sql, DATABASE).splitlines() if line]


def check(srv) -> tuple[str | None, list[str]]:
    """(why the target's runs cannot be trusted, or None; notes of defects the workloads avoid).
    Restarts the server once."""
    t = srv.target
    srv.sql(f"CREATE DATABASE {DATABASE}")
    srv.sql(f"CREATE TABLE c (w INT, d INT, id INT, last VARCHAR(16), first VARCHAR(16), bal INT, "
            f"PRIMARY KEY (w, d, id), KEY c_by_name (w, d, last, first)) ENGINE={t.engine}", DATABASE)
    srv.sql("INSERT INTO c VALUES " + ",".join(f"(1, 1, {i}, 'NAME{i % NAMES}', 'F{i}', 0)"
                                               for i in range(NAMES * PER_NAME)), DATABASE)
    srv.sql(f"CREATE TABLE o (w INT, d INT, id INT, c INT, PRIMARY KEY (w, d, id), KEY o_by_c (w, d, c, id)) "
            f"ENGINE={t.engine}", DATABASE)
    rnd = random.Random(1)
    for d in range(1, DISTRICTS + 1):  # every customer has orders, ids in a random order of customers
        owner = [1 + i % CUSTOMERS for i in range(ORDERS)]
        rnd.shuffle(owner)
        srv.sql("INSERT INTO o VALUES " + ",".join(f"(1, {d}, {i + 1}, {c})" for i, c in enumerate(owner)), DATABASE)
    _restart(srv)
    try:
        return _string_index(srv), [n for n in (_backward_secondary(srv), _max_of_primary_prefix(srv)) if n]
    finally:
        srv.sql(f"DROP DATABASE {DATABASE}")


def _string_index(srv) -> str | None:
    t = srv.target
    counts = [int(srv.sql(f"SELECT COUNT(*) FROM c FORCE INDEX (c_by_name) WHERE w = 1 AND d = 1 AND "
                          f"last = 'NAME{i}'", DATABASE)) for i in range(NAMES)]
    scanned = int(srv.sql("SELECT COUNT(*) FROM c IGNORE INDEX (c_by_name) WHERE last = 'NAME0'", DATABASE))
    collation = srv.sql(f"SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{DATABASE}' "
                        "AND TABLE_NAME = 'c'").strip()
    wrong = [(i, n) for i, n in enumerate(counts) if n != PER_NAME]
    if not wrong and scanned == PER_NAME:
        return None
    shown = ", ".join(f"NAME{i}: {n}" for i, n in wrong[:4]) + (" ..." if len(wrong) > 4 else "")
    why = (f"{_what(t)} returns wrong results through a string secondary index: after a restart, {len(wrong)} of "
           f"{NAMES} last names find fewer than their {PER_NAME} rows through an index on (w, d, last VARCHAR, first) "
           f"({shown}; {collation}) while a scan finds {scanned}; TPC-C finds customers by last name this way, so its "
           "runs on this target would count transactions that found nobody")
    if t.tidesql:
        b = tidesql.build(t.tidesql)
        if b.wrong_results:
            fixed = tidesql.BUILDS[tidesql.FIXED_BUILD]
            why += (f". TidesDB {b.tidesdb}'s block index keeps a 16-byte key prefix (fixed in TidesDB "
                    f"{tidesql.FIRST_FIXED_TIDESDB}): mariadb11-tidesdb@{fixed.name} is {fixed.describe()}, "
                    f"mariadb11-tidesdb {tidesql.BUILDS[tidesql.DEFAULT_BUILD].describe()}")
    return why


def _backward_secondary(srv) -> str | None:
    """The last order of every customer through (w, d, c, id) read backwards, against a scan."""
    missed = 0
    for d in range(1, DISTRICTS + 1):
        last = dict(_rows(srv, f"SELECT c, MAX(id) FROM o IGNORE INDEX (o_by_c, PRIMARY) WHERE w = 1 AND d = {d} "
                               "GROUP BY c"))
        got = dict(_rows(srv, f"SELECT cc.c, (SELECT id FROM o FORCE INDEX (o_by_c) WHERE w = 1 AND d = {d} AND "
                              f"o.c = cc.c ORDER BY id DESC LIMIT 1) FROM (SELECT DISTINCT c FROM o IGNORE INDEX "
                              f"(o_by_c) WHERE w = 1 AND d = {d}) cc"))
        missed += sum(1 for c, i in last.items() if got.get(c) != i)
    if not missed:
        return None
    return (f"{_what(srv.target)} reads a secondary index backwards wrongly: after a restart, "
            f"`ORDER BY id DESC LIMIT 1` through an index on (w, d, c, id) misses the last row of {missed} of "
            f"{DISTRICTS * CUSTOMERS} customers "
            "(a scan finds every one). TPC-C's Order-Status asks for a customer's last order: alloclab's reads it "
            "forwards (and fails a run that finds none); HammerDB's OSTAT, `o_id = (SELECT max(o_id) ...)`, would "
            "find no order and commit")


def _max_of_primary_prefix(srv) -> str | None:
    got = srv.sql("SELECT COALESCE(MAX(id), 0) FROM o WHERE w = 1 AND d = 2", DATABASE).strip()
    if got == str(ORDERS):
        return None
    return (f"{_what(srv.target)} answers `MAX(id) ... WHERE w = 1 AND d = 2` over the primary key (w, d, id) with "
            f"{'NULL' if got == '0' else got} where the rows hold {ORDERS}: alloclab's consistency check scans "
            "instead")
