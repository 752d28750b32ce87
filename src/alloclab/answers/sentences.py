"""The answers a study gives: one sentence per question, the verdict table sorted by effect,
and what it would take to decide what is still undecided. Built from analyse.Study alone."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

from alloclab.answers import analyse, causes, cautions, context, decide, metrics, stats
from alloclab.answers.lives import frontier, kills_first, leanest, life_headline, limit_words, needs, survived
from alloclab.answers.wording import cell_label, short
from alloclab.answers.wording import signed as _signed
from alloclab.answers.wording import top as _top
from alloclab.core.units import fmt_duration
from alloclab.plan import published, workload
from alloclab.plan.design import DECIDED_WORDS, DEFAULT_MARGIN, EQUIVALENT, FASTER, LOWER, UNDECIDED
from alloclab.results.store import rounds_ran

COMPARISON_NOUN = {"allocators": "allocator", "engines": "engine", "profiles": "profile"}


@dataclass
class Answers:
    headline: str  # the first line: what is decided, or that nothing is and what would decide it
    sentences: list[str]  # the details: one per question (cell), throughput first, with why
    note: str  # how the intervals were made
    verdicts: list[decide.Verdict]  # every comparison, sorted by effect within each metric
    to_decide: str  # budget that would decide the rest ("" when nothing is left)
    margin_pct: float = 100 * DEFAULT_MARGIN
    lines: list[str] = field(default_factory=list)  # the short answer: one line per cell of the main question
    # the short answer grouped under each cell: (the cell, its lines); "" for a line of the whole study
    groups: list[tuple[str, list[str]]] = field(default_factory=list)
    subline: str = ""  # under the headline: rounds, time, why it stopped, what would decide the rest
    where: str = ""  # the machine(s) the answers hold on, in a few words, and how the runs were measured
    # on machines that differ: every comparison on each machine alone first, then the pooled ones
    machines_first: list[decide.Verdict] = field(default_factory=list)
    # a comparison's baseline unit -> the unit of its workload's throughput ("": the metric's own)
    headline_units: dict = field(default_factory=dict)
    # (metric, baseline unit, variant unit) -> its marks on the forest plot (causes.marks)
    marks: dict = field(default_factory=dict)
    # a study of lives: per life, its memory against its price in speed (lives.frontier)
    frontier: list = field(default_factory=list)


def _pct(x: float) -> str:
    return f"{x:.1f}".replace("-", "−")


def _ci_pct(v: decide.Verdict) -> str:
    lo, hi = v.ci_delta
    return f"{_pct(lo)} to +{_pct(hi)} {v.unit}" if lo < 0 < hi else f"{_pct(lo)}–{_pct(hi)} {v.unit}"


def _rounds(v: decide.Verdict) -> str:
    n = v.n_pairs or min(v.n_baseline, v.n_variant)
    return f"{n} round{'s' if n != 1 else ''}"


def phrase(v: decide.Verdict, lives: bool = False) -> str:
    """"jemalloc is faster than glibc by 6.1 % (95 % CI 3.2–9.0 %, 7 rounds)" and the like; a life's
    (`lives`) open verdict counts the rounds of lives that would decide it."""
    if v.ratio is None:
        return f"{v.variant} against {v.baseline}: no valid runs to compare"
    big = (v.ratio >= 1.5 or v.ratio <= 1 / 1.5) and v.unit == "%"
    if v.ci_low is None:
        return (f"{v.variant} against {v.baseline}: undecided ({_pct(v.delta_pct):s} {v.unit} from "
                f"{_rounds(v)}, too few for an interval)")
    if v.verdict in DECIDED_WORDS:
        if big:
            return (f"{v.variant} is {v.ratio:.2f}× {v.baseline} ({v.verdict}; 95 % CI {v.ci_low:.2f}–"
                    f"{v.ci_high:.2f}×, {_rounds(v)})")
        lo, hi = sorted(abs(x) for x in v.ci_delta)
        return (f"{v.variant} is {v.verdict} than {v.baseline} by {abs(v.delta_pct):.1f} {v.unit} "
                f"(95 % CI {lo:.1f}–{hi:.1f} {v.unit}, {_rounds(v)})")
    if v.verdict == EQUIVALENT:
        return (f"{v.variant} is equivalent to {v.baseline} ({'+' if v.delta_pct >= 0 else ''}{_pct(v.delta_pct)} "
                f"{v.unit}, 95 % CI {_ci_pct(v)}, {_rounds(v)})")
    more = ""
    if v.rounds_to_decide is not None:
        more = (", more than 1,000 further rounds would be needed" if v.rounds_to_decide >= 1000 else
                f", about {v.rounds_to_decide} more round{'s' if v.rounds_to_decide != 1 else ''}"
                f"{' of lives' if lives else ''} would decide")
    return (f"{v.variant} against {v.baseline}: undecided ({'+' if v.delta_pct >= 0 else ''}{_pct(v.delta_pct)} "
            f"{v.unit}, 95 % CI {_ci_pct(v)}, {_rounds(v)}{more})")


def best(speed: list[decide.Verdict], memory: list[decide.Verdict]) -> str:
    """"fastest: … ; leanest: …" of one cell: the allocator decided fastest against the baseline
    and the one decided leanest on peak RSS, each with the others its interval cannot tell apart."""
    return f"fastest: {_top(speed, FASTER, 1)}; leanest (peak RSS): {_top(memory, LOWER, -1)}"


def _question(v: decide.Verdict) -> tuple:
    return (v.comparison, v.engine if v.comparison == "allocators" else "", v.workload, v.threads, v.settings,
            v.allocator if v.comparison != "allocators" else "", v.machine)


def _where(v: decide.Verdict) -> str:
    threads = f"{v.threads} thread{'s' if v.threads != 1 else ''}"
    on = f" on {v.machine} alone" if v.machine else ""
    if v.comparison == "allocators":
        return f"On {v.engine}, {v.workload} ({v.settings}, {threads}){on}"
    return f"{v.workload} ({v.settings}, {threads}, allocator {v.allocator}){on}"


def _effect(v: decide.Verdict) -> float:
    """How far a verdict's ratio lies from none, in its margins: unit-free, so that a life's
    questions, ordered by their largest effect, weigh a creep in MiB a cycle, a share given back in
    points and a ratio alike (−64 % over the account at ±5 % outranks −15 MiB a cycle at ±1)."""
    if not v.ratio:
        return 0.0
    margin = v.margin_or(DEFAULT_MARGIN)
    scale = margin if metrics.differs(v.metric) else math.log1p(margin)
    return abs(math.log(v.ratio)) / (scale if scale > 0 else 1.0)


HEADLINE_NAMES = 3  # a headline names each comparison of one cell up to this many; more are counted


def answer_headline(primary: list[decide.Verdict], decided: list[decide.Verdict], counts: dict, where: str) -> str:
    """One sentence: what is decided on throughput and where it holds (the stopping rule and the
    looks are the line under it). A cell's few comparisons are named with their ratios; more,
    or several cells, are counted by verdict (the lines under the forest plot name them)."""
    base = f" vs {primary[0].baseline}" if len({v.baseline for v in primary}) == 1 else ""
    if len(primary) <= HEADLINE_NAMES and len({_question(v) for v in primary}) == 1:
        what = ": " + ", ".join(f"{v.variant} {_signed(v.delta_pct)} % {v.verdict}" if v.ratio is not None
                                else f"{v.variant} without valid runs"
                                for v in sorted(primary, key=lambda v: -_effect(v)))
    else:
        what = " (" + ", ".join(f"{n} {w}" for w, n in sorted(counts.items())) + ")" if counts else ""
    n = f"{len(decided)} of {len(primary)} decided" if decided else f"None of {len(primary)} decided yet"
    return f"{n} on throughput{base}{what}; on {where}."


def _quiet(found: list, v: decide.Verdict) -> str:
    """Where a comparison's ratio depends on the host's state: its value on a quiet host beside
    the average the verdict uses (answers.dependence)."""
    f = causes.for_verdict(found, v)
    if f is None or f.quiet is None:
        return ""
    q = f.quiet
    return (f" (on a quiet host {_signed(q.delta_pct)} % [{_signed((q.ci_low - 1) * 100)}, "
            f"{_signed((q.ci_high - 1) * 100)}], the verdict uses the {f.verdict_uses})")


def _headline_words(by_unit: dict, v: decide.Verdict) -> str:
    """What a verdict's throughput is, in words: its runs' workload's headline (a verdict's
    `workload` is the cell's part, not the workload)."""
    rows = by_unit.get(tuple(v.base_unit))
    return workload.of(rows[0].workload).headline_words if rows else "throughput"


@dataclass
class _Cells:
    """The answer's part per question (cell): its sentences, its short lines and their groups,
    and the verdicts that make the headline (throughput by question, a life's memory)."""

    sentences: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    groups: list[tuple[str, list[str]]] = field(default_factory=list)
    by_q: dict = field(default_factory=lambda: defaultdict(list))
    lives: dict = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    # a life's question -> the throughput verdicts that price it: its engine's steady load alone in
    # turns where the study measured it (Study.turns), else the life's own
    price: dict = field(default_factory=dict)


def build(study: analyse.Study) -> Answers:
    vs = study.verdicts()
    pol = study.design
    told = study.told()  # side by side beside the same engine's speed in turns: told, never decided on
    primary = [v for v in vs if v.metric == "throughput" and not decide.told_apart(v, told)]
    by_unit = _runs_by_unit(study)
    found = study.findings()
    cells = _cells(vs, primary, by_unit, found, 100 * pol.margin, set(study.turns()), study.checks)
    notes = context.between_machines(study) + context.host_state(study) + _caveats(study)
    unanswered = context.unanswered(study)  # read once: it walks every failed row
    sentences = unanswered + cells.sentences + _decided_elsewhere(vs) + notes
    lines = unanswered + cells.lines + notes
    groups = [("", [x]) for x in unanswered] + cells.groups + [("", [x]) for x in notes]
    decided = [v for v in primary if v.verdict != UNDECIDED]
    goals = {m.name for m in decide.stopping(study.rows, pol)}  # what the rounds go on for
    undecided = [v for v in vs if v.metric in goals and v.verdict == UNDECIDED and not decide.told_apart(v, told)]
    to_decide = context.to_decide(study, context.open_ahead(study, undecided), undecided)
    where = study.where()
    headline = _headline(study, primary, decided, cells, where)
    subline = _subline(study, primary, decided, vs, undecided, to_decide)
    table, first = _verdict_order(study, vs)
    units = {tuple(v.base_unit): workload.of(rs[0].workload).headline_unit for v in vs
             if (rs := by_unit.get(tuple(v.base_unit)))}
    own = study.own_slopes()
    marked = {(v.metric, tuple(v.base_unit), tuple(v.var_unit)): m for v in primary
              if (m := causes.marks(causes.for_verdict(found, v), own))}
    return Answers(headline, sentences, context.method_note(study, vs), table, to_decide, 100 * pol.margin, lines,
                   groups, subline, where, first, units, marked,
                   [frontier(lived, cells.price.get(q, [])) for q, lived in cells.lives.items()])


def _runs_by_unit(study: analyse.Study) -> dict[tuple, list]:
    """The valid runs of each (cell, allocator), read once: measured ones, and the profiled ones
    whose allocator shares (only they have them) explain a verdict."""
    by_unit: dict[tuple, list] = defaultdict(list)
    for r in study.valid() + study.profiled():
        by_unit[(r.cell, r.allocator)].append(r)
    return by_unit


def _cells(vs: list, primary: list, by_unit: dict, found: list, margin_pct: float, turns: set,
           checks: dict) -> _Cells:
    """Each question's throughput verdicts in a sentence and in short lines; beside them its
    memory: a life's memory verdicts with the leanest allocator, its price in speed and its kills,
    or peak RSS where several allocators compete (which to ship). A life whose throughput is told
    (Study.told: not in `primary`) has its memory lines alone, priced by its engine's steady load
    in turns (cells in `turns`)."""
    out = _Cells()
    for v in primary:
        out.by_q[_question(v)].append(v)
    memory = defaultdict(list)  # the same questions on peak RSS: the memory answer beside the speed one
    memories = {m.name for m in metrics.life()}  # a life's memory
    others = {m.name for m in metrics.own()} - memories  # another workload's own: said beside its throughput
    beside: dict = defaultdict(lambda: defaultdict(list))
    for v in vs:
        if v.metric == "peak_rss" and v.ratio is not None:
            memory[_question(v)].append(v)
        if v.metric in memories and v.ratio is not None:
            out.lives[_question(v)][v.metric].append(v)
        if v.metric in others and v.ratio is not None:
            beside[_question(v)][v.metric].append(v)
    alone = defaultdict(list)  # engine -> its steady load's verdicts in turns
    for v in primary:
        if v.base_unit[0] in turns:
            alone[v.engine].append(v)
    by_q = out.by_q
    for q in out.lives:
        lived = [v for got in out.lives[q].values() for v in got]
        out.price[q] = alone.get(lived[0].engine) or by_q.get(q, [])
    asked = list(by_q) + [q for q in out.lives if q not in by_q]
    for q in sorted(asked, key=lambda q: (-max((_effect(v) for v in by_q.get(q) or
                                                [x for got in out.lives[q].values() for x in got]), default=0),
                                          [str(x) for x in q])):
        lived = out.lives.get(q)
        items = sorted(by_q.get(q, []), key=lambda v: -_effect(v))
        own = []
        if items:
            what = _headline_words(by_unit, items[0])
            out.sentences.append(f"{_where(items[0])}, {what}: "
                                 + "; ".join(phrase(v) + _why(by_unit, v) for v in items) + ".")
            own = [f"{what} vs {items[0].baseline}: " + "; ".join(short(v, margin_pct) + _quiet(found, v)
                                                                    for v in items)]
            for name, got in beside.get(q, {}).items():
                got, said = sorted(got, key=lambda v: -_effect(v)), metrics.words(name)
                out.sentences.append(f"{_where(got[0])}, {said}: " + "; ".join(map(phrase, got)) + ".")
                own.append(f"{said} vs {got[0].baseline}: " + "; ".join(short(v, margin_pct) for v in got))
        mem = sorted(memory.get(q, []), key=lambda v: -_effect(v))
        if lived:
            first = next(iter(lived.values()))[0]
            own += _life_lines(lived, out.price[q], by_unit, margin_pct, checks)
            out.sentences.append(f"{_where(first)}, over its life: " + "; ".join(
                f"{metrics.words(name)}: " + "; ".join(phrase(v, lives=True) for v in got)
                for name, got in lived.items() if got) + ".")
            out.groups.append((cell_label(first), own))
            out.lines += [f"{cell_label(first)}, {x}" for x in own]
            continue
        if mem and items[0].comparison == "allocators" and len(items) > 1:  # several allocators: which to ship
            own += [f"{metrics.words('peak_rss')} vs {mem[0].baseline}: "
                    + "; ".join(short(v, margin_pct) for v in mem), best(items, mem)]
        out.groups.append((cell_label(items[0]), own))
        out.lines += [f"{cell_label(items[0])}, {x}" for x in own]
    return out


def _life_lines(lived: dict, price: list, by_unit: dict, margin_pct: float, checks: dict) -> list[str]:
    """A life's memory verdicts, metric by metric, the leanest allocator with its price in speed
    (`price`: throughput verdicts), the memory it needs (with the lives that checked it), and its
    kills."""
    own = []
    for m in metrics.life():
        got = sorted(lived.get(m.name, []), key=lambda v: -_effect(v))
        if got:
            own.append(f"{m.words} vs {got[0].baseline}: " + "; ".join(short(v, margin_pct) for v in got))
    own.append(leanest(lived, price, margin_pct))
    need = needs(by_unit, lived, checks)
    killed = survived(by_unit, max(lived.values(), key=len))
    return own + ([need] if need else []) + ([killed] if killed else [])


def _decided_elsewhere(vs: list) -> list[str]:
    """Latency and memory: a sentence where something is decided (the table holds the rest)."""
    out = []
    for metric in ("p99_latency", "peak_rss"):
        by_m: dict[tuple, list[decide.Verdict]] = defaultdict(list)
        for v in vs:
            if v.metric == metric and v.verdict != UNDECIDED:
                by_m[_question(v)].append(v)
        for q in sorted(by_m, key=lambda q: (-max(_effect(v) for v in by_m[q]), [str(x) for x in q])):
            items = sorted(by_m[q], key=lambda v: -_effect(v))
            out.append(f"{_where(items[0])}, {metrics.words(metric)}: " + "; ".join(phrase(v) for v in items) + ".")
    return out


def _caveats(study: analyse.Study) -> list[str]:
    """What a reader of the published figures must know, and engines that read indexes backwards."""
    notes = published.published_caveats(study.plan, study.engines)
    backward = [n.split(" reads ")[0] for n in cautions.engine_notes(study)
                if " reads a secondary index backwards" in n]
    if backward:  # what a HammerDB run on the same engine would count without noticing
        notes.append(f"{', '.join(backward)} read(s) index prefixes backwards wrongly (a customer's last order "
                     "is missed; HammerDB's Order-Status would commit without it): alloclab's TPC-C reads "
                     "forwards and fails a run that misses an order (warnings below).")
    return notes


def _headline(study: analyse.Study, primary: list, decided: list, cells: _Cells, where: str) -> str:
    """The first line: nothing to compare, a life's leanest settings, or what is decided on speed."""
    killed = kills_first(study.valid())  # a study whose lives were killed says so first
    if not primary:
        return killed + ("Nothing to compare: the study has no pair of " +
                         " or ".join(COMPARISON_NOUN[q] + "s" for q in study.design.questions)
                         + " with valid runs in the same cell.")
    if cells.lives:
        return killed + life_headline(cells.lives, cells.price, study.on(), limit_words(study))
    counts = defaultdict(int)
    for v in decided:
        counts[v.verdict] += 1
    return killed + answer_headline(primary, decided, counts, where)


def _subline(study: analyse.Study, primary: list, decided: list, vs: list, undecided: list, to_decide: str) -> str:
    """The line under the headline: rounds, time, why it stopped, and what would decide the rest."""
    pol = study.design
    stop = (study.schedule.get("stop") or {}).get("text", "")
    rounds = rounds_ran(study.rows)  # rounds in which a run finished
    spent = study.schedule.get("elapsed_s")
    others = [v for v in vs if v.metric != "throughput" and v.verdict != UNDECIDED]
    return (f"After {rounds} round(s)" + (f" in {fmt_duration(spent)}" if spent else "")
            + (f"; stopped: {stop}" if stop else "") + "."
            + (f" {to_decide}" if undecided and to_decide else "")
            + (" More rounds are needed." if undecided and not to_decide and (pol.decide_on or not decided) else "")
            + (f" Decided on latency or memory: {len(others)} (below)." if primary and not decided and others
               else "")
            + " An answer about this machine (versions under Environment).")


def _verdict_order(study: analyse.Study, vs: list) -> tuple[list, list]:
    """The verdict table sorted by metric then effect, and on machines that differ every
    comparison on each machine alone first, then the pooled ones ([] on one machine)."""
    order = {m.name: i for i, m in enumerate(metrics.METRICS + metrics.own())}
    table = sorted(vs, key=lambda v: (order.get(v.metric, 9), -_effect(v)))
    per = [v for vs_ in study.per_machine().values() for v in vs_]
    first = sorted(per, key=lambda v: (order.get(v.metric, 9), v.machine, -_effect(v)))
    first += [v for v in table if not v.machine]
    return table, first if per else []


WHY_FIELDS = (("alloc_cpu_self_pct", "allocator share of CPU", "{:.1f} %"),
              ("alloc_cs_pct", "context switches in the allocator", "{:.1f} %"),
              ("fragmentation", "fragmentation (RSS ÷ live)", "{:.2f}"))


def _why(by_unit: dict[tuple, list], v: decide.Verdict) -> str:
    """What the runs of both sides say about the allocator itself: its share of the CPU samples
    and the fragmentation of its memory, baseline → variant (medians), where both have them."""
    parts = []
    for column, label, fmt in WHY_FIELDS:
        sides = []
        for unit in (v.base_unit, v.var_unit):
            vals = [r.value(column) for r in by_unit.get(tuple(unit), []) if r.value(column) is not None]
            sides.append(stats.median(vals) if vals else None)
        if None not in sides:
            parts.append(f"{label} {fmt.format(sides[0])} → {fmt.format(sides[1])}")
    return f" (why: {', '.join(parts)})" if parts else ""


def verdict_rows(answers: Answers) -> list[dict]:
    return [{k: getattr(v, k) for k in decide.CSV_COLUMNS} for v in answers.verdicts]


def to_json(answers: Answers) -> str:
    return json.dumps({"headline": answers.headline, "answers": answers.lines, "details": answers.sentences,
                       "note": answers.note,
                       "verdicts": verdict_rows(answers)}, indent=2, default=str) + "\n"


def head_markdown(answers: Answers) -> list[str]:
    """The headline (bold) and the line under it."""
    return ["## Answers", "", f"**{answers.headline}**", ""] + ([answers.subline, ""] if answers.subline else [])


def lines_markdown(answers: Answers) -> list[str]:
    """The short answers, grouped under their cell (a study-wide line stands alone)."""
    out = []
    for label, items in answers.groups:
        out += [f"- {x}" for x in items] if not label else [f"- {label}"] + [f"  - {x}" for x in items]
    return out or ["- (no comparison)"]


def to_markdown(answers: Answers) -> str:
    """The answers as the command line prints them: the headline, the line under it, then each
    cell's answers under its name."""
    return "\n".join(head_markdown(answers) + lines_markdown(answers) + ["", f"_{answers.note}_", ""])


def details_markdown(answers: Answers) -> str:
    """Each question in a sentence, with why (the allocator's share of CPU, fragmentation)."""
    return "\n".join(["## Why: each answer in full", ""] + [f"- {s}" for s in answers.sentences] + [""])
