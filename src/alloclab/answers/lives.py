"""The answers of a study of lives in words: which allocator and setting kept a life
leanest and at what cost in steady throughput, how often each was OOM-killed over the rounds, the
headline of such a study, and its own table (medians over the lives, from runs.csv alone)."""

from __future__ import annotations

from collections import defaultdict

from alloclab.answers import analyse, decide, life, metrics, stats
from alloclab.answers.table import Table, fmt_num, params
from alloclab.answers.wording import short, signed, top
from alloclab.catalog import targets
from alloclab.catalog.names import ENGINES
from alloclab.plan.design import HIGHER, LOWER, UNDECIDED


def leanest(lived: dict[str, list[decide.Verdict]], speed: list[decide.Verdict]) -> str:
    """Which allocator (and setting) a life kept leanest: the one decided lowest on RSS over the
    engine's own account (else on creep, among those not decided higher on it: a setting that
    creeps less but holds four times more is not the leanest), with the allocators its interval
    cannot tell apart and what it cost in steady throughput; the baseline where none is decided
    leaner."""
    fatter = {v.variant for v in lived.get("overhead") or [] if v.verdict == HIGHER}
    for name in ("overhead", "creep"):
        got = [v for v in lived.get(name) or [] if v.variant not in fatter]
        won = [v for v in got if v.verdict == LOWER and v.ci_low is not None]
        if won:
            first = min(won, key=lambda v: v.ratio)
            cost = next((v for v in speed if v.variant == first.variant and v.ratio is not None), None)
            said = (f"leanest over its life ({metrics.words(name)}): {top(got, LOWER, -1)}"
                    + (f"; its steady throughput {short(cost)}" if cost else ""))
            return said
    base = (lived.get("overhead") or lived.get("creep") or next(iter(lived.values())))[0].baseline
    return f"leanest over its life: {base} (none is decided leaner than it on overhead or creep)"


def survived(by_unit: dict[tuple, list], speed: list[decide.Verdict]) -> str:
    """"OOM-killed in rounds: glibc 3 of 8 (cycles 4, 4, 5); jemalloc 0 of 8, fewer kills (McNemar
    p = 0.03)" for a life where any run was killed by its cgroup's OOM killer; "" where none was."""
    def firsts(unit):  # a round's first life of the unit (not its more runs there, decide.in_their_places)
        out: dict[int, object] = {}
        for r in sorted(by_unit.get(tuple(unit), []), key=lambda r: r.index):
            if r.purpose == "measure":
                out.setdefault(r.repeat, r)
        return out

    def rounds(unit):
        return {n: bool(r.own.oom_killed) for n, r in firsts(unit).items()}

    def cycles(unit):
        got = sorted(r.own.oom_cycle for r in firsts(unit).values() if r.own.oom_killed and r.own.oom_cycle)
        return f" (cycle{'s' if len(got) > 1 else ''} {', '.join(map(str, got))})" if got else ""
    if not speed or not any(r.own.oom_killed for v in speed for u in (v.base_unit, v.var_unit)
                            for r in firsts(u).values()):
        return ""
    base = speed[0]
    parts = []
    for v in speed:
        k = life.kills(rounds(v.base_unit), rounds(v.var_unit))
        said = f"{v.variant} {k.var_killed} of {k.rounds}{cycles(v.var_unit)}"
        parts.append(said + ("" if k.p is None else f", {k.word} (McNemar p = {k.p:.2g})"))
    first = rounds(base.base_unit)
    return (f"OOM-killed in rounds: {base.baseline} {sum(first.values())} of {len(first)}"
            f"{cycles(base.base_unit)}; " + "; ".join(parts))


def kills_first(rows: list) -> str:
    """"OOM-killed: glibc in 1 of 1 lives (cycle 1); jemalloc in 1 of 1 (cycle 1). " where a study's
    lives were killed by their cgroup's OOM killer (said before anything else: what a killed life
    measured stops where it died); "" where none was."""
    lives: dict[str, list] = defaultdict(list)
    for r in rows:
        if r.purpose == "measure" and r.value("oom_killed") is not None:
            lives[r.allocator].append(r)
    if not any(r.own.oom_killed for got in lives.values() for r in got):
        return ""
    parts = []
    for alloc, got in lives.items():
        killed = sorted(r.own.oom_cycle or 0 for r in got if r.own.oom_killed)
        at = f" (cycle{'s' if len(killed) > 1 else ''} {', '.join(map(str, killed))})" if any(killed) else ""
        parts.append(f"{alloc} in {len(killed)} of {len(got)}{' lives' if not parts else ''}{at}")
    return "OOM-killed: " + "; ".join(parts) + ". "


def life_headline(lives: dict, by_q: dict, where: str, limit: str) -> str:
    """One sentence for a study of lives: per life, the allocator decided leanest (with its change
    of RSS over the engine's account) and how many memory verdicts are decided; where it holds."""
    parts, decided, total = [], 0, 0
    engines = [(q[1] or q[2], q[-1]) for q in lives]
    for q, lived in lives.items():
        vs = [v for got in lived.values() for v in got]
        total += len(vs)
        decided += sum(v.verdict != UNDECIDED for v in vs)
        over = [v for v in lived.get("overhead", []) if v.verdict == LOWER]
        engine = q[1] or q[2]
        if engines.count((engine, q[-1])) > 1:  # one engine's lives in several shapes or settings: say which
            engine += " " + (q[4].split(" ", 1)[1] if " " in q[4] else q[4])
        if q[-1]:  # answered per machine (their runs disagree): say on which, as the lines under it do
            engine += f" on {q[-1]} alone"
        if over:
            v = min(over, key=lambda v: v.ratio)
            parts.append(f"{engine}: {v.variant} {signed(v.delta_pct)} % over the engine's account")
        else:
            parts.append(f"{engine}: none leaner than {vs[0].baseline}")
    return (f"Leanest over a server's life: {'; '.join(parts)} ({decided} of {total} memory verdicts decided); "
            f"on {where}, {limit}.")


def limit_words(study: analyse.Study) -> str:
    """The memory limit the study's servers ran under, in words."""
    limits = {int(s.get("server_memory_bytes") or 0) for s in (study.plan.get("shapes") or {}).values()}
    limits |= {int(study.plan.get("server_memory_bytes") or 0)}
    limits.discard(0)
    if not limits:
        return "no memory limit"
    return "cgroup limit " + ", ".join(f"{b / 2**20:,.0f} MiB" for b in sorted(limits))


# --- a study of lives' own table: per life and allocator, what its runs kept, gave back and let
# creep, what of it the allocator itself holds, and who was OOM-killed; medians over the runs
MIB = 2**20


def _median(values) -> float | None:
    known = [v for v in values if v is not None]
    return stats.median(known) if known else None


def pooled(engine: str) -> bool:
    """A PostgreSQL life: measured on its pool of sessions."""
    return engine not in ENGINES and targets.parse(engine).kind == "postgres"


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
                   "their figures cover the cycles they lived." + (
                       " On PostgreSQL, RSS is the pool's private memory (RssAnon summed over the backends of the "
                       "sessions held for the whole life) and the engine's account the sum of their memory contexts; "
                       "a backend killed makes the server reset every session (counted as OOM-killed)."
                       if any(pooled(r.engine) for r in rows) else ""))
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
