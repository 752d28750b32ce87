"""How a verdict is said in a few words ("jemalloc +6.1 % [+3.2, +9.0] faster"), shared by the
answers of every study (sentences) and those of a study of lives (lives)."""

from __future__ import annotations

from alloclab.answers import decide, metrics
from alloclab.plan.design import DEFAULT_MARGIN, UNDECIDED


def signed(x: float) -> str:
    """+3.2 or −3.2 (a minus sign): numbers only, never the names beside them (tcmalloc-google)."""
    return f"{x:+.1f}".replace("-", "−")


# an undecided interval wider than this many margins (either side) measured too little to read as
# "equivalent within" anything: it is said as not measured precisely, with its half-width
IMPRECISE = 2


def short(v: decide.Verdict, margin_pct: float = 100 * DEFAULT_MARGIN) -> str:
    """"jemalloc +6.1 % [+3.2, +9.0] faster" and the like (a share: "+77.0 points [...]", at its own
    margin); undecided says the precision reached."""
    if v.ratio is None:
        return f"{v.variant}: no valid runs"
    d, u = v.delta_pct, v.unit
    if v.ci_delta is None:
        return f"{v.variant} {signed(d)} {u} (no interval yet)"
    lo, hi = v.ci_delta
    word = v.verdict
    if word == UNDECIDED and lo < 0 < hi:  # no difference shown: say how large one could still be
        margin, wide = metrics.said_margin(v.metric, v.margin_or(margin_pct / 100)), max(-lo, hi)
        if wide > IMPRECISE * margin:  # it measured too little to say anything of the kind
            return f"{v.variant} {signed(d)} {u}: not measured precisely (±{wide:.1f} {u})"
        word = f"equivalent within ±{wide:.1f} {u} (undecided at the ±{margin:g} {u} margin)"
    return f"{v.variant} {signed(d)} {u} [{signed(lo)}, {signed(hi)}] {word}"


def top(vs: list[decide.Verdict], better: str, sign: int) -> str:
    """The allocator with the best decided ratio, and those whose intervals overlap its own (not
    told apart from it); the baseline when none is decided better."""
    won = [v for v in vs if v.verdict == better and v.ci_low is not None]
    if not won:
        return f"{vs[0].baseline} (none is decided {better} than it)"
    first = max(won, key=lambda v: sign * v.ratio)
    ties = [v.variant for v in won if v is not first and v.ci_low <= first.ci_high and first.ci_low <= v.ci_high]
    lo, hi = first.ci_delta
    said = f"{first.variant} {signed(first.delta_pct)} {first.unit} [{signed(lo)}, {signed(hi)}]"
    return said + (f", not told apart from {', '.join(sorted(ties))}" if ties else "")


def cell_label(v: decide.Verdict) -> str:
    """A cell as the forest plot and the short answers name it (and the machine, where the answer
    holds on one machine of several)."""
    threads = f"{v.threads} thread{'s' if v.threads != 1 else ''}"
    on = f" on {v.machine}" if v.machine else ""
    if v.comparison == "allocators":
        return f"{v.engine} {v.workload} ({v.settings}, {threads}){on}"
    return f"{v.workload} ({v.settings}, {threads}, allocator {v.allocator}){on}"
