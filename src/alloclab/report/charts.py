"""The report's charts, drawn with matplotlib as PNG and SVG: the verdicts' forest plot, bars per
cell, study 2's five, the allocator's share against threads, RSS timelines and TPC-C bars."""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "alloclab"  # stable ids: the same data gives the same SVG
matplotlib.rcParams["svg.fonttype"] = "path"  # text as paths: no font is ever fetched
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import transforms  # noqa: E402

from alloclab.answers import context, metrics  # noqa: E402
from alloclab.answers import sentences as answers  # noqa: E402
from alloclab.answers.analysis import Analysis, Chart, Groups  # noqa: E402
from alloclab.answers.decide import cell_dict  # noqa: E402
from alloclab.answers.metrics import THROUGHPUT, Metric  # noqa: E402
from alloclab.answers.table import Table  # noqa: E402
from alloclab.plan.design import EQUIVALENT, FASTER, HIGHER, LOWER, SLOWER, UNDECIDED  # noqa: E402

VERDICT_COLOURS = {FASTER: "#2a9d4b", LOWER: "#2a9d4b", SLOWER: "#c0392b", HIGHER: "#c0392b",
                   EQUIVALENT: "#2c6fbb", UNDECIDED: "#888888"}


def _colour(v) -> str:
    """A verdict's colour: green where the variant is better, red where worse (more of a life's
    given back is better: "higher" is green there), blue equivalent, grey undecided."""
    m = metrics.by_name(v.metric)
    if m is not None and m.higher_is_better and m is not THROUGHPUT and v.verdict in (HIGHER, LOWER):
        return VERDICT_COLOURS[LOWER if v.verdict == HIGHER else HIGHER]
    return VERDICT_COLOURS.get(v.verdict, "#888")


def _marks(ans: answers.Answers, v) -> tuple[str, ...]:
    """A comparison's marks on the forest plot (answers.causes.marks)."""
    return ans.marks.get((v.metric, tuple(v.base_unit), tuple(v.var_unit)), ())


def draw_verdicts(ans: answers.Answers, out: Path, metric: str = "throughput", limit: int = 40) -> tuple | None:
    """The forest plot of a question's verdicts: one row per comparison, grouped by cell, the
    ratio variant / baseline as a point with its 95 % CI, a line at 1 and the ±margin band,
    colour by verdict; the unit and the rounds behind each row in the caption."""
    vs = [v for v in (ans.machines_first or ans.verdicts) if v.metric == metric and v.ratio is not None][:limit]
    if not vs:
        return None
    cells: dict[tuple, list] = defaultdict(list)
    for v in vs:
        cells[answers.cell_label(v)].append(v)
    rows: list[tuple[str, object]] = []  # ("cell", label) or ("cmp", verdict), top to bottom
    for label, items in cells.items():
        rows.append(("cell", label))
        rows += [("cmp", v) for v in sorted(items, key=lambda v: v.variant)]
    height = 0.9 + 0.27 * len(rows)
    fig, ax = plt.subplots(figsize=(11, height))
    differs = metrics.differs(metric)  # a difference (a share's in points, or in its unit), 0 = none
    unit = "percentage points" if vs[0].unit == "points" else vs[0].unit

    def x(r: float) -> float:
        return metrics.delta(metric, r) if differs else r
    m = vs[0].margin_or(ans.margin_pct / 100)
    m = metrics.said_margin(metric, m) if differs else m
    mid = 0.0 if differs else 1.0
    ax.axvspan(mid - m, mid + m, color="#2c6fbb", alpha=0.10, lw=0)
    ax.axvline(mid, color="#333", lw=0.9)
    lows = [x(v.ci_low) for v in vs if v.ci_low] + [x(v.ratio) for v in vs]
    highs = [x(v.ci_high) for v in vs if v.ci_high] + [x(v.ratio) for v in vs]
    lo, hi = min(lows + [mid - 2 * m]), max(highs + [mid + 2 * m])
    pad = 0.06 * (hi - lo)
    ax.set_xlim(lo - pad, hi + pad)
    beside = transforms.blended_transform_factory(ax.transAxes, ax.transData)  # the numbers right of the axes
    labels = []
    for i, (kind, item) in enumerate(rows):
        y = len(rows) - 1 - i
        if kind == "cell":
            labels.append(item)
            ax.axhline(y - 0.5, color="#ddd", lw=0.6) if i else None
            continue
        v = item
        colour = _colour(v)
        fmt = "{:+.1f}" if differs else "{:.3f}"
        if v.ci_low is not None:
            ax.errorbar([x(v.ratio)], [y], xerr=[[x(v.ratio) - x(v.ci_low)], [x(v.ci_high) - x(v.ratio)]], fmt="o",
                        color=colour, capsize=3, ms=5)
            text = f"{fmt.format(x(v.ratio))} [{fmt.format(x(v.ci_low))}, {fmt.format(x(v.ci_high))}] {v.verdict}"
        else:
            ax.plot([x(v.ratio)], [y], "o", mfc="none", color="#888")
            text = f"{fmt.format(x(v.ratio))} (no interval yet) {v.verdict}"
        ax.text(1.02, y, text, va="center", fontsize=8, color=colour, transform=beside, clip_on=False)
        glyphs = " ".join(context.MARK_GLYPHS[k] for k in _marks(ans, v))
        labels.append(f"    {v.variant} vs {v.baseline}" + (f" {glyphs}" if glyphs else ""))
    ax.set_yticks(range(len(rows) - 1, -1, -1))
    ax.set_yticklabels(labels, fontsize=8)
    for t, (kind, _item) in zip(ax.get_yticklabels(), rows):
        if kind == "cell":
            t.set_fontweight("bold")
    what = metrics.words(metric)
    ax.set_xlabel(f"{what}: variant − baseline, {unit} (0 = no difference)" if differs
                  else f"{what}: ratio variant ÷ baseline (1 = no difference)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    fig.tight_layout()
    png, svg = _save(fig, out, f"verdicts_{metric}")
    n = [v.n_pairs or min(v.n_baseline, v.n_variant) for v in vs]
    own = metrics.by_name(metric).unit if metrics.by_name(metric) else ""
    units = sorted({(ans.headline_units.get(tuple(v.base_unit), "") if metric == THROUGHPUT.name else "") or own
                    for v in vs})
    title = what[:1].upper() + what[1:]
    how = (f"difference variant − baseline in {unit}" if differs else "ratio variant ÷ baseline")
    cap = (f"{title} ({', '.join(units)}): each comparison's {how} from paired runs "
           f"(dot) with its 95 % CI (bar), n = {min(n)}{'–' + str(max(n)) if max(n) != min(n) else ''} rounds per "
           f"row; line at {mid:g} = no difference; shaded band = equivalence margin ±{m if differs else 100 * m:g} "
           f"{vs[0].unit if differs else '%'}; colour = verdict "
           f"(green better, red worse, blue equivalent, grey undecided; hollow: no interval yet)."
           + (f" {context.MARK_GLYPHS['depends']}: the ratio depends on the host's load; "
              f"{context.MARK_GLYPHS['drifted']}: it drifted between the halves of the study (table: dependence on "
              "the host's state)." if any(_marks(ans, v) for v in vs) else "")
           + f" Measured on {ans.where}.")
    return png, svg, cap


def draw_cell_bars(an: Analysis, out: Path, m: Metric = THROUGHPUT, limit: int = 12) -> tuple | None:
    """Per cell, one bar per allocator: the median with its 95 % CI, y axis from zero."""
    summ = an.summaries[m.column]
    cells = list(dict.fromkeys(s.cell for s in summ))[:limit]
    if not cells:
        return None
    allocs = [a for a in an.allocators if any(s.allocator == a for s in summ)]
    by = {(s.cell, s.allocator): s for s in summ}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(cells) * max(len(allocs), 1) ** 0.6 + 2), 4.4))
    width = 0.8 / max(len(allocs), 1)
    ns = []
    for i, a in enumerate(allocs):
        meds, lo, hi = [], [], []
        for c in cells:
            s = by.get((c, a))
            st = s.stats if s else None
            ns += [st.n] if st else []
            meds.append(st.median / m.scale if st else 0)
            lo.append((st.median - st.ci_low) / m.scale if st and st.enough else 0)
            hi.append((st.ci_high - st.median) / m.scale if st and st.enough else 0)
        ax.bar([x + i * width for x in range(len(cells))], meds, width, yerr=[lo, hi], capsize=3, label=a)
    ax.set_xticks([x + width * (len(allocs) - 1) / 2 for x in range(len(cells))])
    ax.set_xticklabels([f"{c[0]}\n{c[1]} t{c[-1]}" for c in cells], fontsize=7)
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"{m.title} ({m.unit})")
    ax.set_title(f"{m.title} by allocator, per cell (median, 95 % CI)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    png, svg = _save(fig, out, f"cells_{m.column}")
    cap = (f"{m.title} in {m.unit}: bar = median of n runs per cell and allocator (n = {min(ns)}–{max(ns)}), error bar "
           f"= 95 % bootstrap CI of the median (none where n < 3); y axis starts at 0."
           + (f" First {limit} of {len(set(s.cell for s in summ))} cells." if len(set(s.cell for s in summ)) > limit
              else ""))
    return png, svg, cap


# --- charts (study 2's five, plus RSS timelines) ------------------------------------------

def chart_table(an: Analysis, spec: Chart) -> Table | None:
    """The data of a chart in the study's table shape: x | one column per allocator."""
    d = an.charts.get(spec.name)
    if d is None:
        return None
    allocs = list(d.allocators)
    t = Table(spec.name, f"{spec.title} ({spec.metric.unit}, median)", ["engine", spec.x] + allocs)
    for (engine, x), by in d.medians.items():
        meds = [by[a] for a in allocs]
        t.add([engine, str(x)] + [spec.metric.fmt(v) for v in meds], [engine, x] + meds)
    return t


def draw_host_state(an: Analysis, out: Path, limit: int = 6) -> tuple | None:
    """Beside the forest plot: each comparison's ratio against the host's state in its rounds, the
    least-squares line, and whether the ratio depends on it (those first)."""
    fs = sorted((f for f in an.findings if f.slope is not None), key=lambda f: not f.slope.depends)[:limit]
    if not fs:
        return None
    cols = min(3, len(fs))
    rows = (len(fs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.7 * rows), squeeze=False)
    for ax, f in zip(axes.flat, fs):
        xs, ys = [x for x, _y in f.points], [y for _x, y in f.points]
        colour = "#c0392b" if f.slope.depends else "#2c6fbb"
        ax.plot(xs, ys, "o", color=colour, ms=4)
        x0, x1 = min(xs), max(xs)
        mx, my = sum(xs) / len(xs), sum(math.log(y) for y in ys) / len(ys)
        ax.plot([x0, x1], [math.exp(my + f.slope.slope * (x - mx)) for x in (x0, x1)], color=colour, lw=1)
        ax.axhline(1, color="#333", lw=0.6)
        c = cell_dict(f.cell)
        ax.set_title(f"{c['engine']} {c['part']} t{c['threads']}: {f.variant}" + (" (depends)" if f.slope.depends
                                                                                  else ""), fontsize=8)
        ax.set_xlabel(f.slope.state, fontsize=7)
        ax.set_ylabel(f"÷ {f.baseline}", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(fs):]:
        ax.set_visible(False)
    fig.tight_layout()
    png, svg = _save(fig, out, "ratio_vs_host_state")
    cap = ("Each comparison's ratio (throughput, variant ÷ baseline) in each round against the host's state in that "
           "round (the other runs' speed against their medians; busy share where a round has no other run), with the "
           "least-squares line; red: the 95 % interval of the slope excludes 0, the ratio depends on the host's load.")
    return png, svg, cap


def _save(fig, out: Path, name: str) -> tuple[Path, Path]:
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    fig.savefig(png, dpi=110, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return png, svg


def draw_chart(an: Analysis, spec: Chart, out: Path) -> tuple[Path, Path] | None:
    data = an.charts.get(spec.name)
    if data is None:
        return None
    rows = data.rows
    if spec.kind == "line" and len({r.value(spec.x) for r in rows}) < 2:
        return None  # a line "vs threads" through one thread count is a dot per allocator: the bars say it
    engines = data.panels
    allocs = data.allocators
    fig, axes = plt.subplots(1, len(engines), figsize=(5.2 * len(engines), 4), squeeze=False)
    for ax, engine in zip(axes[0], engines):
        er = [r for r in rows if spec.panel(r) == engine]
        if spec.kind == "line":
            for a in allocs:
                points = data.lines[(engine, a)]
                xs = [x for x, _ in points]
                ds = [d for _, d in points]
                ys = [d.median for d in ds]
                lo = [d.median - d.ci_low if d.enough else 0 for d in ds]
                hi = [d.ci_high - d.median if d.enough else 0 for d in ds]
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=a)
            ax.set_xlabel(spec.x)
            if spec.logx:
                ax.set_xscale("log")
            ticks = sorted({r.value(spec.x) for r in er})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(t) for t in ticks])
            ax.set_ylim(bottom=0)
        else:
            groups, meds = data.bars[engine]
            width = 0.8 / max(len(allocs), 1)
            for i, a in enumerate(allocs):
                ys = meds[a]
                ax.bar([g + i * width for g in range(len(groups))], ys, width, label=a)
            ax.set_xticks([g + width * (len(allocs) - 1) / 2 for g in range(len(groups))])
            ax.set_xticklabels(groups)
        ax.set_title(engine)
        ax.set_ylabel(f"{spec.metric.title} ({spec.metric.unit})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(spec.title)
    fig.tight_layout()
    return _save(fig, out, spec.name)


def draw_rss_timelines(an: Analysis, out: Path) -> tuple[Path, Path] | None:
    """RSS over time of the process under test, per engine, for the cell with the largest peak."""
    if not an.rss:
        return None
    fig, axes = plt.subplots(1, len(an.rss), figsize=(5.2 * len(an.rss), 4), squeeze=False)
    for ax, tl in zip(axes[0], an.rss):
        for alloc, ts, mib in tl.lines:
            ax.plot(list(ts), list(mib), label=alloc)
        ax.set_title(tl.title, fontsize=8)
        ax.set_xlabel("seconds since start")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("RSS timeline of the process under test")
    fig.tight_layout()
    return _save(fig, out, "rss_timeline")


PHASE_SHADES = {"burst": "#f4a261", "idle": "#b0bec5"}  # a life's bursts and idle phases; steady: unshaded
LIFE_POINTS = 900  # at most this many samples drawn per line (every n-th: a line, not a cloud)


def draw_life(lives: list[dict], out: Path) -> tuple[Path, Path] | None:
    """RSS over whole lives, one panel per life (workloads.life's section data): one line per
    allocator, the phases of the baseline's run shaded (bursts orange, idle grey), the cgroup's
    limit dashed where there is one, a cross where the kernel killed a run."""
    if not lives:
        return None
    fig, axes = plt.subplots(len(lives), 1, figsize=(11, 3.6 * len(lives)), squeeze=False)
    for ax, lf in zip(axes[:, 0], lives):
        for kind, t0, t1 in lf["phases"]:
            if kind in PHASE_SHADES:
                ax.axvspan(t0, t1, color=PHASE_SHADES[kind], alpha=0.35, lw=0)
        for line in lf["lines"]:
            step = max(1, math.ceil(len(line["t"]) / LIFE_POINTS))
            t, mib = line["t"][::step] + line["t"][-1:], line["mib"][::step] + line["mib"][-1:]
            (drawn,) = ax.plot(t, mib, lw=1.1, label=line["label"])
            if line["killed"] and t:
                ax.plot([t[-1]], [mib[-1]], "x", color=drawn.get_color(), ms=9, mew=2)
        if lf["limit_mib"]:
            ax.axhline(lf["limit_mib"], ls="--", color="#c0392b", lw=1)
            ax.text(0.0, lf["limit_mib"], " cgroup limit", va="bottom", fontsize=7, color="#c0392b",
                    transform=transforms.blended_transform_factory(ax.transAxes, ax.transData))
        ax.set_title(lf["title"], fontsize=9)
        ax.set_xlabel("seconds since the life began")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, ncol=3, loc="lower right")
    fig.tight_layout()
    return _save(fig, out, "life_rss")


def draw_frontier(ans: answers.Answers, out: Path) -> tuple[Path, Path] | None:
    """Memory against speed, one panel per life (answers.lives.frontier): each allocator and setting
    a point at its change of RSS over the engine's account (x) and of steady throughput (y) against
    the baseline (the origin), each with its 95 % interval; the study's margin shaded on y; ringed:
    the leanest that costs no speed, boxed: the leanest overall."""
    lives = [f for f in ans.frontier if f["points"]]
    if not lives:
        return None
    fig, axes = plt.subplots(1, len(lives), figsize=(4.6 * len(lives) + 0.6, 4.4), squeeze=False)
    m = ans.margin_pct
    for ax, f in zip(axes[0], lives):
        ax.axhspan(-m, m, color="#2c6fbb", alpha=0.10, lw=0)
        ax.axhline(0, color="#333", lw=0.8)
        ax.axvline(0, color="#333", lw=0.8)
        ax.plot([0], [0], "s", color="#333", ms=5)
        ax.annotate(f["baseline"], (0, 0), fontsize=7, xytext=(4, -9), textcoords="offset points")
        for p in f["points"]:
            y = 0.0 if p.y is None else p.y
            xerr = [[p.x - p.x_ci[0]], [p.x_ci[1] - p.x]] if p.x_ci else None
            yerr = [[y - p.y_ci[0]], [p.y_ci[1] - y]] if p.y_ci else None
            colour = VERDICT_COLOURS.get(SLOWER if SLOWER == p.y_verdict or HIGHER == p.x_verdict else
                                         LOWER if p.x_verdict == LOWER else UNDECIDED, "#888")
            ax.errorbar([p.x], [y], xerr=xerr, yerr=yerr, fmt="o" if p.y is not None else "x", color=colour,
                        capsize=2, ms=5, lw=0.9)
            if p.variant == f["free"]:
                ax.plot([p.x], [y], "o", mfc="none", mec="#2a9d4b", ms=13, mew=1.6)
            if p.variant == f["leanest"] and f["leanest"] != f["free"]:
                ax.plot([p.x], [y], "s", mfc="none", mec="#c0392b", ms=13, mew=1.6)
            ax.annotate(p.variant, (p.x, y), fontsize=7, xytext=(5, 4), textcoords="offset points")
        ax.set_title(f["title"], fontsize=8)
        ax.set_xlabel("RSS over the engine's account vs baseline (%)\n← leaner", fontsize=8)
        ax.set_ylabel("steady throughput vs baseline (%)" + (" (alone, in turns)" if f["speed_alone"] else ""),
                      fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return _save(fig, out, "frontier")


def draw_grouped_bars(g: Groups, out: Path, name: str, title: str, ylabel: str) -> tuple | None:
    """Grouped bars: one group per label (an engine and profile), one bar per allocator, median
    with its 95 % CI (answers.analysis.grouped)."""
    if g is None:
        return None
    groups, allocs = g.groups, g.allocators
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) * max(len(allocs), 1) ** 0.5 + 3), 4.2))
    width = 0.8 / max(len(allocs), 1)
    for i, a in enumerate(allocs):
        meds, lo, hi = [], [], []
        for label in groups:
            d = g.stats.get((label, a))
            meds.append(d.median if d else 0)
            lo.append(d.median - d.ci_low if d and d.enough else 0)
            hi.append(d.ci_high - d.median if d and d.enough else 0)
        ax.bar([x + i * width for x in range(len(groups))], meds, width, yerr=[lo, hi], capsize=3, label=a)
    ax.set_xticks([x + width * (len(allocs) - 1) / 2 for x in range(len(groups))])
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, out, name)
