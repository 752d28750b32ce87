"""The answers of a study of lives in words: which allocator and setting kept a life
leanest and at what cost in steady throughput, how often each was OOM-killed over the rounds, the
headline of such a study, and its own table (medians over the lives, from runs.csv alone)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from alloclab.answers import analyse, decide, life, metrics, stats
from alloclab.answers.table import Table, fmt_num, params
from alloclab.answers.wording import short, signed, top
from alloclab.catalog import targets
from alloclab.catalog.allocators import short_name
from alloclab.catalog.names import ENGINES
from alloclab.plan.design import EQUIVALENT, HIGHER, LOWER, SLOWER, UNDECIDED


@dataclass(frozen=True)
class Choice:
    """A life's two answers an operator deploys: the leanest setting whose speed is not decided
    worse (`free`, None where none is decided leaner than the baseline), the leanest overall
    (`leanest`, the same or a leaner one at a price), each a memory verdict, with its price in
    steady throughput (a throughput verdict, None where none was measured)."""

    metric: str  # the memory metric they were chosen on
    leanest: decide.Verdict | None
    leanest_price: decide.Verdict | None
    free: decide.Verdict | None
    free_price: decide.Verdict | None
    ranked: tuple  # the memory verdicts decided leaner, leanest first
    among: tuple = ()  # the metric's verdicts it chose among (none decided higher on overhead)

    @property
    def baseline(self) -> str:
        return self.ranked[0].baseline if self.ranked else ""


def choose(lived: dict[str, list[decide.Verdict]], price: list[decide.Verdict]) -> Choice:
    """The leanest over a life: decided lowest on RSS over the engine's own account (else on
    creep, among those not decided higher on it: a setting that creeps less but holds four times
    more is not the leanest); and the leanest of those whose steady throughput (`price`) is not
    decided slower."""
    fatter = {v.variant for v in lived.get("overhead") or [] if v.verdict == HIGHER}
    cost = {v.variant: v for v in price if v.ratio is not None}
    for name in ("overhead", "creep"):
        among = tuple(v for v in lived.get(name) or [] if v.variant not in fatter)
        won = sorted((v for v in among if v.verdict == LOWER and v.ci_low is not None), key=lambda v: v.ratio)
        if won:
            free = next((v for v in won if getattr(cost.get(v.variant), "verdict", "") != SLOWER), None)
            return Choice(name, won[0], cost.get(won[0].variant), free, free and cost.get(free.variant), tuple(won),
                          among)
    return Choice("overhead", None, None, None, None, ())


def leanest(lived: dict[str, list[decide.Verdict]], speed: list[decide.Verdict], margin_pct: float = 5.0) -> str:
    """Which allocator (and setting) a life kept leanest (choose), with the allocators its interval
    cannot tell apart and its price in steady throughput; where that price is a decided slowdown,
    the leanest that costs none beside it; the baseline where none is decided leaner."""
    c = choose(lived, speed)
    if c.leanest is None:
        base = (lived.get("overhead") or lived.get("creep") or next(iter(lived.values())))[0].baseline
        return f"leanest over its life: {base} (none is decided leaner than it on overhead or creep)"
    said = f"leanest over its life ({metrics.words(c.metric)}): {top(list(c.among), LOWER, -1)}"
    said += f"; its steady throughput {short(c.leanest_price, margin_pct)}" if c.leanest_price else ""
    if c.free is not c.leanest:
        said += ("; the leanest that costs no speed: " + (
            f"{c.free.variant} {signed(c.free.delta_pct)} {c.free.unit} ({short(c.free_price, margin_pct)})" if c.free
            else f"none (each leaner one is slower than {c.baseline})"))
    return said


def survived(by_unit: dict[tuple, list], speed: list[decide.Verdict]) -> str:
    """"OOM-killed in rounds: glibc 3 of 8 (cycles 4, 4, 5); jemalloc 0 of 8, fewer kills (McNemar
    p = 0.03)" for a life where any run was killed by its cgroup's OOM killer; "" where none was."""
    def firsts(unit):  # a round's first life of the unit (not its more runs there, together.in_their_places)
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


@dataclass(frozen=True)
class Point:
    """A setting on a life's frontier: its change of RSS over the engine's account (x) and of steady
    throughput (y) against the baseline, in %, each with its interval and verdict."""

    variant: str
    x: float
    x_ci: tuple[float, float] | None
    x_verdict: str
    y: float | None
    y_ci: tuple[float, float] | None
    y_verdict: str


def frontier(lived: dict[str, list[decide.Verdict]], price: list[decide.Verdict]) -> dict:
    """A life's settings as points, memory against speed (`price`), and which of them the answer
    names (choose): {"title", "baseline", "points", "free", "leanest"}."""
    over = [v for v in lived.get("overhead") or [] if v.ratio is not None]
    cost = {v.variant: v for v in price if v.ratio is not None}
    c = choose(lived, price)
    first = over[0] if over else next(v for got in lived.values() for v in got)
    points = [Point(v.variant, v.delta_pct, v.ci_delta, v.verdict,
                    cost[v.variant].delta_pct if v.variant in cost else None,
                    cost[v.variant].ci_delta if v.variant in cost else None,
                    cost[v.variant].verdict if v.variant in cost else "") for v in over]
    return {"title": f"{first.engine} {first.workload} ({first.settings})", "baseline": first.baseline,
            "points": points, "free": c.free.variant if c.free else "",
            "leanest": c.leanest.variant if c.leanest else "",
            "speed_alone": bool(price) and price[0].base_unit[0] != first.base_unit[0]}


def _pct(v: decide.Verdict) -> str:
    if v.unit in ("%", "points"):
        return f"{v.delta_pct:+.0f}".replace("-", "−") + (" %" if v.unit == "%" else " points")
    return f"{v.delta_pct:+.1f}".replace("-", "−") + f" {v.unit}"  # a difference in its unit (creep)


def _speed(v: decide.Verdict | None) -> str:
    """A setting's price in the headline: nothing where it is equivalent, its change where decided
    faster, its interval's reach where undecided (its speed is not known to that much)."""
    if v is None or v.ratio is None or v.verdict == EQUIVALENT:
        return ""
    if v.verdict == UNDECIDED:
        return f" (speed ±{max(abs(x) for x in v.ci_delta):.0f} %)" if v.ci_delta else " (speed not measured)"
    return f" ({_pct(v)} speed)"


HEADLINE_WORDS = 40  # a life study's headline at most (words as str.split counts them)


def life_headline(lives: dict, price: dict, on: str, limit: str) -> str:
    """One sentence of at most about 40 words for a study of lives: per life, the leanest setting
    that costs no speed (choose; its change of RSS over the engine's account) and, beside it, the
    one leaner still at a price in speed; how many of the verdicts that answer it are decided;
    where. Where the sentence has no room (three engines, one leaner at a price), it drops what the
    Answers' lines say anyway: first how far a free setting's undecided speed may lie ("speed ±N
    %"), then the metric the leanest is read on and the word "verdicts"."""
    for level in range(3):
        said = _life_headline(lives, price, on, limit, notes=level == 0, terse=level == 2)
        if len(said.split()) <= HEADLINE_WORDS:
            break
    return said


def _life_headline(lives: dict, price: dict, on: str, limit: str, notes: bool, terse: bool) -> str:
    free, decided, total, seen = [], 0, 0, set()
    engines = [(q[1] or q[2], q[-1]) for q in lives]
    for q, lived in lives.items():
        vs = [v for got in lived.values() for v in got] + [v for v in price.get(q, []) if id(v) not in seen]
        seen |= {id(v) for v in price.get(q, [])}
        total += len(vs)
        decided += sum(v.verdict != UNDECIDED for v in vs)
        engine = q[1] or q[2]
        if engines.count((engine, q[-1])) > 1:  # one engine's lives in several shapes or settings: say which
            engine += " " + (q[4].split(" ", 1)[1] if " " in q[4] else q[4])
        if q[-1]:  # answered per machine (their runs disagree): say on which, as the lines under it do
            engine += f" on {q[-1]} alone"
        c = choose(lived, price.get(q, []))
        what = "" if c.metric == "overhead" else f" {metrics.words(c.metric)}"
        base = (lived.get("overhead") or next(iter(lived.values())))[0].baseline
        speed = _speed(c.free_price) if notes or (c.free_price and c.free_price.verdict != UNDECIDED) else ""
        said = f"{engine} {c.free.variant} {_pct(c.free)}{what}{speed}" if c.free else f"{engine} {base}"
        if c.leanest is not None and c.leanest is not c.free:
            cost = f" for {_pct(c.leanest_price)} speed" if c.leanest_price else ""
            said += f", leaner at a price {c.leanest.variant} {_pct(c.leanest)}{what}{cost}"
        free.append(said)
    return ("Leanest without a decided slowdown" + ("" if terse else " (RSS over the engine's account)") + ": "
            + "; ".join(free) + "." + f" {decided} of {total}{'' if terse else ' verdicts'} decided; {on}"
            + (f", {limit}" if limit else "") + ".")


def limit_words(study: analyse.Study) -> str:
    """The memory limit the study's servers ran under, in words."""
    limits = {int(s.get("server_memory_bytes") or 0) for s in (study.plan.get("shapes") or {}).values()}
    limits |= {int(study.plan.get("server_memory_bytes") or 0)}
    limits.discard(0)
    if not limits:
        return ""
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
        t.add([cell[0], params(cell), short_name(alloc), str(len(mine)), fmt_num(med["ops_per_s"], ",.0f"),
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


def needs(by_unit: dict[tuple, list], lived: dict[str, list[decide.Verdict]], checks: dict | None = None) -> str:
    """"memory it needs (...): glibc 412 MiB, 1.7× the engine's account; ..." of a life whose runs
    read their cgroup's charge: per allocator, the highest unreclaimable charge (anonymous,
    shared and kernel memory) of its lives, the least a container's limit may be, and its
    multiple of the engine's own account at its highest; with what the lives that checked it did (`checks`,
    Study.checks): at the limit, and below it; "" where no life read it."""
    vs = max(lived.values(), key=len)
    units = [tuple(vs[0].base_unit)] + [tuple(v.var_unit) for v in vs]
    parts = []
    for unit in units:
        got = [r for r in by_unit.get(unit, []) if _charged(r)]
        if not got:
            continue
        most, times = _need(got)
        kernel = max((r.own.cgroup_peak_bytes or 0 for r in got), default=0)
        parts.append((most, f"{short_name(unit[1])} {most / MIB:,.0f} MiB"
                      + (f", {times:.2f}× the engine's account" if times else "") + checked(unit, checks, kernel)))
    if not parts:
        return ""
    n = min(len([r for r in by_unit.get(u, []) if r.purpose == "measure"]) for u in units)
    over = "its one life" if n == 1 else f"the highest of {n} or more lives"
    return (f"memory it needs (the kernel's unreclaimable charge of its cgroup, {over}; the least limit to give "
            "it): " + "; ".join(w for _, w in sorted(parts)))


def needed(rows: list) -> dict[tuple, int]:
    """(cell key, allocator) -> the memory its lives need (the highest unreclaimable charge), for
    every unit whose lives read their cgroup's charge: the limits the checking lives are given.
    `rows`: the study's valid ones, as its answers read them (Study.valid)."""
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if _charged(r):
            groups[(r.cell, r.allocator)].append(r)
    return {u: _need(mine)[0] for u, mine in groups.items()}


def _charged(r) -> bool:
    """A measured life whose cgroup's charge was read, and that lived: a life killed under a limit
    reached the limit, not what it needs."""
    return r.purpose == "measure" and bool(r.value("unreclaimable_peak_bytes")) and not r.own.oom_killed


def check_outcomes(entry: dict | None) -> tuple[int, int, int, int]:
    """The lives that checked a limit (an entry of Study.checks): how many ran whole and proved,
    how many of them were killed, the limit they had (bytes), and how many failed or were not proved
    (neither lived nor killed)."""
    rows = (entry or {}).get("rows") or []
    ok = [r for r in rows if r.status == "ok" and r.allocator_verified]
    return len(ok), sum(1 for r in ok if r.own.oom_killed), (entry or {}).get("limit") or 0, len(rows) - len(ok)


def checked(unit: tuple, checks: dict | None, kernel_peak: int = 0) -> str:
    """" (at it: 4 of 4 lived; at 287 MiB: 3 of 4 killed)" where lives checked the limit; where
    lives were killed at it, that it is not enough, with the kernel's own peak of the study's lives
    (page cache and kernel memory included) as the next limit to check."""
    said = []
    for level in ("at", "below"):
        n, killed, limit, bad = check_outcomes(((checks or {}).get(level) or {}).get(unit))
        if n or bad:
            where = "at it" if level == "at" else f"at {limit / MIB:,.0f} MiB"
            said.append((f"{where}: {n - killed} of {n} lived" if not killed else f"{where}: {killed} of {n} killed")
                        + (f", {bad} failed" if bad else "")
                        + (f", so not enough: the kernel's peak of its lives was {kernel_peak / MIB:,.0f} MiB"
                           if level == "at" and killed and kernel_peak > limit else ""))
    return f" ({'; '.join(said)})" if said else ""


def _need(rows: list) -> tuple[int, float | None]:
    """The highest unreclaimable charge of these lives, and its multiple of its life's engine account
    at its highest (None where the engine gave none)."""
    top = max(rows, key=lambda r: r.own.unreclaimable_peak_bytes)
    most, account = top.own.unreclaimable_peak_bytes, top.own.engine_peak_bytes
    return most, most / account if account else None


def limit_table(rows: list, checks: dict | None = None) -> Table:
    """Per life and allocator: what the kernel charged its cgroup, the memory to give it, and what
    the lives that checked it did (Study.checks)."""
    t = Table("life_limit", "The memory limit a server needs over its life (the kernel's charge of its cgroup)",
              ["engine", "life", "allocator", "lives", "needs (MiB, highest)", "median (MiB)", "95 % CI (MiB)",
               "× the engine's account", "kernel's peak (MiB)", "OOM-killed", "at the limit: killed",
               "below it: limit (MiB)", "below it: killed"],
              raw_headers=["engine", "life", "allocator", "lives", "needs_mib", "median_mib", "ci_low_mib",
                           "ci_high_mib", "times_account", "kernel_peak_bytes", "oom_killed", "at_limit_killed",
                           "below_limit_bytes", "below_limit_killed"],
              note="Unreclaimable: anonymous, shared and kernel memory charged to the cgroup (v1: memory.stat's rss "
                   "+ shmem + memory.kmem.usage_in_bytes; v2: anon + shmem + kernel; lives measured by alloclab "
                   "before its commit 381fe40 read anonymous and shared memory only), sampled at 20 Hz over the "
                   "whole life; its highest over the lives is the least limit a container may set (page cache, which"
                   " the kernel reclaims under a limit before it kills, left out). Kernel's peak: "
                   "memory.max_usage_in_bytes (v1) or memory.peak (v2), page cache included. × the engine's account:"
                   " the highest unreclaimable charge over the engine's own account at its highest (MariaDB's "
                   "Memory_used, RocksDB's caches and memtables, PostgreSQL's memory contexts; PostgreSQL's shared "
                   "buffers are charged but not in its account). At and below the limit: lives run again under a "
                   "cgroup limit of the memory they need and of less (alloclab limits), killed of how many.")
    groups: dict[tuple, list] = defaultdict(list)
    killed_in: dict[tuple, int] = defaultdict(int)  # lives killed under a limit: they reached it, not their need
    for r in rows:
        if _charged(r):
            groups[(decide.cell_of(r), r.allocator)].append(r)
        elif r.purpose == "measure" and r.own.oom_killed:
            killed_in[(decide.cell_of(r), r.allocator)] += 1
    for (cell, alloc), mine in sorted(groups.items(), key=lambda kv: (analyse.sort_key(kv[0][0]), kv[0][1])):
        peaks = [r.own.unreclaimable_peak_bytes / MIB for r in mine]
        _, times = _need(mine)
        ci = stats.bootstrap_ci(peaks) if len(peaks) >= 3 else None
        kernel = _median(r.own.cgroup_peak_bytes for r in mine)
        killed = killed_in[(cell, alloc)]
        at, below = (check_outcomes(((checks or {}).get(level) or {}).get((mine[0].cell, alloc)))
                     for level in ("at", "below"))  # (lives, killed, limit, failed)
        t.add([cell[0], params(cell), short_name(alloc), str(len(mine)), f"{max(peaks):,.0f}",
               f"{stats.median(peaks):,.0f}",
               f"{ci[0]:,.0f}–{ci[1]:,.0f}" if ci else "–", fmt_num(times, ".2f"),
               fmt_num(None if kernel is None else kernel / MIB, ",.0f"), f"{killed} of {len(mine) + killed}",
               f"{at[1]} of {at[0]}" if at[0] else "–", f"{below[2] / MIB:,.0f}" if below[0] else "–",
               f"{below[1]} of {below[0]}" if below[0] else "–"],
              [cell[0], params(cell), alloc, len(mine), max(peaks), stats.median(peaks), ci and ci[0], ci and ci[1],
               times, kernel, killed, at[1] if at[0] else None, below[2] or None, below[1] if below[0] else None])
    return t
