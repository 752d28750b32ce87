"""A study's design: the questions it may ask, the bar for an answer, and the rounds at which it
looks at its comparisons. Plain numbers and rules: the verdicts that use them are answers.decide's."""

from __future__ import annotations

import math

QUESTIONS = ("allocators", "engines", "profiles")
DEFAULT_TARGET_CI = 0.02
DEFAULT_MIN_RUNS = 3
DEFAULT_MAX_ROUNDS = 30
DEFAULT_MARGIN = 0.02  # "equivalent" when the whole interval sits inside 1 +- this


# A study that runs rounds until its comparisons are decided looks at them only at a few
# planned rounds, not after every round: each look costs confidence (see stats.look_alpha), so
# fewer looks give narrower intervals at the same overall error. The looks: from round 4 (a
# t interval on 3 pairs is too wide to decide much), each about 1.5 times the one before, and
# the last round the study plans (its budget's worth of rounds, or max_rounds).
FIRST_LOOK = 4
LOOK_RATIO = 1.5
OVERALL_ALPHA = 0.035  # Pocock's per-look level for this overall error keeps t intervals under 5 % (simulated)


def plan_looks(last: int, min_runs: int = DEFAULT_MIN_RUNS, done: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The rounds a study looks at, ending at `last`: the looks `done` already (a study resumed
    with more budget keeps them), then from max(min_runs, 4) on, each about 1.5 times the last."""
    out = [x for x in done if x < last]
    nxt = max(min_runs, FIRST_LOOK) if not out else max(out[-1] + 1, math.ceil(out[-1] * LOOK_RATIO))
    while nxt < last:
        out.append(nxt)
        nxt = max(nxt + 1, math.ceil(nxt * LOOK_RATIO))
    if out and out[-1] not in done and last < out[-1] * 1.25:
        out.pop()  # the last planned look would come right before the end: the end is the look
    return tuple(out) + (max(last, 1),)


def taken_looks(design: dict, stop: dict | None, rounds: int) -> tuple[int, ...]:
    """The looks of a design as the study took them. A study its budget stopped after its
    second-to-last look but before its last takes the last look at the last round it ran: the
    number of looks, and so each look's level, stays, and when a budget ends depends on time,
    never on the ratios (the rounds after the previous look are not thrown away)."""
    looks = tuple(design.get("looks") or ())
    if (looks and stop and stop.get("reason") == "budget" and rounds < looks[-1]
            and (len(looks) < 2 or looks[-2] < rounds)):
        return looks[:-1] + (rounds,)
    return looks


def default_questions(allocators: list[str], engines: list[str]) -> list[str]:
    if len(allocators) > 1:
        return ["allocators"]
    return ["engines"] if len(engines) > 1 else ["allocators"]
