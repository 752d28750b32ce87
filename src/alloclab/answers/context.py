"""What an answer says around its verdicts: the questions it could not answer, the machines
that differ, the comparisons that depend on the host's state, and what more rounds would
decide. From the analysed study alone."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from datetime import datetime

from alloclab.answers import analyse, causes, decide, metrics, replicate, stats, together
from alloclab.answers.wording import cell_label
from alloclab.core.units import fmt_duration
from alloclab.plan import flags
from alloclab.plan.design import PACE_SLACK
from alloclab.results.store import rounds_ran


def host_state(study: analyse.Study) -> list[str]:
    """Where comparisons depend on the host's state or drifted: once per cell where that is one
    fact about the baseline (its own speed moves differently from every other allocator's), and
    one line pointing at the marks on the forest plot and the table that holds each comparison's
    slope, its slow and fast regimes, the quiet-host ratio and the halves (report: dependence)."""
    found, out = study.findings(), []
    for o in study.own_slopes():
        if o.one_fact and o.difference and any(f.depends and f.cell == o.cell for f in found):
            b = o.slopes[o.baseline]
            out.append(f"{decide.cell_dict(o.cell)['engine']} {decide.cell_dict(o.cell)['part']}: "
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


def between_machines(study: analyse.Study) -> list[str]:
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


def unanswered(study: analyse.Study) -> list[str]:
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


def open_ahead(study: analyse.Study, undecided: list[decide.Verdict]) -> list[decide.Verdict]:
    """The comparisons a resumed study would go on with, where it has `undecided` ones: those open at
    the level of its next look (Design.ahead: one look more, so a few it decided may be open again,
    as the resumed study itself reckons them), with the rounds each would need at the levels after.
    The lives that ended (side_by_side_rounds) are read at that look at the level they were read at
    before (Design.level: no look after it sees more of them): theirs are `undecided`'s own."""
    if not undecided or not study.design.adaptive:
        return undecided
    ran = rounds_ran(study.rows)
    ahead = study.design.ahead(ran)
    told, ended = study.told(), _ended(study)
    return ([v for v in decide.verdicts(study.rows, ahead, decide.stopping(study.rows, ahead))
             if v.verdict == decide.UNDECIDED and not decide.told_apart(v, told) and v.var_unit[0] not in ended]
            + [v for v in undecided if v.var_unit[0] in ended])


def _ended(study: analyse.Study) -> set[str]:
    """The cells of the lives that ran their rounds (side_by_side_rounds) while the others went on."""
    return study.side_cells() if study.side_rounds() else set()


def to_decide(study: analyse.Study, undecided: list[decide.Verdict], now: list[decide.Verdict] | None = None) -> str:
    """How many more rounds, and how much wall time at this study's pace, would decide the rest
    (`undecided`: open_ahead's), each round of every open unit. `now`: the study's own undecided, so
    that those its next look opens again (decided at this look's level, open at the next one's) are
    counted apart from them."""
    todo = [v for v in undecided if v.rounds_to_decide is not None]
    ended = []
    if (lives := study.side_rounds()) and todo:  # the lives ran their rounds (side_by_side_rounds): no more on resume
        side = _ended(study)
        ended = [v for v in todo if v.var_unit[0] in side]
        todo = [v for v in todo if v.var_unit[0] not in side]
    if not ended:
        return _more_rounds(study, todo, now)
    said = f"The lives ran their {lives} rounds (plan key side_by_side_rounds); " + _more_lives(study, ended, lives)
    if not todo:
        return said
    return (_more_rounds(study, todo, now) + f" The lives' {len(ended)} undecided are not among them: "
            f"{said[0].lower()}" + said[1:])


def _more_lives(study: analyse.Study, ended: list[decide.Verdict], lives: int) -> str:
    """What more rounds of the lives would decide of their `ended` undecided, at the level a new
    study's one look reads them (their own): a new study of a preset with a larger --budget runs
    them (plan.flags scales the preset's lives with its budget), one of a plan file with a larger
    side_by_side_rounds."""
    need, half, by_half = _needs(ended)
    budget, pace = study.plan.get("budget"), _lives_pace(study.schedule, lives)
    follow = flags.lives_follow_budget(study.plan)

    def new_study(k: int) -> str:  # a new study whose lives run k more rounds: its budget scales them, and affords them
        if follow:
            total = lives + k
            seconds = max(float(budget) * total / lives, PACE_SLACK * pace * total)
            return f"--budget {fmt_duration(60 * math.ceil(seconds / 60))}"
        return f"side_by_side_rounds = {lives + k}"

    lead = ""
    if len(need) > 1 and half < need[-1]:
        lead = f"{half} more (a new study with {new_study(half)}) would decide {by_half} of the {len(need)}; "
    if need[-1] >= 1000:
        return ("more rounds of them take a new study: " + lead + "the others' differences are too small for "
                "this noise however many rounds ran.") if lead else \
            "more rounds of them would not decide them: their differences are too small for this noise."
    return ("more rounds of them take a new study: " + lead
            + (f"all {need[-1]} more ({new_study(need[-1])}) would decide the rest." if lead else
               f"{need[-1]} more (a new study with {new_study(need[-1])}) would decide them."))


def _needs(verdicts: list[decide.Verdict]) -> tuple[list[int], int, int]:
    """The rounds each of `verdicts` needs to be decided (at most 1000), sorted; their median; how
    many of them the median's rounds decide."""
    need = sorted(min(v.rounds_to_decide, 1000) for v in verdicts)
    half = need[(len(need) - 1) // 2]
    return need, half, sum(1 for k in need if k <= half)


def _lives_pace(schedule: dict, lives: int) -> float:
    """Seconds a round of the lives took, with what ran beside them in their rounds (rounds.json's
    starts, from round 1 to the first round after them); 0 where they are not known."""
    starts = {r.get("round"): r.get("started_at") for r in schedule.get("rounds") or ()}
    try:
        return (datetime.fromisoformat(starts[lives + 1]) - datetime.fromisoformat(starts[1])).total_seconds() / lives
    except (KeyError, TypeError, ValueError):
        return 0.0


def _key(v: decide.Verdict) -> tuple:
    return v.metric, tuple(v.base_unit), tuple(v.var_unit)


def _of_these(todo: list[decide.Verdict], now: list[decide.Verdict] | None) -> str:
    """What `todo` is, in words: "undecided", or, where a resume's next look reads some the study
    decided at its stricter level, "a resume goes on with (6 undecided, and 1 decided at this look
    that the next reads at 97.9 %)", so that they add up to the headline's count."""
    open_now = {_key(v) for v in now or ()}
    again = [v for v in todo if _key(v) not in open_now] if now is not None else []
    if not again:
        return "undecided"
    level = "/".join(sorted({f"{100 * v.confidence:.1f} %" for v in again}))
    return (f"a resume goes on with ({len(todo) - len(again)} undecided, and {len(again)} decided at this look "
            f"that the next reads at {level})")


def _more_rounds(study: analyse.Study, todo: list[decide.Verdict], now: list[decide.Verdict] | None = None) -> str:
    """to_decide's sentence for verdicts whose runs a resumed study runs again."""
    if not todo:
        return ""
    need, half, by_half = _needs(todo)
    walls, side = study.unit_walls(), int(study.plan.get("side_by_side") or 1)

    # every open unit runs in each of the rounds: a resumed study decides nothing before its next look
    # (one look, memory-life's, is at its last round), so none of them stops early
    units = {u for v in todo for u in (v.base_unit, v.var_unit)}

    def cost(k: int) -> float:  # wall time of k more rounds of the open units
        return k * together.round_wall(units, walls, side, study.whole_round, study.turns())

    elapsed = study.schedule.get("elapsed_s") or 0

    def budget(k: int) -> str:  # the budget whose rounds a resume plans at this pace (study.pace), whole minutes
        return fmt_duration(60 * math.ceil((elapsed + PACE_SLACK * cost(k)) / 60))

    lead = ""
    if len(need) > 2 and half < need[-1]:
        lead = (f"About {half} more round(s) (≈ {fmt_duration(cost(half))}"
                + (f"; --budget {budget(half)}" if study.design.adaptive and cost(half) > 0 else "")
                + f") would decide {by_half} of the {len(need)} {_of_these(todo, now)}; ")
    rounds = need[-1]
    per_round = cost(rounds) / rounds if rounds else 0.0
    if rounds >= 1000:
        floored = list(dict.fromkeys(v.variant for v in todo if v.rounds_to_decide >= 1000 and v.between_sd))
        if floored:
            return (lead + f"{', '.join(floored)} would stay undecided however many rounds ran: each ratio's spread "
                    "between studies on one machine (plan key between_studies_pct) alone leaves its interval too "
                    "wide to tell it from the margin.")
        return (lead + "the smallest differences are too small for this noise: more than 1,000 further rounds "
                "would be needed; a quieter machine or longer windows would help more than rounds.")
    text = lead + f"{'all' if lead else 'About'} {rounds} more round(s) would decide the rest"
    if not study.design.adaptive:
        return (text + f" (this study ran a fixed number of runs: run it again without --runs, and with a budget of "
                f"about {fmt_duration((rounds + 3) * per_round * PACE_SLACK)})." if per_round > 0 else text + ".")
    ran = rounds_ran(study.rows)
    if per_round > 0 and ran + rounds > study.design.max_rounds:  # a resume stops at max_rounds
        text += (f" (≈ {fmt_duration(rounds * per_round)} more, past the {study.design.max_rounds} rounds this "
                 f"study may run: run it again with --max-rounds {ran + rounds} and --budget {budget(rounds)})")
    elif per_round > 0:
        text += (f" (≈ {fmt_duration(rounds * per_round)} more; alloclab run --resume {study.root} "
                 f"--budget {budget(rounds)})")
    return text + "."


def _fewer_looks(pol, vs: list) -> str:
    """The comparisons read at a level of fewer looks than the study's (Design.level): those whose
    rounds all came before its first look."""
    lower = [v.confidence for v in vs if v.confidence < pol.confidence - 1e-9]
    if not lower:
        return ""
    levels = " or ".join(f"{100 * c:.2f} %" for c in sorted({round(c, 4) for c in lower}))
    return (f"; {len(lower)} comparison(s) whose rounds all came before the first look (the lives side by side, "
            f"which ended first) at {levels}: a later look reads their pairs "
            "again and adds no chance of error")


def method_note(study: analyse.Study, vs: list) -> str:
    """How the intervals were made: the pairing, the looks and the level, the verdict's rule and
    margins, what the rounds went on for, and the places decided allocators gave to open ones."""
    pol = study.design
    looks = pol.planned_looks
    look = ("one look after a fixed number of runs" if not pol.adaptive
            else f"one look, after round {looks[0]}: nothing was decided before it" if len(looks) == 1
            else f"per-look level {100 * pol.confidence:.2f} %, for the {len(looks)} look(s) this study planned (after "
            f"rounds {', '.join(map(str, looks))}), so that over all of them the intervals hold together with about "
            "95 % probability" + _fewer_looks(pol, vs))
    turn, own = study.turns_taken()
    side = study.side_by_side
    paired = (f"the runs of a cell in one round measured in turns of {turn:g} s" if turn
              else f"the runs of one round run {side} at a time, side by side, sharing the machine, a cell's together"
              if side > 1 and study.whole_round
              else f"the runs of a cell in one round run {side} at a time, side by side, sharing the machine"
              if side > 1 else "runs of one round are interleaved") + (
        f"; the steady loads alone, in turns of {own} s" if own else "") + (
        f", which went on after the lives' {n} rounds" if (n := study.side_rounds()) else "")
    return (f"Ratios are variant ÷ baseline, paired by round ({paired}); 95 % CI: t interval "
            f"of the mean log ratio ({look}). Verdict: faster/slower (higher/lower for latency and memory) when the "
            f"CI excludes 1, equivalent when it lies within ±{100 * pol.margin:g} %, else undecided."
            + metrics.own_margins([v.metric for v in vs], pol.margin, pol.margins,
                                  stats.signed_rank_min_pairs(pol.confidence))
            + metrics.between_words(vs, pol.between_own)
            + (f" The rounds went on while comparisons of {', '.join(map(metrics.words, pol.decide_on))} were "
               "undecided (plan key decide_on); the others are told as they stand." if pol.decide_on and pol.adaptive
               else "")
            + (f" Where a cell's comparisons were decided, the decided allocators' places in later rounds went to "
               f"{more} more run(s) of its undecided ones, as many lives at once (a round's value of an allocator: "
               "the mean of its runs)."
               if (more := decide.more_runs(study.rows)) else ""))
