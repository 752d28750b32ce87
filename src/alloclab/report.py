"""The report of a results folder, rebuilt from its stored files alone.

    report/report.html   one self-contained file (inline CSS and SVG, no script, no request)
    report/report.md     the same tables in Markdown, charts linked as PNG
    report/tables/       every table as .csv and .md
    report/charts/       every chart as .png and .svg
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "alloclab"  # stable ids: the same data gives the same SVG
matplotlib.rcParams["svg.fonttype"] = "path"  # text as paths: no font is ever fetched
import matplotlib.pyplot as plt  # noqa: E402

from alloclab import analyse, answers, decide, stats  # noqa: E402
from alloclab.analyse import NOPM, P99, PEAK_RSS, THROUGHPUT, Metric  # noqa: E402
from alloclab.store import atomic_write  # noqa: E402

REPORT_DIR = "report"


# --- tables: one definition, three renderers ----------------------------------------------

@dataclass
class Table:
    name: str
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    raw: list[list] = field(default_factory=list)  # the numbers behind `rows`, for the CSV
    raw_headers: list[str] | None = None
    note: str = ""

    def add(self, shown: list[str], raw: list | None = None) -> None:
        self.rows.append([str(x) for x in shown])
        self.raw.append(raw if raw is not None else shown)


def to_markdown(t: Table) -> str:
    esc = [h.replace("|", "\\|") for h in t.headers]
    lines = ["| " + " | ".join(esc) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in t.rows]
    return "\n".join(lines)


def to_csv(t: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.raw_headers or t.headers)
    w.writerows(t.raw)
    return buf.getvalue()


def _cell_html(c: str) -> str:
    """A table cell; a file beside the report (a flame graph) becomes a link to it."""
    if re.fullmatch(r"flamegraphs/[A-Za-z0-9_.-]+\.svg", c):
        return f'<a href="{html.escape(c)}">{html.escape(c.split("/")[-1])}</a>'
    return html.escape(c)


def to_html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td>{_cell_html(c)}</td>" for c in r) + "</tr>" for r in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# --- formatting -------------------------------------------------------------------------

def params(cell: tuple) -> str:
    c = analyse.cell_dict(cell)
    prof = "" if c["profile"] == "default" else f" [{c['profile']}]"
    prof += "" if c.get("shape", "default") == "default" else f" <{c['shape']}>"
    if c["workload"] == "tpcc":
        mode = f" ({c['tpcc_mode']})" if c.get("tpcc_mode") else ""
        return f"tpcc w{c['warehouses']}{mode}{prof} vu{c['threads']}"
    if c["workload"] == "sysbench":
        client = "" if c.get("client") in ("", "sysbench") else f" ({c['client']})"
        return f"{c['pattern']}{client}{prof} t{c['threads']}"
    return f"{c['workload']} {c['pattern']} k{c['key_bytes']} v{c['value_bytes']} b{c['batch']}{prof} t{c['threads']}"


def fmt_ci(m: Metric, s: stats.CellStats) -> str:
    return f"[{m.fmt(s.ci_low)}, {m.fmt(s.ci_high)}]" if s.enough else "n<3"


def fmt_cmp(c: stats.Comparison | None) -> str:
    if c is None:
        return "no baseline"
    if c.ci_low is None:
        return f"{c.delta_pct:+.1f}% (n<3)"
    return f"{c.delta_pct:+.1f}% [{100 * (c.ci_low - 1):+.1f}, {100 * (c.ci_high - 1):+.1f}] {c.verdict}"


# --- the tables ------------------------------------------------------------------------

def vs_baseline_table(study: analyse.Study, m: Metric) -> Table:
    base = study.baseline
    allocs = [a for a in study.allocators if a != base]
    t = Table(f"{m.column}_vs_{base}", f"{m.title}: median per cell, each allocator against {base}",
              ["engine", "part", "parameters", "n", f"{base} ({m.unit}) [95% CI]"]
              + [f"{a}: median; paired Δ% vs {base} [95% CI] verdict" for a in allocs],
              raw_headers=["engine", "part", "parameters", "n", f"{base}_median", f"{base}_ci_low", f"{base}_ci_high"]
              + [f"{a}_{k}" for a in allocs for k in ("median", "ratio", "ratio_ci_low", "ratio_ci_high", "verdict")],
              note="Cells: median with a 95 % seeded bootstrap CI of the median. Comparisons: Δ% is the geometric "
                   "mean of the per-round ratios (runs paired by round), so it can differ from the ratio of the "
                   "medians; its 95 % CI and verdict are those of the Verdicts table.")
    summ = {(s.cell, s.allocator): s.stats for s in analyse.summaries(study, m)}
    cmps = {(c.cell, c.allocator): c.comparison for c in analyse.comparisons(study, m)}
    for cell in sorted({c for c, _ in summ}, key=analyse.sort_key):
        b = summ.get((cell, base))
        n = max(s.n for (c, _), s in summ.items() if c == cell)
        shown = [cell[0], cell[1], params(cell), str(n), f"{m.fmt(b.median)} {fmt_ci(m, b)}" if b else "–"]
        raw = [cell[0], cell[1], params(cell), n] + ([b.median, b.ci_low, b.ci_high] if b else [None] * 3)
        for a in allocs:
            s = summ.get((cell, a))
            cmp = cmps.get((cell, a))
            shown.append(f"{m.fmt(s.median)} {fmt_cmp(cmp)}" if s else "–")
            raw.append(s.median if s else None)
            raw += [cmp.ratio, cmp.ci_low, cmp.ci_high, cmp.verdict] if cmp else [None] * 4
        t.add(shown, raw)
    return t


def cells_table(study: analyse.Study) -> Table:
    t = Table("cells", "Every cell: statistics over the repeats",
              ["metric", "engine", "part", "parameters", "allocator", "n", "median", "mean", "95% CI", "CV %",
               "outliers (repeat)", "note"],
              raw_headers=["metric", "engine", "part", "parameters", "allocator", "n", "median", "mean", "ci_low",
                           "ci_high", "cv", "outlier_repeats", "values"])
    for m in (THROUGHPUT, P99, PEAK_RSS):
        for s in analyse.summaries(study, m):
            st = s.stats
            outl = ",".join(str(i + 1) for i in st.outliers)
            t.add([m.column, s.cell[0], s.cell[1], params(s.cell), s.allocator, str(st.n), m.fmt(st.median),
                   m.fmt(st.mean), fmt_ci(m, st), f"{100 * st.cv:.1f}" if st.cv is not None else "–", outl or "–",
                   st.note],
                  [m.column, s.cell[0], s.cell[1], params(s.cell), s.allocator, st.n, st.median, st.mean, st.ci_low,
                   st.ci_high, st.cv, outl, " ".join(repr(v) for v in s.values)])
    return t


def flame_table(study: analyse.Study, out: Path) -> Table | None:
    """With --profile: per cell and allocator an on-CPU and an off-CPU flame graph (the runs'
    stacks merged) and a differential one against the baseline allocator, as SVG files."""
    if not study.plan.get("perf"):
        return None
    from alloclab import flames
    t = Table("flamegraphs", "Flame graphs (SVG files beside this report)",
              ["engine", "parameters", "allocator", "runs", "on-CPU", "off-CPU (context switches)",
               f"differential vs {study.baseline}"],
              note="On-CPU: perf cpu-clock samples; off-CPU: the stack of every context switch; differential: the "
                   "variant's on-CPU stacks coloured by the change from the baseline (red more, blue fewer, counts "
                   "normalised). Drawn by inferno.")
    why = flames.missing()
    if why:
        t.note += f" Absent here: {why}."
        return t
    d = out / "flamegraphs"
    d.mkdir(exist_ok=True)
    merged: dict[tuple, tuple[str, str]] = {}
    groups = _valid_by_cell(study, study.profiled())
    for (cell, alloc), rows in groups:
        dirs = [study.root / "runs" / r.run_id for r in rows]
        merged[(cell, alloc)] = (flames.merge([x / "stacks.folded" for x in dirs]),
                                 flames.merge([x / "switches.folded" for x in dirs]))
    for i, ((cell, alloc), rows) in enumerate(groups):
        cpu, off = merged[(cell, alloc)]
        stem = f"{i + 1:03d}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', alloc)}"
        label = f"{cell[0]} {params(cell)} [{alloc}]"
        files = []
        for name, folded, title, count in ((f"{stem}-cpu.svg", cpu, f"on-CPU: {label}", "samples"),
                                            (f"{stem}-off.svg", off, f"off-CPU: {label}", "switches")):
            files.append(f"flamegraphs/{name}" if flames.draw(folded, d / name, title, count) else "–")
        base = merged.get((cell, study.baseline))
        diff = "–"
        if alloc != study.baseline and base and flames.draw_diff(base[0], cpu, d / f"{stem}-diff.svg",
                                                                 f"{label} against {study.baseline}"):
            diff = f"flamegraphs/{stem}-diff.svg"
        t.add([cell[0], params(cell), alloc, str(len(rows)), *files, diff])
    return t


def _valid_by_cell(study: analyse.Study, rows: list | None = None) -> list[tuple[tuple, list]]:
    """Valid rows (measured ones unless `rows` is given) grouped by (cell, allocator), in cell order."""
    groups: dict[tuple, list] = defaultdict(list)
    for r in study.valid() if rows is None else rows:
        groups[(decide.cell_of(r), r.allocator)].append(r)
    return sorted(groups.items(), key=lambda kv: (analyse.sort_key(kv[0][0]), kv[0][1]))


def memory_account_table(study: analyse.Study) -> Table:
    """The allocator's own account of memory at the end of the measured window, per cell."""
    t = Table("memory_account", "The allocator's own memory account (median per cell, end of the measured window)",
              ["engine", "parameters", "allocator", "runs", "live (MiB)", "allocator resident (MiB)",
               "fragmentation (RSS ÷ live)", "allocator resident ÷ live", "read from"],
              note="Live bytes: handed out and not yet freed, as the allocator counts them (jemalloc stats.allocated, "
                   "tcmalloc generic.current_allocated_bytes, glibc mallinfo2 in-use + mmapped); read inside the "
                   "process under test: by the driver, or in servers by liballoclab_account.so at the end of the "
                   "client's window, summed over the server's processes. A server's RSS includes memory the "
                   "allocator never sees (InnoDB's buffer pool, PostgreSQL's shared buffers, counted in every "
                   "backend), so its fragmentation is an upper bound. Fragmentation below 1 means the program "
                   "holds allocations it never touched.")
    for (cell, alloc), rows in _valid_by_cell(study):
        runs = [study.run_json(r.run_id) for r in rows]
        acc = [j.get("alloc_account") or {} for j in runs]
        src = next((a.get("source") for a in acc if a), None)
        if not any(acc):
            why = next((j.get("alloc_account_missing") for j in runs if j.get("alloc_account_missing")), None)
            t.add([cell[0], params(cell), alloc, str(len(rows)), "", "", "", "",
                   f"not read: {why}" if why else "not read (runs of a driver without the memory account)"],
                  [cell[0], params(cell), alloc, len(rows), None, None, None, None, ""])
            continue
        live = [r.alloc_live_bytes for r in rows if r.alloc_live_bytes]
        res = [r.alloc_resident_bytes for r in rows if r.alloc_resident_bytes]
        frag = [r.fragmentation for r in rows if r.fragmentation]
        ratio = [a / b for a, b in zip((r.alloc_resident_bytes for r in rows), (r.alloc_live_bytes for r in rows))
                 if a and b]
        med = stats.median
        note = next((a.get("note") for a in acc if a.get("note")), "")
        procs = max((a.get("processes") or 1 for a in acc), default=1)
        src = src + (f", {procs} processes" if procs > 1 else "")
        t.add([cell[0], params(cell), alloc, str(len(rows)),
               f"{med(live) / 2**20:.1f}" if live else "not offered",
               f"{med(res) / 2**20:.1f}" if res else "not offered",
               f"{med(frag):.2f}" if frag else "–", f"{med(ratio):.2f}" if ratio else "–",
               src + (f" ({note})" if note else "")],
              [cell[0], params(cell), alloc, len(rows), med(live) if live else None, med(res) if res else None,
               med(frag) if frag else None, med(ratio) if ratio else None, src])
    return t


def _mean_ci(vals: list[float]) -> tuple[float | None, float | None]:
    """The mean and the half-width of its 95 % t interval (None with fewer than 2 values)."""
    if not vals:
        return None, None
    mean = sum(vals) / len(vals)
    rel = stats.mean_ci_half_width(vals) if len(vals) > 1 and mean else None
    return mean, (rel * abs(mean) if rel is not None else (0.0 if len(vals) > 1 else None))


def cpu_share_table(study: analyse.Study) -> Table | None:
    """With --profile: the allocator's share of the profiled runs' CPU samples and context
    switches, per cell, with a 95 % interval over the profiled runs."""
    absent = study.plan.get("perf_absent")
    if not study.plan.get("perf") and not absent:
        return None
    t = Table("alloc_cpu", "Allocator share of CPU and of context switches (profiled runs, mean ± 95 % CI per cell)",
              ["engine", "parameters", "allocator", "profiled runs", "self %", "total %", "in kernel %",
               "switches in allocator %"],
              note="From separate profiled runs (perf cpu-clock samples and every context switch, with stacks, over "
                   "the measured window), never from the measured runs: profiling slows the process under test. "
                   "self: the sample's leaf frame is in the allocator (its library, or glibc's malloc family in "
                   "libc); total: an allocator frame anywhere in the stack; in kernel: kernel time inside an "
                   "allocator call; switches in allocator: context switches whose stack passes through the "
                   "allocator (waits under its locks). Folded stacks per run: runs/<run>/stacks.folded, "
                   "switches.folded.")
    fields_ = ("alloc_cpu_self_pct", "alloc_cpu_total_pct", "alloc_cpu_kernel_pct", "alloc_cs_pct")
    groups = dict(_valid_by_cell(study, study.profiled()))
    for (cell, alloc), _rows in _valid_by_cell(study):
        got = [r for r in groups.get((cell, alloc), []) if r.alloc_cpu_total_pct is not None]
        vals = [_mean_ci([getattr(r, k) for r in got if getattr(r, k) is not None]) for k in fields_]
        if got:
            shown = [("–" if m is None else f"{m:.1f}" + (f" ± {h:.1f}" if h is not None else "")) for m, h in vals]
        else:
            bad = [r for r in study.aux
                   if r.purpose == "profile" and decide.cell_of(r) == cell and r.allocator == alloc]
            why = next(((study.run_json(r.run_id).get("profile") or {}).get("absent_because") for r in bad
                        if r.status == "ok"), None) or (bad[0].reason if bad else None)
            shown = ["absent: " + (why or absent or "no profiled run")] * 4
        t.add([cell[0], params(cell), alloc, str(len(got)), *shown],
              [cell[0], params(cell), alloc, len(got), *(m for m, _h in vals)])
    return t


def calls_table(study: analyse.Study) -> Table | None:
    """With --profile: the allocator's calls per second and per operation and the sizes asked
    for, per cell, from a short separate run with uprobes on malloc, calloc, realloc and free."""
    if not study.plan.get("perf"):
        return None
    t = Table("alloc_calls", "Allocation rate and sizes (uprobes on malloc/calloc/realloc/free, separate short run)",
              ["engine", "parameters", "allocator", "calls/s", "calls per operation", "malloc : free",
               "sizes (share of sized calls)", "library"],
              note="Counted in one short run per cell (the baseline allocator) with a uprobe on each call, which "
                   "slows every call: calls per operation is the number to compare, calls/s is a lower bound. "
                   "Histogram per run: runs/<run>/calls.json.")
    for (cell, alloc), rows in _valid_by_cell(study, study.profiled("calls")):
        files = [study.root / "runs" / r.run_id / "calls.json" for r in rows]
        data = [json.loads(p.read_text()) for p in files if p.exists()]
        if not data:
            why = next(((study.run_json(r.run_id).get("profile") or {}).get("absent_because") for r in rows), None)
            t.add([cell[0], params(cell), alloc, "–", "–", "–", f"absent: {why or 'not recorded'}", ""])
            continue
        d = data[0]
        per_op = [r.alloc_calls_per_op for r in rows if r.alloc_calls_per_op is not None]
        calls = d.get("calls", {})
        sizes = sorted(d.get("sizes", []), key=lambda b: -b["pct"])[:4]
        t.add([cell[0], params(cell), alloc, f"{d.get('total_per_s') or 0:,.0f}",
               f"{stats.median(per_op):.1f}" if per_op else "–",
               f"{calls.get('malloc', 0) + calls.get('calloc', 0)} : {calls.get('free', 0)}",
               ", ".join(f"{b['bucket']} {b['pct']:.0f} %" for b in sizes),
               Path(d.get("library") or "").name],
              [cell[0], params(cell), alloc, d.get("total_per_s"), stats.median(per_op) if per_op else None,
               calls.get("malloc", 0) + calls.get("calloc", 0), calls.get("free", 0),
               json.dumps(d.get("sizes", [])), d.get("library")])
    return t


def spread_table(study: analyse.Study) -> Table:
    t = Table("spread", "Best-to-worst throughput spread across allocators, per engine and cell",
              ["engine", "part", "parameters", "best", "worst", "spread %"])
    per_engine: dict[str, list[float]] = defaultdict(list)
    for cell, best, worst, pct in analyse.spreads(study):
        per_engine[cell[0]].append(pct)
        t.add([cell[0], cell[1], params(cell), best, worst, f"{pct:.1f}"], [cell[0], cell[1], params(cell), best,
                                                                             worst, pct])
    t.note = "; ".join(f"{e}: median spread {stats.median(v):.1f}% over {len(v)} cells"
                       for e, v in per_engine.items())
    return t


def engine_ratio_table(study: analyse.Study) -> Table:
    t = Table("engine_ratios", "Engine ratios: throughput of each engine over the first engine, same cell and "
              "allocator", ["part", "parameters", "allocator", "ratio", "95% CI", "verdict"],
              raw_headers=["part", "parameters", "allocator", "engine", "reference", "ratio", "ci_low", "ci_high",
                           "verdict"])
    for cell, a, other, ref, c in analyse.engine_ratios(study):
        full = (ref, *cell)
        ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.ci_low is not None else "n<3"
        t.add([cell[0], params(full), a, f"{other}/{ref} = {c.ratio:.2f}x", ci, c.verdict],
              [cell[0], params(full), a, other, ref, c.ratio, c.ci_low, c.ci_high, c.verdict])
    return t


def sweep_table(study: analyse.Study, m: Metric = THROUGHPUT) -> Table:
    """Study 3's shape for every thread sweep: Threads | Baseline | Variant | Δ, per variant."""
    base = study.baseline
    allocs = [a for a in study.allocators if a != base]
    t = Table("thread_sweeps", f"Thread sweeps: {m.title.lower()} by threads, each allocator against {base}",
              ["engine", "part", "parameters", "threads", f"{base} {m.unit}"]
              + [h for a in allocs for h in (f"{a} {m.unit}", f"Δ {a} vs {base}")])
    groups = analyse.by_cell(study.valid(), m.column)
    sweeps: dict[tuple, list[tuple]] = defaultdict(list)
    for cell in groups:
        sweeps[cell[:-1]].append(cell)
    for key in sorted(sweeps, key=analyse.sort_key):
        cells = sorted(sweeps[key], key=lambda c: c[-1])
        if len(cells) < 2:
            continue
        for cell in cells:
            b = groups[cell].get(base)
            bm = stats.median(b) if b else None
            row = [cell[0], cell[1], params(cell).rsplit(" ", 1)[0], str(cell[-1]), m.fmt(bm)]
            raw = [cell[0], cell[1], params(cell).rsplit(" ", 1)[0], cell[-1], bm]
            for a in allocs:
                v = groups[cell].get(a)
                vm = stats.median(v) if v else None
                d = analyse.delta_pct(vm, bm)
                row += [m.fmt(vm), f"{d:+.1f}%" if d is not None else "–"]
                raw += [vm, d]
            t.add(row, raw)
    return t


def scaling_table(study: analyse.Study) -> Table:
    t = Table("scaling", "Thread scaling: peak, last point within 5 % of linear, collapse below 50 % of the peak",
              ["engine", "part", "parameters", "allocator", "peak threads", "peak ops/s", "last linear threads",
               "collapse"])
    for key, a, sc in analyse.scalings(study):
        cell = (*key, 0)
        p = params(cell).rsplit(" t", 1)[0]
        col = f"t{sc.collapse_x}: {THROUGHPUT.fmt(sc.collapse_y)}" if sc.collapse_x is not None else "none"
        t.add([key[0], key[1], p, a, str(sc.peak_x), THROUGHPUT.fmt(sc.peak_y), str(sc.last_linear_x), col],
              [key[0], key[1], p, a, sc.peak_x, sc.peak_y, sc.last_linear_x, sc.collapse_x])
    return t


def verdict_table(ans: answers.Answers) -> Table:
    t = Table("verdicts", "Verdicts: every comparison, sorted by effect (throughput, then p99 latency, then peak RSS)",
              ["metric", "comparison", "engine", "workload", "threads", "settings", "variant vs baseline", "n",
               "ratio", "95% CI", "verdict", "rounds to decide"],
              raw_headers=list(decide.CSV_COLUMNS), note=ans.note)
    for v in ans.verdicts:
        ci = f"{v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else "–"
        todo = "" if v.rounds_to_decide is None else (
            ">1000" if v.rounds_to_decide >= 1000 else str(v.rounds_to_decide))
        t.add([answers.METRIC_TITLE.get(v.metric, v.metric), v.comparison, v.engine, v.workload, str(v.threads),
               v.settings, f"{v.variant} vs {v.baseline}", f"{v.n_variant}/{v.n_baseline}",
               f"{v.ratio:.3f}" if v.ratio is not None else "–", ci, v.verdict, todo],
              [getattr(v, k) for k in decide.CSV_COLUMNS])
    return t


VERDICT_COLOURS = {"faster": "#2a9d4b", "lower": "#2a9d4b", "slower": "#c0392b", "higher": "#c0392b",
                   "equivalent": "#2c6fbb", "undecided": "#888888"}


def draw_verdicts(ans: answers.Answers, out: Path, metric: str = "throughput", limit: int = 40) -> tuple | None:
    """Forest plot: each comparison's change in % with its 95 % CI, the equivalence band shaded."""
    vs = [v for v in ans.verdicts if v.metric == metric and v.ratio is not None][:limit]
    if not vs:
        return None
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * len(vs)))
    ys = list(range(len(vs)))[::-1]
    margin = ans.margin_pct
    for y, v in zip(ys, vs):
        d = v.delta_pct
        if v.ci_low is not None:
            ax.errorbar([d], [y], xerr=[[d - (v.ci_low - 1) * 100], [(v.ci_high - 1) * 100 - d]], fmt="o",
                        color=VERDICT_COLOURS.get(v.verdict, "#888"), capsize=3)
        else:
            ax.plot([d], [y], "o", mfc="none", color="#888")
    ax.axvspan(-margin, margin, color="#2c6fbb", alpha=0.08)
    ax.axvline(0, color="#333", lw=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{v.engine} {v.workload} t{v.threads}: {v.variant} vs {v.baseline}" for v in vs], fontsize=7)
    ax.set_xlabel(f"change in {answers.METRIC_TITLE.get(metric, metric)} vs baseline (%)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(f"{answers.METRIC_TITLE.get(metric, metric).capitalize()}: each comparison with its 95 % CI")
    fig.tight_layout()
    png, svg = _save(fig, out, f"verdicts_{metric}")
    n = [v.n_pairs or min(v.n_baseline, v.n_variant) for v in vs]
    cap = (f"Change of each variant against its baseline in % (0 = no change; the x axis is centred on 0, not "
           f"started at it), dot = ratio of the paired runs, bar = 95 % CI, colour = verdict (green better, red "
           f"worse, blue equivalent, grey undecided; hollow: no interval yet), shaded band = equivalence margin "
           f"±{margin:g} %. {len(vs)} comparison(s), {min(n)}–{max(n)} rounds each.")
    return png, svg, cap


def draw_cell_bars(study: analyse.Study, out: Path, m: Metric = THROUGHPUT, limit: int = 12) -> tuple | None:
    """Per cell, one bar per allocator: the median with its 95 % CI, y axis from zero."""
    summ = analyse.summaries(study, m)
    cells = list(dict.fromkeys(s.cell for s in summ))[:limit]
    if not cells:
        return None
    allocs = [a for a in study.allocators if any(s.allocator == a for s in summ)]
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

@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    parts: tuple[str, ...]
    x: str
    metric: Metric
    kind: str = "line"  # line | bars
    logx: bool = False
    source: str = "measure"  # the runs drawn: "measure", or "profile" (the profiled runs)
    per_test: bool = False  # a panel per engine and sysbench test (else per engine)

    def rows(self, study: analyse.Study) -> list:
        rows = study.valid() if self.source == "measure" else study.profiled(self.source)
        return [r for r in rows if r.part in self.parts]

    def panel(self, r) -> str:
        return f"{r.engine} {r.pattern}" if self.per_test and r.pattern else r.engine


KV_CHARTS = (
    Chart("put_throughput_vs_threads", "PUT throughput vs threads (small-value churn, b1)",
          ("churn_small",), "threads", THROUGHPUT),
    Chart("contention_throughput_vs_threads", "PUT contention throughput vs threads (b100)",
          ("contention",), "threads", THROUGHPUT),
    Chart("batch_size_vs_throughput", "Batch size vs PUT throughput (t8)", ("batch",), "batch", THROUGHPUT,
          logx=True),
    Chart("peak_rss_vs_threads", "Peak RSS vs threads (small-value churn)", ("churn_small",), "threads", PEAK_RSS),
    Chart("large_value_p99", "Large-value PUT p99 latency (t8)", ("large_4kb", "large_64kb"), "part", P99,
          kind="bars"),
)
ALLOC_SHARE = Metric("alloc_cpu_total_pct", "Allocator share of CPU (total)", "%", 1, False)
ALLOC_CS = Metric("alloc_cs_pct", "Context switches in the allocator", "%", 1, False)
# study 3: is the allocator the cause of the collapse? Its share against threads (profiled runs)
SCALING_CHARTS = (
    Chart("alloc_share_vs_threads", "Allocator share of CPU vs threads (profiled runs)", ("scaling",), "threads",
          ALLOC_SHARE, source="profile", per_test=True),
    Chart("alloc_switches_vs_threads", "Context switches in the allocator vs threads (profiled runs)", ("scaling",),
          "threads", ALLOC_CS, source="profile", per_test=True),
)


def chart_table(study: analyse.Study, spec: Chart) -> Table | None:
    """The data of a chart in the study's table shape: x | one column per allocator."""
    rows = [r for r in spec.rows(study) if getattr(r, spec.metric.column) is not None]
    if not rows:
        return None
    allocs = [a for a in study.allocators if any(r.allocator == a for r in rows)]
    t = Table(spec.name, f"{spec.title} ({spec.metric.unit}, median)", ["engine", spec.x] + allocs)
    groups: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(spec.panel(r), getattr(r, spec.x))][r.allocator].append(getattr(r, spec.metric.column))
    for (engine, x) in sorted(groups, key=analyse.sort_key):
        meds = [stats.median(groups[(engine, x)][a]) if groups[(engine, x)].get(a) else None
                for a in allocs]
        t.add([engine, str(x)] + [spec.metric.fmt(v) for v in meds], [engine, x] + meds)
    return t


def _save(fig, out: Path, name: str) -> tuple[Path, Path]:
    png, svg = out / f"{name}.png", out / f"{name}.svg"
    fig.savefig(png, dpi=110, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return png, svg


def draw_chart(study: analyse.Study, spec: Chart, out: Path) -> tuple[Path, Path] | None:
    rows = [r for r in spec.rows(study) if getattr(r, spec.metric.column) is not None]
    if not rows:
        return None
    order = {e: i for i, e in enumerate(study.engines)}
    engines = list(dict.fromkeys(spec.panel(r) for r in sorted(rows, key=lambda r: (order[r.engine], r.pattern))))
    allocs = [a for a in study.allocators if any(r.allocator == a for r in rows)]
    fig, axes = plt.subplots(1, len(engines), figsize=(5.2 * len(engines), 4), squeeze=False)
    for ax, engine in zip(axes[0], engines):
        er = [r for r in rows if spec.panel(r) == engine]
        if spec.kind == "line":
            for a in allocs:
                pts: dict = defaultdict(list)
                for r in er:
                    if r.allocator == a:
                        pts[getattr(r, spec.x)].append(getattr(r, spec.metric.column) / spec.metric.scale)
                xs = sorted(pts)
                ds = [stats.describe(pts[x]) for x in xs]
                ys = [d.median for d in ds]
                lo = [d.median - d.ci_low if d.enough else 0 for d in ds]
                hi = [d.ci_high - d.median if d.enough else 0 for d in ds]
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=a)
            ax.set_xlabel(spec.x)
            if spec.logx:
                ax.set_xscale("log")
            ticks = sorted({getattr(r, spec.x) for r in er})
            ax.set_xticks(ticks)
            ax.set_xticklabels([str(t) for t in ticks])
            ax.set_ylim(bottom=0)
        else:
            groups = list(dict.fromkeys(getattr(r, spec.x) for r in er))
            width = 0.8 / max(len(allocs), 1)
            for i, a in enumerate(allocs):
                ys = []
                for g in groups:
                    vals = [getattr(r, spec.metric.column) / spec.metric.scale for r in er
                            if r.allocator == a and getattr(r, spec.x) == g]
                    ys.append(stats.median(vals) if vals else 0)
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


def draw_rss_timelines(study: analyse.Study, out: Path) -> tuple[Path, Path] | None:
    """RSS over time of the process under test, per engine, for the cell with the largest peak."""
    valid = study.valid()
    if not valid:
        return None
    engines = [e for e in study.engines if any(r.engine == e for r in valid)]
    fig, axes = plt.subplots(1, len(engines), figsize=(5.2 * len(engines), 4), squeeze=False)
    for ax, engine in zip(axes[0], engines):
        er = [r for r in valid if r.engine == engine]
        cell = analyse.cell_of(max(er, key=lambda r: r.peak_rss_bytes))
        for a in study.allocators:
            runs = [r for r in er if analyse.cell_of(r) == cell and r.allocator == a]
            if not runs:
                continue
            samples = study.samples(runs[0].run_id)
            ax.plot([float(s["t_s"]) for s in samples], [int(s["rss_bytes"]) / 2**20 for s in samples], label=a)
        ax.set_title(f"{engine}: {cell[1]} {params(cell)} (repeat 1)", fontsize=8)
        ax.set_xlabel("seconds since start")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("RSS timeline of the process under test")
    fig.tight_layout()
    return _save(fig, out, "rss_timeline")


# --- TPC-C (studies 1 and 4) ---------------------------------------------------------------

TXN_NAMES = {"neword": "NEWORD", "payment": "PAYMENT", "delivery": "DELIVERY", "slev": "SLEV", "ostat": "OSTAT"}


def tpcc_valid(study: analyse.Study) -> list:
    return [r for r in study.valid() if r.workload == "tpcc"]


def _group_label(r) -> str:
    return r.engine if r.profile == "default" else f"{r.engine} [{r.profile}]"


def _manifest_digests(study: analyse.Study) -> dict[str, str]:
    try:
        lines = (study.root / "MANIFEST.sha256").read_text().splitlines()
    except OSError:
        return {}
    return {rel: digest for digest, _, rel in (line.partition("  ") for line in lines)}


def tpcc_runs_table(study: analyse.Study) -> Table:
    """Study 1's shape: one line per run, with the SHA-256 of its raw events."""
    t = Table("tpcc_runs", "TPC-C runs: NOPM, TPM and NEW-ORDER latency per run",
              ["engine", "allocator", "run", "NOPM", "client NOPM", "TPM", "NEWORD avg (ms)", "NEWORD p95 (ms)",
               "events.jsonl SHA-256"],
              note="NOPM is HammerDB's: the growth of the sum of D_NEXT_O_ID over the measured window, per minute; "
                   "client NOPM counts committed New-Orders at the client; TPM counts committed and rolled-back "
                   "transactions.")
    digests = _manifest_digests(study)
    for r in sorted(tpcc_valid(study), key=lambda r: (_group_label(r), r.allocator, r.repeat)):
        no = study.run_json(r.run_id).get("ops", {}).get("neword", {})
        t.add([_group_label(r), r.allocator, str(r.repeat), f"{r.nopm:,.0f}", f"{r.client_nopm:,.0f}", f"{r.tpm:,.0f}",
               f"{no.get('mean_ns', 0) / 1e6:.2f}", f"{no.get('p95_ns', 0) / 1e6:.2f}",
               digests.get(f"runs/{r.run_id}/events.jsonl", "")],
              [_group_label(r), r.allocator, r.repeat, r.nopm, r.client_nopm, r.tpm, no.get("mean_ns"),
               no.get("p95_ns"), digests.get(f"runs/{r.run_id}/events.jsonl", "")])
    return t


def cpu_per_txn_table(study: analyse.Study) -> Table | None:
    """Server runs: CPU per New-Order (TPC-C) or per transaction (sysbench OLTP) of the server
    and of the client, over the same window, medians per cell and allocator."""
    rows = [r for r in study.valid() if r.client_cpu_user_s is not None]
    if not rows:
        return None
    t = Table("cpu_per_txn", "CPU per New-Order (TPC-C) or per transaction (OLTP): server and client",
              ["engine", "parameters", "allocator", "TPC-C mode", "runs", "per", "server CPU (ms)", "client CPU (ms)",
               "client ÷ server"],
              note="CPU (user + system) of the server's processes and of the client over the client's measured "
                   "window, divided by the committed New-Orders (TPC-C) or the transactions (OLTP) of that window: "
                   "a client that costs the server nothing has a small ratio on a machine it shares.")
    for (cell, alloc), rs in _valid_by_cell(study, rows):
        def per(r):
            n = r.client_nopm * r.duration_s / 60 if r.workload == "tpcc" else r.ops
            return ((r.cpu_user_s + r.cpu_sys_s) / n * 1e3, (r.client_cpu_user_s + (r.client_cpu_sys_s or 0)) / n * 1e3
                    ) if n else None
        got = [x for x in map(per, rs) if x]
        if not got:
            continue
        srv, cli = stats.median([x[0] for x in got]), stats.median([x[1] for x in got])
        mode = rs[0].tpcc_mode or ("–" if rs[0].workload != "tpcc" else "rows")
        what = "New-Order" if rs[0].workload == "tpcc" else "transaction"
        t.add([cell[0], params(cell), alloc, mode, str(len(got)), what, f"{srv:.3f}", f"{cli:.3f}",
               f"{cli / srv:.2f}" if srv else "–"],
              [cell[0], params(cell), alloc, mode, len(got), what, srv, cli, cli / srv if srv else None])
    return t


def tpcc_txn_table(study: analyse.Study) -> Table:
    """Study 4's shape: per transaction type, medians over the repeats."""
    t = Table("tpcc_transactions", "TPC-C per transaction type (median over repeats; ms)",
              ["engine", "allocator", "transaction", "runs", "count", "avg", "p50", "p95", "p99", "max", "sd",
               "conflict retries", "rolled back", "errors"],
              note="Retries are conflicts retried inside one transaction; rolled back are the 1 % of New-Orders "
                   "that roll back by design; errors are transactions that gave up.")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in tpcc_valid(study):
        for txn, op in study.run_json(r.run_id).get("ops", {}).items():
            groups[(_group_label(r), r.allocator, txn)].append(op)
    order = list(TXN_NAMES)
    for (label, alloc, txn) in sorted(groups, key=lambda k: (k[0], k[1], order.index(k[2]) if k[2] in order else 9)):
        ops = groups[(label, alloc, txn)]

        def med(key, ops=ops):
            return stats.median([float(o.get(key, 0)) for o in ops])

        vals = [med("calls")] + [med(k) / 1e6 for k in ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns", "stdev_ns")]
        causes = [med("retries"), med("rollbacks"), med("errors")]
        t.add([label, alloc, TXN_NAMES.get(txn, txn), str(len(ops)), f"{vals[0]:.0f}"] + [f"{v:.3f}" for v in vals[1:]]
              + [f"{c:.0f}" for c in causes], [label, alloc, txn, len(ops)] + vals + causes)
    return t


def tpcc_ratio_table(study: analyse.Study) -> Table:
    t = Table("tpcc_ratios", "TPC-C NOPM ratios: engines against the first engine, profiles against the first profile",
              ["what", "cell", "allocator", "ratio", "95% CI", "verdict"])
    for cell, a, other, ref, c in analyse.engine_ratios(study, NOPM):
        ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.ci_low is not None else "n<3"
        t.add([f"{other} / {ref}", params((ref, *cell)), a, f"{c.ratio:.2f}x", ci, c.verdict])
    for cell, a, other, ref, c in analyse.profile_gains(study, NOPM):
        ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.ci_low is not None else "n<3"
        t.add([f"{cell[0]}: {other} / {ref}", params(cell), a, f"{c.ratio:.2f}x", ci, c.verdict])
    return t


# The seeds' published figures, shown beside ours as shape references (../shared/studies.md):
# preset -> target -> allocator -> NOPM. Their hardware differs: compare shapes, not levels.
PUBLISHED = {
    "tpcc-allocators": {
        "source": "seed 000: MariaDB 11.8.6, HammerDB, 40 warehouses, 8 VU, 2 runs per cell",
        "mariadb11-innodb": {"glibc": 16_900, "mimalloc": 16_600},
        "mariadb11-tidesdb": {"glibc": 68_800, "jemalloc": 75_100, "mimalloc": 42_700, "tcmalloc": 74_500},
    },
}


def published_table(study: analyse.Study) -> Table | None:
    """The published NOPM of the study this preset reproduces beside ours, each as a ratio to
    its own glibc: the shape (which allocator helps, by how much) is what carries over."""
    pub = PUBLISHED.get(study.plan.get("preset") or "")
    if not pub:
        return None
    t = Table("published", "Published figures beside ours (shape references)",
              ["engine", "allocator", "published NOPM", "published vs glibc", "our median NOPM", "ours vs glibc",
               "our runs"], note=pub["source"] + "; ours from this study's valid runs. Levels differ with the "
              "hardware; the ratios to glibc are the comparison.")
    valid = tpcc_valid(study)
    for target, figures in pub.items():
        if target == "source":
            continue
        ours = {}
        for r in valid:
            if r.engine == target:
                ours.setdefault(r.allocator, []).append(r.nopm)
        failed = [r for r in study.not_valid() if r.engine == target]
        allocs = list(dict.fromkeys([*figures, *sorted(ours)]))
        base_ours = stats.median(ours["glibc"]) if ours.get("glibc") else None
        for a in allocs:
            p = figures.get(a)
            o = stats.median(ours[a]) if ours.get(a) else None
            n_fail = sum(1 for r in failed if r.allocator == a)
            t.add([target, a, f"{p:,.0f}" if p else "not published",
                   f"{p / figures['glibc']:.2f}x" if p and figures.get("glibc") else "",
                   f"{o:,.0f}" if o is not None else "no valid run",
                   f"{o / base_ours:.2f}x" if o is not None and base_ours else "",
                   f"{len(ours.get(a, []))} ok" + (f", {n_fail} failed" if n_fail else "")],
                  [target, a, p, p / figures["glibc"] if p and figures.get("glibc") else None, o,
                   o / base_ours if o is not None and base_ours else None, len(ours.get(a, []))])
    return t


def draw_tpcc_bars(study: analyse.Study, out: Path, name: str, title: str, ylabel: str, value) -> tuple | None:
    """Grouped bars: one group per engine (and profile), one bar per allocator, median with CI."""
    rows = tpcc_valid(study)
    if not rows:
        return None
    groups = list(dict.fromkeys(_group_label(r) for r in sorted(rows, key=lambda r: (study.engines.index(r.engine)
                                                                                   if r.engine in study.engines else 9,
                                                                                   r.profile))))
    allocs = [a for a in study.allocators if any(r.allocator == a for r in rows)]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) * max(len(allocs), 1) ** 0.5 + 3), 4.2))
    width = 0.8 / max(len(allocs), 1)
    for i, a in enumerate(allocs):
        meds, lo, hi = [], [], []
        for g in groups:
            vals = [value(study, r) for r in rows if r.allocator == a and _group_label(r) == g]
            d = stats.describe(vals) if vals else None
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


def draw_tpcc_charts(study: analyse.Study, out: Path) -> list:
    charts = [
        draw_tpcc_bars(study, out, "tpcc_nopm_by_allocator", "TPC-C NOPM by allocator", "NOPM",
                       lambda st, r: r.nopm),
        draw_tpcc_bars(study, out, "tpcc_latency_by_allocator", "TPC-C NEW-ORDER average latency by allocator",
                       "NEW-ORDER average (ms)",
                       lambda st, r: st.run_json(r.run_id).get("ops", {}).get("neword", {}).get("mean_ns", 0) / 1e6),
    ]
    return [c for c in charts if c]


# --- environment ---------------------------------------------------------------------------

def environment(study: analyse.Study) -> list[str]:
    m, p = study.machine, study.plan
    engines = (m.get("driver") or {}).get("engines", {})
    fs = m.get("data_filesystem", {})
    lines = [
        f"machine: {m.get('cpu_model')}, {m.get('cores')} cores, {(m.get('memory_bytes') or 0) / 2**30:.0f} GiB, "
        f"{m.get('os')}, kernel {m.get('kernel')}",
        f"data filesystem: {fs.get('type')} on {fs.get('device')} ({fs.get('mount')})",
        "engines: " + ", ".join(f"{k} {v}" for k, v in engines.items() if k in study.engines),
        f"alloclab {m.get('alloclab_version')} ({m.get('alloclab_commit') or 'no commit'}), "
        f"driver {(m.get('driver') or {}).get('driver_version')}, Python {m.get('python')}",
        f"plan: {p.get('name')} ({p.get('preset') or 'custom'}, scale {p.get('scale')}), {p.get('runs')} repeat(s), "
        f"seed {p.get('seed')}, warm-up {p.get('warmup_s')} s, baseline {study.baseline}",
        "engine settings: " + (", ".join(f"{k}={v}" for k, v in sorted(p.get("engine_options", {}).items()))
                               or "engine defaults"),
        "latency is per call: one call is one engine batch/transaction of `batch` operations",
    ]
    servers: dict[str, dict[str, set]] = {}  # target -> server version -> allocator libraries used
    for r in study.rows:
        j = study.run_json(r.run_id) if r.engine not in engines else {}
        if j.get("server_version"):
            used = servers.setdefault(r.engine, {}).setdefault(j["server_version"], set())
            a = j.get("allocator_used") or {}
            used.add(f"{a.get('name')}: {a.get('version')}, {a.get('path') or 'no preload'}")
    for target, versions in sorted(servers.items()):
        for version, used in versions.items():
            lines.append(f"server {target}: {version}; allocators as the server used them: {'; '.join(sorted(used))}")
    for a in p.get("allocators", []):
        runs = [r for r in study.rows if r.allocator == a["name"]]
        ok = sum(r.allocator_verified for r in runs)
        proof = next((study.run_json(r.run_id).get("proof", {}).get("reason") for r in runs if r.allocator_verified),
                     "no proved run")
        env = " ".join(f"{k}={v}" for k, v in (a.get("env") or {}).items())
        how = "linked into the driver" if a.get("link") else (a.get("path") or "no preload")
        lines.append(f"allocator {a['name']}: {a.get('version')}, {how}"
                     f"{' ' + env if env else ''}; proved in {ok}/{len(runs)} runs, e.g. {proof}")
    return lines


# --- assembly ------------------------------------------------------------------------------

CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}.warn{background:#fff4e0;padding:.5em 1em}
svg{max-width:100%;height:auto}details{margin:1em 0}.note{color:#555;font-size:12px}
.headline{font-size:17px;font-weight:bold}.answers li{margin:.3em 0}
figcaption{color:#444;font-size:12px;max-width:900px}"""


def _inline_svg(path: Path) -> str:
    """The SVG file as an element to embed: no XML prolog, no RDF metadata block."""
    text = re.sub(r"^<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>)?\s*", "", path.read_text())
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)


def _caption(spec_title: str, rows: list) -> str:
    counts: dict = defaultdict(int)
    for r in rows:
        counts[(analyse.cell_of(r), r.allocator)] += 1
    n = sorted(counts.values()) or [0]
    return (f"{spec_title}: median of n runs per point (n = {n[0]}–{n[-1]}), error bars = 95 % bootstrap CI of the "
            "median (none where n < 3); y axis starts at 0.")


def build(root: Path) -> Path:
    """Write the report of a results folder; return the path of report.md."""
    study = analyse.load(root)
    out = Path(root) / REPORT_DIR
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "charts").mkdir(parents=True, exist_ok=True)
    title = f"alloclab report: {study.plan.get('name', 'study')}"
    env = environment(study)
    ans = answers.build(study)
    verdicts = verdict_table(ans)
    atomic_write(out / "verdicts.csv", to_csv(verdicts))
    atomic_write(out / "verdicts.json", answers.to_json(ans))
    atomic_write(out / "answers.md", answers.to_markdown(ans))

    has_tpcc = bool(tpcc_valid(study))
    main_tables = [vs_baseline_table(study, m) for m in ((NOPM,) if has_tpcc else ()) + (THROUGHPUT, P99, PEAK_RSS)]
    shaped = [t for t in (chart_table(study, c) for c in KV_CHARTS + SCALING_CHARTS) if t]
    if has_tpcc:
        shaped += [tpcc_runs_table(study), tpcc_txn_table(study), tpcc_ratio_table(study)]
    pub = published_table(study)
    shaped += [pub] if pub else []
    other = [t for t in (cpu_per_txn_table(study), cpu_share_table(study), calls_table(study),
                         flame_table(study, out)) if t] + [
        memory_account_table(study), spread_table(study), engine_ratio_table(study), sweep_table(study),
        scaling_table(study)]
    excluded = Table("excluded", "Runs excluded (failed, or allocator not proved)",
                     ["run", "status", "allocator verified", "reason"])
    for r in study.not_valid():
        excluded.add([r.run_id, r.status, str(r.allocator_verified).lower(), r.reason])
    cells = cells_table(study)
    tables = [verdicts] + main_tables + shaped + other + [excluded, cells]
    for t in tables:
        atomic_write(out / "tables" / f"{t.name}.csv", to_csv(t))
        atomic_write(out / "tables" / f"{t.name}.md", f"## {t.title}\n\n{to_markdown(t)}\n")

    charts = [c for c in (draw_verdicts(ans, out / "charts"), draw_cell_bars(study, out / "charts")) if c]
    tp = tpcc_valid(study)
    charts += [(png, svg, _caption(name, tp)) for (png, svg), name in
               zip(draw_tpcc_charts(study, out / "charts"), ("TPC-C NOPM by allocator, per engine",
                                                            "TPC-C NEW-ORDER average latency (ms)"))]
    for spec in KV_CHARTS + SCALING_CHARTS:
        c = draw_chart(study, spec, out / "charts")
        if c:
            charts.append((*c, _caption(f"{spec.title} ({spec.metric.unit})", spec.rows(study))))
    rss = draw_rss_timelines(study, out / "charts")
    if rss:
        charts.append((*rss, "RSS of the process under test over its run (MiB, sampled at 20 Hz from /proc), repeat 1 "
                             "of the cell with the largest peak per engine; y axis starts at 0."))

    warns = analyse.warnings(study)  # after the tables and charts: they note files they could not read
    later = main_tables + shaped + other + ([excluded] if excluded.rows else [])
    md = [f"# {title}", "", answers.to_markdown(ans), f"## {verdicts.title}", "", to_markdown(verdicts), ""]
    md += ["## Charts", ""]
    for png, _svg, cap in charts:
        md += [f"![{png.stem}](charts/{png.name})", "", f"_{cap}_", ""]
    md += ["## Warnings", ""] + ([f"- {w}" for w in warns] or ["- none"]) + [""]
    md += ["## Environment", ""] + [f"- {x}" for x in env] + [""]
    for t in later:
        md += [f"## {t.title}", ""] + ([f"_{t.note}_", ""] if t.note else []) + [to_markdown(t), ""]
    md += ["", "All per-cell statistics: [tables/cells.md](tables/cells.md) (CSV: tables/cells.csv); every verdict: "
           "[verdicts.csv](verdicts.csv), [verdicts.json](verdicts.json)", ""]
    md_path = out / "report.md"
    atomic_write(md_path, "\n".join(md))

    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
         f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>", "<h2>Answers</h2>",
         f"<p class='headline'>{html.escape(ans.headline)}</p><ul class='answers'>"]
    h += [f"<li>{html.escape(x)}</li>" for x in ans.sentences] or ["<li>(no comparison)</li>"]
    h += [f"</ul><p class='note'>{html.escape(ans.note)}</p>", f"<h2>{html.escape(verdicts.title)}</h2>",
          to_html(verdicts), "<h2>Charts</h2>"]
    h += [f"<figure>{_inline_svg(svg)}<figcaption>{html.escape(cap)}</figcaption></figure>"
          for _png, svg, cap in charts]
    h += ["<h2>Warnings</h2><div class='warn'><ul>"] + ([f"<li>{html.escape(w)}</li>" for w in warns]
                                                       or ["<li>none</li>"]) + ["</ul></div>"]
    h += ["<h2>Environment</h2><ul>"] + [f"<li>{html.escape(x)}</li>" for x in env] + ["</ul>"]
    for t in later:
        h += [f"<h2>{html.escape(t.title)}</h2>"] + ([f"<p class='note'>{html.escape(t.note)}</p>"] if t.note else [])
        h.append(to_html(t))
    h += [f"<details><summary>{html.escape(cells.title)} ({len(cells.rows)} rows)</summary>{to_html(cells)}"
          "</details></body></html>"]
    atomic_write(out / "report.html", "\n".join(h))
    return md_path
