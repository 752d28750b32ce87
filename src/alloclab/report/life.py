"""A study of lives' own table: per life and allocator, what its runs kept, gave back and let
creep, what of it the allocator itself holds (resident − live, at the idle phases' ends), and
who was OOM-killed; medians over the runs, from runs.csv alone."""

from __future__ import annotations

from collections import defaultdict

from alloclab.answers import analyse, decide, stats
from alloclab.report.formatting import fmt_num, params
from alloclab.report.tables import Table

MIB = 2**20


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return stats.median(known) if known else None


def life_table(study: analyse.Study, rows: list) -> Table:
    """One line per life and allocator: medians over its valid runs."""
    t = Table("life_memory", "Memory over a server's life: what each allocator keeps (median over runs)",
              ["engine", "life", "allocator", "runs", "steady ops/s", "settled RSS (MiB)", "creep (MiB/cycle)",
               "given back (%)", "of bursts", "half given back (s)", "RSS over the engine's account (MiB)",
               "its growth (MiB/cycle)", "allocator keeps (MiB)", "its growth (MiB/cycle)", "OOM-killed"],
              note="At the end of each idle phase: RSS settled (the median of its samples in the phase's last "
                   "part), RSS over what the engine says it holds, and what the allocator holds that nobody uses "
                   "(its own resident − live, read inside the process under test at the phase's end: by the "
                   "driver, or in a server by liballoclab_account.so; – where the allocator offers no live count, "
                   "as mimalloc 2.0). Creep and growth: least-squares slope over the cycles; given back: MiB given "
                   "back (at most a burst's own) over MiB of a burst's excess, all cycles together but the first "
                   "(its bursts come while the engine warms up), and of how many cycles' bursts it is (a burst "
                   "that fits in what the allocator kept from those before it takes no excess, and the share "
                   "rests on the others); the rest at the last idle end. Killed runs count in OOM-killed, and "
                   "their figures cover the cycles they lived.")
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        groups[(decide.cell_of(r), r.allocator)].append(r)
    order = {a: i for i, a in enumerate(study.allocators)}
    for (cell, alloc), mine in sorted(groups.items(), key=lambda kv: (analyse.sort_key(kv[0][0]),
                                                                        order.get(kv[0][1], 99), kv[0][1])):
        med = {k: _median(r.value(k) for r in mine) for k in (
            "ops_per_s", "settled_rss_bytes", "creep_mib_per_cycle", "given_back_share", "given_back_bursts",
            "half_given_back_s", "overhead_bytes", "overhead_growth_mib_per_cycle", "alloc_kept_bytes",
            "alloc_kept_growth_mib_per_cycle")}
        mib = {k: None if med[k] is None else med[k] / MIB for k in ("settled_rss_bytes", "overhead_bytes",
                                                                      "alloc_kept_bytes")}
        share = None if med["given_back_share"] is None else 100 * med["given_back_share"]
        killed = sum(1 for r in mine if r.own.oom_killed)
        t.add([cell[0], params(cell), alloc, str(len(mine)), fmt_num(med["ops_per_s"], ",.0f"),
               fmt_num(mib["settled_rss_bytes"], ".0f"), fmt_num(med["creep_mib_per_cycle"], "+.1f"),
               fmt_num(share, ".0f"), fmt_num(med["given_back_bursts"], "g"), fmt_num(med["half_given_back_s"], ".1f"),
               fmt_num(mib["overhead_bytes"], ".0f"),
               fmt_num(med["overhead_growth_mib_per_cycle"], "+.1f"), fmt_num(mib["alloc_kept_bytes"], ".0f"),
               fmt_num(med["alloc_kept_growth_mib_per_cycle"], "+.1f"), f"{killed} of {len(mine)}"],
              [cell[0], params(cell), alloc, len(mine), med["ops_per_s"], med["settled_rss_bytes"],
               med["creep_mib_per_cycle"], med["given_back_share"], med["given_back_bursts"], med["half_given_back_s"],
               med["overhead_bytes"],
               med["overhead_growth_mib_per_cycle"], med["alloc_kept_bytes"], med["alloc_kept_growth_mib_per_cycle"],
               killed])
    return t
