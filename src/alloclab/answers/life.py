"""Memory over a server's life: what a run keeps after each cycle, what it gives back
after a burst, what nobody accounts for, and whether the kernel killed it.

A life is cycles of phases (`Phase`: steady load, a burst, idle), each with its start and end on
the clock of the run's samples (`t_s` of samples.csv). Everything here is a pure function of
plain data: a timeline is a list of (t_s, bytes) sorted by time; an allocator's account is a
list of (t_s, live_bytes, resident_bytes); OOM counter readings are (t_s, kills). `read_rss`
is the one reader of a stored run folder.

The rule for a phase's end value (`end_value`, `settled_rss`): the median of the samples in the
last 20 % of the phase (SETTLE_SHARE); where none falls there (an account polled once in a
while), the last sample inside the phase; where the phase holds none, unknown (None). A median
over the phase's tail ignores a single jump of the reading and still follows a real release.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scipy import stats as _scipy_stats

from alloclab.catalog.names import LIFE_PHASE_KINDS
from alloclab.core.errors import AlloclabError

MIB = 1024 * 1024
PHASE_KINDS = LIFE_PHASE_KINDS  # steady, burst, idle: the plan's kinds of phase
SETTLE_SHARE = 0.2
MIN_EXCESS_BYTES = MIB  # a burst that took less than this above its settled RSS gave nothing to give back
SAMPLES_CSV = "samples.csv"

Timeline = Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Phase:
    """One phase of one cycle of a life, on the clock of the run's samples."""

    cycle: int
    name: str
    kind: str
    t_start_s: float
    t_end_s: float

    @property
    def duration_s(self) -> float:
        return self.t_end_s - self.t_start_s


def phases(rows: Iterable[Sequence]) -> list[Phase]:
    """Phases from (cycle, name, kind, t_start_s, t_end_s) rows, checked: a known kind, a positive
    length, in time order without overlap."""
    out = [r if isinstance(r, Phase) else Phase(int(r[0]), str(r[1]), str(r[2]), float(r[3]), float(r[4]))
           for r in rows]
    for p in out:
        if p.kind not in PHASE_KINDS:
            raise AlloclabError(f"phase {p.name!r} of cycle {p.cycle} is of kind {p.kind!r}",
                                f"give each phase one of the kinds {', '.join(PHASE_KINDS)}")
        if not p.t_end_s > p.t_start_s:
            raise AlloclabError(f"phase {p.name!r} of cycle {p.cycle} ends at {p.t_end_s} s, not after its start "
                                f"at {p.t_start_s} s", "give each phase a start before its end")
    for a, b in zip(out, out[1:]):
        if b.t_start_s < a.t_end_s or b.cycle < a.cycle:
            raise AlloclabError(f"phase {b.name!r} of cycle {b.cycle} starts before phase {a.name!r} of cycle "
                                f"{a.cycle} ends", "list the phases in time order, one after the other")
    return out


def _checked(timeline: Timeline, what: str) -> list[tuple[float, float]]:
    points = [(float(t), float(v)) for t, v in timeline]
    if any(b[0] < a[0] for a, b in zip(points, points[1:])):
        raise AlloclabError(f"the {what} timeline is not in time order", "sort the samples by t_s")
    return points


def _inside(timeline: Timeline, t_from_s: float, t_to_s: float) -> list[float]:
    return [v for t, v in timeline if t_from_s <= t <= t_to_s]


def end_value(timeline: Timeline, phase: Phase, share: float = SETTLE_SHARE) -> float | None:
    """A timeline's value at the end of `phase` by the module's rule: the median of its samples in
    the phase's last `share`, else its last sample inside the phase, else None."""
    tail = _inside(timeline, phase.t_end_s - share * phase.duration_s, phase.t_end_s)
    if tail:
        return float(statistics.median(tail))
    whole = _inside(timeline, phase.t_start_s, phase.t_end_s)
    return whole[-1] if whole else None


def settled_rss(timeline: Timeline, phase: Phase, share: float = SETTLE_SHARE) -> float | None:
    """RSS settled at the end of an idle phase (bytes; see the module's rule), None without samples."""
    if phase.kind != "idle":
        raise AlloclabError(f"phase {phase.name!r} of cycle {phase.cycle} is {phase.kind}, not idle",
                            "ask for settled RSS at the end of idle phases only")
    return end_value(timeline, phase, share)


@dataclass(frozen=True)
class Creep:
    """The slope of a value over cycles (MiB per cycle) with its interval; an interval needs three
    cycles or more (`note` says why one is missing)."""

    slope_mib_per_cycle: float | None
    ci_low_mib_per_cycle: float | None
    ci_high_mib_per_cycle: float | None
    cycles: int
    confidence: float
    note: str = ""

    def contains(self, mib_per_cycle: float) -> bool:
        """Whether a rate lies inside the interval (False where there is none)."""
        if self.ci_low_mib_per_cycle is None or self.ci_high_mib_per_cycle is None:
            return False
        return self.ci_low_mib_per_cycle <= mib_per_cycle <= self.ci_high_mib_per_cycle


def warm(points: Iterable[tuple[int, float | None]], least: int = 2) -> list[tuple[int, float | None]]:
    """A life's (cycle, value) points once warm: those read after the first cycle read, where `least` or
    more are (a slope needs two, a median one); else all read. The first cycle is the engine's
    warm-up (its caches and pool fill, its first sessions start): PostgreSQL's pool settled at 25
    MiB after cycle 1 and at 46 MiB after each of the next seven under glibc, which an OLS slope
    over all eight read as +1.8 MiB a cycle of creep where there was none after the first (+0.1 from
    cycle 2 on). Given back and RSS over the account leave it out too."""
    read = [(c, v) for c, v in points if v is not None]
    later = [(c, v) for c, v in read if c > read[0][0]] if read else []
    return later if len(later) >= least else read


def creep(points: Iterable[tuple[int, float | None]], confidence: float = 0.95) -> Creep:
    """OLS slope of (cycle, bytes) points in MiB per cycle, with its t interval (n − 2 degrees of
    freedom). Points whose value is None (a phase without samples) are left out. With two cycles
    the slope is known and its interval is not; with fewer, neither."""
    pts = [(float(c), float(v) / MIB) for c, v in points if v is not None]
    n = len(pts)
    if n < 2:
        return Creep(None, None, None, n, confidence, f"{n} cycle(s) with a settled value: a slope needs two")
    xs, ys = [x for x, _ in pts], [y for _, y in pts]
    x_mean, y_mean = sum(xs) / n, sum(ys) / n
    sxx = sum((x - x_mean) ** 2 for x in xs)
    if sxx == 0:
        raise AlloclabError("every settled value belongs to the same cycle", "give each value its own cycle number")
    slope = sum((x - x_mean) * (y - y_mean) for x, y in pts) / sxx
    if n == 2:
        return Creep(slope, None, None, n, confidence, "two cycles: the slope is known, its interval is not "
                     "(a life of three cycles or more gives one)")
    sse = sum((y - (y_mean + slope * (x - x_mean))) ** 2 for x, y in pts)
    half = float(_scipy_stats.t.ppf(1 - (1 - confidence) / 2, n - 2)) * math.sqrt(sse / (n - 2) / sxx)
    return Creep(slope, slope - half, slope + half, n, confidence)


@dataclass(frozen=True)
class GivenBack:
    """What one burst took above the settled RSS before it, and how much of it the idle phase after
    it returned. `share` is (peak − settled at the idle's end) ÷ excess: above 1 where the idle
    phase returned more than the burst took, below 0 where RSS kept growing. `half_s`: from the
    idle phase's start to the first sample at or below peak − excess/2 (0 when already there);
    None if never. `warmup`: the burst is in the life's first cycle, while the server still fills
    its caches and pools: its excess is mostly that filling, and the life's share leaves it out."""

    cycle: int
    burst: str
    before_bytes: float | None
    peak_bytes: float | None
    excess_bytes: float | None
    after_bytes: float | None
    share: float | None
    half_s: float | None
    note: str = ""
    warmup: bool = False


def _before(timeline: Timeline, burst: Phase, life: Sequence[Phase]) -> tuple[float | None, str]:
    """The settled RSS before a burst: the last idle phase's that ended before it, else the median
    of the steady phase(s) before it."""
    earlier = [p for p in life if p.t_end_s <= burst.t_start_s]
    idle = [p for p in earlier if p.kind == "idle"]
    if idle:
        return settled_rss(timeline, idle[-1]), f"settled at the end of {idle[-1].name!r} of cycle {idle[-1].cycle}"
    steady = [v for p in earlier if p.kind == "steady" for v in _inside(timeline, p.t_start_s, p.t_end_s)]
    if steady:
        return float(statistics.median(steady)), "the median of the steady load before the first burst"
    return None, "no idle or steady phase before it"


def given_back(timeline: Timeline, life: Sequence[Phase], min_excess_bytes: float = MIN_EXCESS_BYTES
               ) -> list[GivenBack]:
    """For each burst of `life`: its excess over the settled RSS before it, the share of that excess
    returned by the end of the next idle phase, and the time that phase took to return half."""
    tl, life = _checked(timeline, "RSS"), phases(life)
    first_cycle = min((p.cycle for p in life), default=0)
    out = []
    for burst in (p for p in life if p.kind == "burst"):
        before, source = _before(tl, burst, life)
        during = _inside(tl, burst.t_start_s, burst.t_end_s)
        peak = max(during) if during else None
        idle = next((p for p in life if p.kind == "idle" and p.t_start_s >= burst.t_end_s), None)
        after = settled_rss(tl, idle) if idle else None
        row = {"cycle": burst.cycle, "burst": burst.name, "before_bytes": before, "peak_bytes": peak,
               "after_bytes": after, "excess_bytes": None, "share": None, "half_s": None,
               "warmup": burst.cycle == first_cycle}
        if before is None or peak is None:
            out.append(GivenBack(**row, note="no samples " + ("before the burst" if before is None else "in it")))
            continue
        excess = peak - before
        row["excess_bytes"] = excess
        if excess < min_excess_bytes:
            out.append(GivenBack(**row, note=f"the burst took {excess / MIB:.2f} MiB above {source}: "
                                 "nothing to give back"))
            continue
        if idle is None or after is None:
            out.append(GivenBack(**row, note="no idle phase with samples after the burst"))
            continue
        half_at = peak - excess / 2
        crossed = next((t for t, v in tl if idle.t_start_s <= t <= idle.t_end_s and v <= half_at), None)
        row["share"] = (peak - after) / excess
        row["half_s"] = None if crossed is None else max(0.0, crossed - idle.t_start_s)
        out.append(GivenBack(**row, note=f"excess over {source}" + (
            "" if crossed is not None else f"; half was never given back within {idle.name!r}") + (
            "; in the first cycle, the engine still warming up: left out of the life's share"
            if row["warmup"] else "")))
    return out


@dataclass(frozen=True)
class IdleEnd:
    """Memory at the end of one idle phase: RSS, what the engine says it holds, and the
    allocator's own live and resident bytes (None where not given or not sampled)."""

    cycle: int
    phase: str
    rss_bytes: float | None
    engine_bytes: float | None = None
    over_engine_bytes: float | None = None
    alloc_live_bytes: float | None = None
    alloc_resident_bytes: float | None = None
    alloc_kept_bytes: float | None = None  # resident − live: what the allocator holds that nobody uses


def idle_ends(timeline: Timeline, life: Sequence[Phase], engine: Timeline | None = None,
              account: Sequence[tuple[float, float, float]] | None = None) -> list[IdleEnd]:
    """Each idle phase's end by the module's rule: RSS, RSS − the engine's own account (`engine`:
    (t_s, accounted bytes), e.g. MariaDB's Memory_used), and the allocator's resident − live
    (`account`: (t_s, live_bytes, resident_bytes))."""
    tl, life = _checked(timeline, "RSS"), phases(life)
    eng = _checked(engine, "engine account") if engine is not None else None
    live = _checked([(t, lv) for t, lv, _ in account], "allocator account") if account is not None else None
    resident = [(float(t), float(r)) for t, _, r in account] if account is not None else None
    out = []
    for p in (p for p in life if p.kind == "idle"):
        rss = settled_rss(tl, p)
        e = end_value(eng, p) if eng is not None else None
        lv = end_value(live, p) if live is not None else None
        rs = end_value(resident, p) if resident is not None else None
        out.append(IdleEnd(p.cycle, p.name, rss, e, None if rss is None or e is None else rss - e,
                           lv, rs, None if lv is None or rs is None else rs - lv))
    return out


@dataclass(frozen=True)
class Overhead:
    """The overheads at the idle ends summarised: medians (bytes) and their growth over cycles
    (an engine's account may count what it reserved, not what is resident: compare growth with
    growth). `over_engine_warm_bytes`: RSS − engine account once warm, the median of the ends after
    the first one read (the first cycle is the engine's warm-up, as given back leaves it out; one
    end's reading depends on where the allocator's own purging stood: PostgreSQL's pool under
    mimalloc read 39, 33 and 29 MiB at the last idle ends of three lives whose ends from cycle 2
    on had medians of 38.6, 38.3 and 39.4 MiB); the ends it has where it has no later one."""

    over_engine_median_bytes: float | None
    over_engine_creep: Creep
    alloc_kept_median_bytes: float | None
    alloc_kept_creep: Creep
    over_engine_warm_bytes: float | None = None


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(statistics.median(known)) if known else None


def overhead(ends: Sequence[IdleEnd], confidence: float = 0.95) -> Overhead:
    """Medians and creep of RSS − engine account and of the allocator's resident − live."""
    over = [(e.cycle, e.over_engine_bytes) for e in ends]
    return Overhead(_median(e.over_engine_bytes for e in ends),
                    creep(over, confidence),
                    _median(e.alloc_kept_bytes for e in ends),
                    creep([(e.cycle, e.alloc_kept_bytes) for e in ends], confidence),
                    _median(v for _, v in warm(over, least=1)))


def oom_kills(text: str) -> int:
    """The OOM-kill counter of a cgroup: the `oom_kill N` line of cgroup v2's memory.events or of
    cgroup v1's memory.oom_control (not `oom_group_kill` nor `oom_kill_disable`)."""
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["oom_kill"]:
            if len(parts) != 2 or not parts[1].isdigit():
                raise AlloclabError(f"the cgroup's line {line.strip()!r} is not 'oom_kill N'",
                                    "give the whole text of memory.events or memory.oom_control, as read")
            return int(parts[1])
    raise AlloclabError("the cgroup's memory file has no 'oom_kill N' line, so OOM kills cannot be counted",
                        "read memory.events (cgroup v2) or memory.oom_control (cgroup v1) on Linux 4.13 or newer")


@dataclass(frozen=True)
class Oom:
    """Whether the run's cgroup killed something, and where in the life: the kill happened after
    `t_before_s` (the last reading that had not counted it) and by `t_seen_s`; it is placed in the
    phase holding `t_seen_s`, or, where that is outside the life (the counter read after the end),
    in the phase holding `t_before_s`."""

    killed: bool
    kills: int
    t_before_s: float | None = None
    t_seen_s: float | None = None
    cycle: int | None = None
    phase: str | None = None
    phase_kind: str | None = None


def oom_outcome(readings: Sequence[tuple[float, int]], life: Sequence[Phase]) -> Oom:
    """From OOM-kill counter readings over a run (t_s, count; the first taken before the life
    starts): killed or not, how many kills, and the first kill's cycle and phase."""
    pts = _checked(readings, "OOM counter")
    if not pts:
        raise AlloclabError("no reading of the OOM-kill counter", "read the cgroup's counter at the start of the run "
                            "and with every RSS sample")
    if any(b[1] < a[1] for a, b in zip(pts, pts[1:])):
        raise AlloclabError("the OOM-kill counter went down during the run: the cgroup was replaced",
                            "keep one cgroup for the whole run and read its counter only")
    start = pts[0][1]
    kills = int(pts[-1][1] - start)
    seen = next((i for i, (_, v) in enumerate(pts) if v > start), None)
    if seen is None:
        return Oom(False, 0)
    t_before, t_seen = pts[seen - 1][0], pts[seen][0]
    life = phases(life)

    def holding(t):
        return next((p for p in life if p.t_start_s <= t <= p.t_end_s), None)
    where = holding(t_seen) or holding(t_before)
    return Oom(True, kills, t_before, t_seen, where.cycle if where else None, where.name if where else None,
               where.kind if where else None)


@dataclass(frozen=True)
class Life:
    """Everything measured of one run's life, as stored answers need it (`to_json`)."""

    settled: list[tuple[int, str, float | None]]  # (cycle, idle phase, settled RSS bytes)
    creep: Creep
    given_back: list[GivenBack]
    ends: list[IdleEnd]
    overhead: Overhead
    oom: Oom | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def measure(timeline: Timeline, life: Sequence[Phase], engine: Timeline | None = None,
            account: Sequence[tuple[float, float, float]] | None = None,
            oom_readings: Sequence[tuple[float, int]] | None = None, confidence: float = 0.95) -> Life:
    """One run's life measured: settled RSS per cycle and its creep, given back per burst, the
    overheads at the idle ends, and the OOM outcome where counter readings are given. A run
    killed part-way is measured over the phases its samples reach."""
    tl, life = _checked(timeline, "RSS"), phases(life)
    ends = idle_ends(tl, life, engine, account)
    settled = [(e.cycle, e.phase, e.rss_bytes) for e in ends]
    notes = [f"no RSS samples at the end of {name!r} of cycle {c}" for c, name, v in settled if v is None]
    return Life(settled, creep(warm([(c, v) for c, _, v in settled]), confidence), given_back(tl, life), ends,
                overhead(ends, confidence), oom_outcome(oom_readings, life) if oom_readings is not None else None,
                notes)


def read_rss(run_dir: Path, name: str = SAMPLES_CSV) -> list[tuple[float, int]]:
    """The RSS timeline (t_s, rss_bytes) of a stored run: its samples.csv (the process under test
    sampled at 20 Hz; a server's whole process tree summed) or client_samples.csv."""
    path = Path(run_dir) / name
    if not path.is_file():
        raise AlloclabError(f"{path} does not exist", "give the folder of a finished run (runs/<run_id>/)")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if not {"t_s", "rss_bytes"} <= set(reader.fieldnames or ()):
            raise AlloclabError(f"{path} has no t_s and rss_bytes columns", "give a samples file that alloclab wrote")
        return [(float(r["t_s"]), int(r["rss_bytes"])) for r in reader]


@dataclass(frozen=True)
class Kills:
    """OOM kills of a variant against its baseline over the rounds both ran (paired by round):
    how many rounds each was killed in, the discordant rounds, and McNemar's exact two-sided p
    (a binomial test of the discordant rounds at one half). `word`: "fewer kills" or "more kills"
    where p < alpha, else "not told apart" (or "none killed")."""

    rounds: int
    base_killed: int
    var_killed: int
    only_base: int  # rounds in which the baseline was killed and the variant survived
    only_var: int
    p: float | None
    word: str


def kills(base: dict[int, bool], var: dict[int, bool], alpha: float = 0.05) -> Kills:
    """Survived against killed, counted over the rounds both sides ran (round -> killed)."""
    both = sorted(set(base) & set(var))
    b = sum(base[r] and not var[r] for r in both)
    c = sum(var[r] and not base[r] for r in both)
    killed_b, killed_v = sum(base[r] for r in both), sum(var[r] for r in both)
    if not killed_b and not killed_v:
        return Kills(len(both), 0, 0, 0, 0, None, "none killed")
    p = float(_scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue) if b + c else 1.0
    word = "not told apart" if p >= alpha else ("fewer kills" if b > c else "more kills")
    return Kills(len(both), killed_b, killed_v, b, c, p, word)
