"""The answers a study gives: one sentence per question, the verdict table sorted by effect,
and what it would take to decide what is still undecided. Built from analyse.Study alone."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

from alloclab.answers import analyse, causes, decide, metrics, replicate, stats
from alloclab.answers.lives import leanest, life_headline, limit_words, survived
from alloclab.answers.wording import short
from alloclab.answers.wording import signed as _signed
from alloclab.answers.wording import top as _top
from alloclab.catalog.names import LIFE_METRICS
from alloclab.core.units import fmt_duration
from alloclab.plan import presets, workload
from alloclab.plan.design import DECIDED_WORDS, DEFAULT_MARGIN, EQUIVALENT, FASTER, LOWER, UNDECIDED

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


def _pct(x: float) -> str:
    return f"{x:.1f}".replace("-", "−")


def _ci_pct(v: decide.Verdict) -> str:
    lo, hi = v.ci_delta
    return f"{_pct(lo)} to +{_pct(hi)} {v.unit}" if lo < 0 < hi else f"{_pct(lo)}–{_pct(hi)} {v.unit}"


def _rounds(v: decide.Verdict) -> str:
    n = v.n_pairs or min(v.n_baseline, v.n_variant)
    return f"{n} round{'s' if n != 1 else ''}"


def phrase(v: decide.Verdict) -> str:
    """"jemalloc is faster than glibc by 6.1 % (95 % CI 3.2–9.0 %, 7 rounds)" and the like."""
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
                f", about {v.rounds_to_decide} more round{'s' if v.rounds_to_decide != 1 else ''} would decide")
    return (f"{v.variant} against {v.baseline}: undecided ({'+' if v.delta_pct >= 0 else ''}{_pct(v.delta_pct)} "
            f"{v.unit}, 95 % CI {_ci_pct(v)}, {_rounds(v)}{more})")


def cell_label(v: decide.Verdict) -> str:
    """A cell as the forest plot and the short answers name it (and the machine, where the answer
    holds on one machine of several)."""
    threads = f"{v.threads} thread{'s' if v.threads != 1 else ''}"
    on = f" on {v.machine}" if v.machine else ""
    if v.comparison == "allocators":
        return f"{v.engine} {v.workload} ({v.settings}, {threads}){on}"
    return f"{v.workload} ({v.settings}, {threads}, allocator {v.allocator}){on}"


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
    return abs(math.log(v.ratio)) if v.ratio else 0.0


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


def build(study: analyse.Study) -> Answers:
    vs = study.verdicts()
    pol = study.design
    primary = [v for v in vs if v.metric == "throughput"]
    by_q: dict[tuple, list[decide.Verdict]] = defaultdict(list)
    for v in primary:
        by_q[_question(v)].append(v)
    sentences = []
    # the valid runs of each (cell, allocator), read once: measured ones, and the profiled ones
    # whose allocator shares (only they have them) explain a verdict
    by_unit: dict[tuple, list] = defaultdict(list)
    for r in study.valid() + study.profiled():
        by_unit[(r.cell, r.allocator)].append(r)
    lines: list[str] = []
    groups: list[tuple[str, list[str]]] = []
    found = study.findings()
    memory = defaultdict(list)  # the same questions on peak RSS: the memory answer beside the speed one
    lives: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))  # a life's memory verdicts
    for v in vs:
        if v.metric == "peak_rss" and v.ratio is not None:
            memory[_question(v)].append(v)
        if v.metric in LIFE_METRICS and v.ratio is not None:
            lives[_question(v)][v.metric].append(v)
    for q in sorted(by_q, key=lambda q: (-max(_effect(v) for v in by_q[q]), [str(x) for x in q])):
        items = sorted(by_q[q], key=lambda v: -_effect(v))
        what = _headline_words(by_unit, items[0])
        sentences.append(f"{_where(items[0])}, {what}: " + "; ".join(phrase(v) + _why(by_unit, v) for v in items) + ".")
        own = [f"{what} vs {items[0].baseline}: " + "; ".join(short(v, 100 * pol.margin) + _quiet(found, v)
                                                                for v in items)]
        mem = sorted(memory.get(q, []), key=lambda v: -_effect(v))
        lived = lives.get(q)
        if lived:  # a life: its memory verdicts, and the leanest allocator with its cost in speed
            for m in metrics.LIFE:
                got = sorted(lived.get(m.name, []), key=lambda v: -_effect(v))
                if got:
                    own.append(f"{m.words} vs {got[0].baseline}: " + "; ".join(short(v, 100 * pol.margin)
                                                                              for v in got))
            own.append(leanest(lived, items))
            killed = survived(by_unit, items)
            if killed:
                own.append(killed)
            sentences.append(f"{_where(items[0])}, over its life: " + "; ".join(
                f"{metrics.words(name)}: " + "; ".join(phrase(v) for v in got)
                for name, got in lived.items() if got) + ".")
        elif mem and items[0].comparison == "allocators" and len(items) > 1:  # several allocators: which to ship
            own += [f"{metrics.words('peak_rss')} vs {mem[0].baseline}: "
                    + "; ".join(short(v, 100 * pol.margin) for v in mem), best(items, mem)]
        groups.append((cell_label(items[0]), own))
        lines += [f"{cell_label(items[0])}, {x}" for x in own]
    # latency and memory: a sentence where something is decided (the table holds the rest)
    for metric in ("p99_latency", "peak_rss"):
        by_m: dict[tuple, list[decide.Verdict]] = defaultdict(list)
        for v in vs:
            if v.metric == metric and v.verdict != UNDECIDED:
                by_m[_question(v)].append(v)
        for q in sorted(by_m, key=lambda q: (-max(_effect(v) for v in by_m[q]), [str(x) for x in q])):
            items = sorted(by_m[q], key=lambda v: -_effect(v))
            sentences.append(f"{_where(items[0])}, {metrics.words(metric)}: " + "; ".join(phrase(v) for v in items)
                             + ".")
    notes = presets.published_caveats(study.plan, study.engines)
    backward = [n.split(" reads ")[0] for n in analyse.engine_notes(study) if " reads a secondary index backwards" in n]
    if backward:  # what a HammerDB run on the same engine would count without noticing
        notes.append(f"{', '.join(backward)} read(s) index prefixes backwards wrongly (a customer's last order "
                     "is missed; HammerDB's Order-Status would commit without it): alloclab's TPC-C reads "
                     "forwards and fails a run that misses an order (warnings below).")
    notes = _between_machines(study) + _host_state(study) + notes
    unanswered = _unanswered(study)  # read once: it walks every failed row
    sentences = unanswered + sentences + notes
    lines = unanswered + lines + notes
    groups = [("", [x]) for x in unanswered] + groups + [("", [x]) for x in notes]
    decided = [v for v in primary if v.verdict != UNDECIDED]
    goals = {m.name for m in decide.stopping(study.rows, pol)}  # what the rounds go on for
    undecided = [v for v in vs if v.metric in goals and v.verdict == UNDECIDED]
    counts = defaultdict(int)
    for v in decided:
        counts[v.verdict] += 1
    stop = (study.schedule.get("stop") or {}).get("text", "")
    rounds = max((r.repeat for r in study.rows), default=0)  # rounds in which a run finished
    spent = study.schedule.get("elapsed_s")
    to_decide = _to_decide(study, undecided)
    where = study.where()
    others = [v for v in vs if v.metric != "throughput" and v.verdict != UNDECIDED]
    if not primary:
        headline = ("Nothing to compare: the study has no pair of " +
                    " or ".join(COMPARISON_NOUN[q] + "s" for q in pol.questions) + " with valid runs in the same cell.")
    elif lives:
        headline = life_headline(lives, by_q, where, limit_words(study))
    else:
        headline = answer_headline(primary, decided, counts, where)
    subline = (f"After {rounds} round(s)" + (f" in {fmt_duration(spent)}" if spent else "")
               + (f"; stopped: {stop}" if stop else "") + "."
               + (f" {to_decide}" if undecided and to_decide else "")
               + (" More rounds are needed." if undecided and not to_decide and (pol.decide_on or not decided) else "")
               + (f" Decided on latency or memory: {len(others)} (below)." if primary and not decided and others
                  else "")
               + " An answer about this machine (versions under Environment).")
    looks = pol.planned_looks
    look = (f"per-look level {100 * pol.confidence:.2f} %, for the {len(looks)} look(s) this study planned (after "
            f"round{'s' if len(looks) > 1 else ''} {', '.join(map(str, looks))}), so that over all of them the "
            "intervals hold together with about 95 % probability" if pol.adaptive
            else "one look after a fixed number of runs")
    turn = float(study.plan.get("slice_s") or 0)
    side = study.side_by_side
    paired = (f"the runs of a cell in one round measured in turns of {turn:g} s" if turn
              else f"the runs of one round run {side} at a time, side by side, sharing the machine, a cell's together"
              if side > 1 and study.whole_round
              else f"the runs of a cell in one round run {side} at a time, side by side, sharing the machine"
              if side > 1 else "runs of one round are interleaved")
    note = (f"Ratios are variant ÷ baseline, paired by round ({paired}); 95 % CI: t interval "
            f"of the mean log ratio ({look}). Verdict: faster/slower (higher/lower for latency and memory) when the "
            f"CI excludes 1, equivalent when it lies within ±{100 * pol.margin:g} %, else undecided."
            + metrics.own_margins([v.metric for v in vs], pol.margin, pol.margins,
                                  stats.signed_rank_min_pairs(pol.confidence))
            + (f" The rounds went on while comparisons of {', '.join(map(metrics.words, pol.decide_on))} were "
               "undecided (plan key decide_on); the others are told as they stand." if pol.decide_on and pol.adaptive
               else "")
            + (f" Where a cell's comparisons were decided, the decided allocators' places in later rounds went to "
               f"{more} more run(s) of its undecided ones, as many lives at once (a round's value of an allocator: "
               "the mean of its runs)."
               if (more := decide.more_runs(study.rows)) else ""))
    order = {m.name: i for i, m in enumerate(metrics.METRICS + metrics.LIFE)}
    table = sorted(vs, key=lambda v: (order.get(v.metric, 9), -_effect(v)))
    per = [v for vs_ in study.per_machine().values() for v in vs_]
    first = sorted(per, key=lambda v: (order.get(v.metric, 9), v.machine, -_effect(v)))
    first += [v for v in table if not v.machine]
    units = {tuple(v.base_unit): workload.of(rs[0].workload).headline_unit for v in vs
             if (rs := by_unit.get(tuple(v.base_unit)))}
    own = study.own_slopes()
    marked = {(v.metric, tuple(v.base_unit), tuple(v.var_unit)): m for v in primary
              if (m := causes.marks(causes.for_verdict(found, v), own))}
    return Answers(headline, sentences, note, table, to_decide, 100 * pol.margin, lines, groups, subline, where,
                   first if per else [], units, marked)


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
            vals = [getattr(r, column) for r in by_unit.get(tuple(unit), []) if getattr(r, column) is not None]
            sides.append(stats.median(vals) if vals else None)
        if None not in sides:
            parts.append(f"{label} {fmt.format(sides[0])} → {fmt.format(sides[1])}")
    return f" (why: {', '.join(parts)})" if parts else ""


def _finding_label(f) -> str:
    c = analyse.cell_dict(f.cell)
    threads = f"{c['threads']} thread{'s' if c['threads'] != 1 else ''}"
    return f"{c['engine']} {c['part']} ({decide.settings_of(f.cell)}, {threads}), {f.variant} vs {f.baseline}"


def _host_state(study: analyse.Study) -> list[str]:
    """Where comparisons depend on the host's state or drifted: once per cell where that is one
    fact about the baseline (its own speed moves differently from every other allocator's), and
    one line pointing at the marks on the forest plot and the table that holds each comparison's
    slope, its slow and fast regimes, the quiet-host ratio and the halves (report: dependence)."""
    found, out = study.findings(), []
    for o in study.own_slopes():
        if o.one_fact and o.difference and any(f.depends and f.cell == o.cell for f in found):
            b = o.slopes[o.baseline]
            out.append(f"{analyse.cell_dict(o.cell)['engine']} {analyse.cell_dict(o.cell)['part']}: "
                       f"{o.baseline}'s speed moves {'less' if o.difference.slope > 0 else 'more'} with the host's "
                       f"state than every other allocator's ({o.baseline} {b.slope:+.2f}, the others "
                       f"{o.pooled.slope:+.2f} pooled, on the {o.state}): the comparisons that depend on the "
                       f"host are one fact about {o.baseline}.")
    depends, drifted = sum(f.depends for f in found), sum(f.drifted for f in found)
    said = []
    if depends:
        said.append(f"{depends} comparison(s) depend on the host's load ({MARK_GLYPHS[causes.MARK_DEPENDS]} on the "
                    "forest plot)")
    if drifted:
        said.append(f"{drifted} drifted between the halves of the study ({MARK_GLYPHS[causes.MARK_DRIFTED]})")
    if said:
        out.append(" and ".join(said) + ": their slopes, slow and fast regimes, quiet-host ratios and halves are in "
                   "the table \"Dependence on the host's state\".")
    return out


# how the forest plot and its caption mark a comparison (causes.marks)
MARK_GLYPHS = {causes.MARK_DEPENDS: "◆", causes.MARK_BASELINES: "(the baseline's)", causes.MARK_DRIFTED: "~"}


def _between_machines(study: analyse.Study) -> list[str]:
    """On machines that differ: which comparisons their machines disagree on, by how much (not
    pooled: answered per machine above), and how many agree (pooled)."""
    reps = [r for r in study.between_machines() if r.key[0] == "throughput"]
    if not reps:
        return []
    words = [study.machine_words(fp) for fp in study.per_machine()]
    differ = [r for r in reps if r.outcome == replicate.DIFFERS]
    out = []
    for r in differ:
        first = next(v for v in r.verdicts if v is not None)
        parts = [f"{x.ratio:.3f} [{x.ci_low:.3f}, {x.ci_high:.3f}]" for x in r.against_first[1:] if x and x.ci_low]
        out.append(f"{cell_label(first)}: {first.variant} vs {first.baseline} differs between the machines "
                   f"(the others ÷ {words[0]}: {'; '.join(parts)}); answered per machine, not pooled.")
    agree = sum(r.outcome == replicate.REPLICATES for r in reps)
    out.append(f"The runs came from {len(words)} machines that differ ({'; '.join(words)}): {len(differ)} of "
               f"{len(reps)} throughput comparison(s) differ between them, {agree} replicate, "
               f"{len(reps) - len(differ) - agree} cannot tell; all but the differing ones are pooled.")
    # what to expect on one more machine of this kind (random effects over the study's machines)
    preds = replicate.new_machine(list(study.per_machine().values()), study.design.margin)
    return out + [s[:1].upper() + s[1:] + "." for s in replicate.new_machine_sentences(preds)]


def _unanswered(study: analyse.Study) -> list[str]:
    """A sentence for each engine none of whose runs counts: a question the study could not
    answer is said first, with the commonest reason, never left out silently."""
    out = []
    valid = {r.engine for r in study.valid()}
    for engine in sorted({r.engine for r in study.rows} - valid):
        bad = [r for r in study.rows if r.engine == engine]
        kinds: dict[str, list] = defaultdict(list)
        for r in bad:
            # the same failure with other numbers or names (customer names are upper case) is one kind
            kinds[re.sub(r"\d+|\b[A-Z]{3,}\b", "N", r.reason.split(";")[-1])[:100]].append(r)
        common = max(kinds.values(), key=len)
        out.append(f"On {engine}, no run is valid ({len(bad)} failed or unproved), so nothing about it is answered; "
                   f"{len(common)} of {len(bad)} for this reason, e.g.: {common[0].reason[:240]}.")
    return out


def _to_decide(study: analyse.Study, undecided: list[decide.Verdict]) -> str:
    """How many more rounds, and how much wall time at this study's pace, would decide the rest."""
    todo = [v for v in undecided if v.rounds_to_decide is not None]
    if not todo:
        return ""
    need = sorted(min(v.rounds_to_decide, 1000) for v in todo)
    walls, together = study.unit_walls(), int(study.plan.get("side_by_side") or 1)

    def cost(k: int) -> float:  # wall time of k more rounds of the units whose comparisons need <= k
        units = {u for v in todo if min(v.rounds_to_decide, 1000) <= k for u in (v.base_unit, v.var_unit)}
        return k * decide.round_wall(units, walls, together, study.whole_round)

    half = need[(len(need) - 1) // 2]
    lead = ""
    if len(need) > 2 and half < need[-1]:
        lead = (f"About {half} more round(s) (≈ {fmt_duration(cost(half))}) would decide "
                f"{sum(1 for k in need if k <= half)} of the {len(need)} undecided; ")
    rounds = need[-1]
    per_round = cost(rounds) / rounds if rounds else 0.0
    if rounds >= 1000:
        return (lead + "the smallest differences are too small for this noise: more than 1,000 further rounds "
                "would be needed; a quieter machine or longer windows would help more than rounds.")
    text = lead + f"{'all' if lead else 'About'} {rounds} more round(s) would decide the rest"
    if not study.design.adaptive:
        return (text + f" (this study ran a fixed number of runs: run it again without --runs, and with a budget of "
                f"about {fmt_duration((rounds + 3) * per_round * 1.1)})." if per_round > 0 else text + ".")
    if per_round > 0:
        total = (study.schedule.get("elapsed_s") or 0) + rounds * per_round
        text += (f" (≈ {fmt_duration(rounds * per_round)} more; alloclab run --resume {study.root} "
                 f"--budget {fmt_duration(total * 1.1)})")
    return text + "."


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
