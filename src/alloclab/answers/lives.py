"""The answers of a study of lives in words: which allocator and setting kept a life
leanest and at what cost in steady throughput, how often each was OOM-killed over the rounds, and
the headline of such a study."""

from __future__ import annotations

from alloclab.answers import analyse, decide, life, metrics
from alloclab.answers.wording import short, signed, top
from alloclab.plan.design import LOWER, UNDECIDED


def leanest(lived: dict[str, list[decide.Verdict]], speed: list[decide.Verdict]) -> str:
    """Which allocator (and setting) a life kept leanest: the one decided lowest on RSS over the
    engine's own account (else on creep), with the allocators its interval cannot tell apart and
    what it cost in steady throughput; the baseline where none is decided leaner."""
    for name in ("overhead", "creep"):
        got = lived.get(name) or []
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
