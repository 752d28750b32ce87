"""The study's tables (answers.table.Table), built once with its analysis (answers.analysis):
every number the report shows in a table, computed here and only rendered by report/.

A table's rows are what the report shows; its `raw` rows are the numbers behind them, written
as CSV beside every rendered table. The TPC-C tables are answers.tpcc's, a life's answers.lives',
a chart's data table the report's own (from the analysis' ChartData).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from alloclab.answers import analyse, decide, metrics, stats
from alloclab.answers import sentences as answers
from alloclab.answers.metrics import P99, PEAK_RSS, THROUGHPUT, Metric
from alloclab.answers.table import Table, fmt_ci, fmt_cmp, params
from alloclab.answers.wording import signed
from alloclab.plan import workload


def vs_baseline_table(a, m: Metric) -> Table:
    study = a.study
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
    summ = {(s.cell, s.allocator): s.stats for s in a.summaries[m.column]}
    cmps = {(c.cell, c.allocator): c.comparison for c in a.comparisons[m.column]}
    for cell in sorted({c for c, _ in summ}, key=analyse.sort_key):
        b = summ.get((cell, base))
        n = max(s.n for (c, _), s in summ.items() if c == cell)
        shown = [cell[0], cell[1], params(cell), str(n), f"{m.fmt(b.median)} {fmt_ci(m, b)}" if b else "–"]
        raw = [cell[0], cell[1], params(cell), n] + ([b.median, b.ci_low, b.ci_high] if b else [None] * 3)
        for alloc in allocs:
            s = summ.get((cell, alloc))
            cmp = cmps.get((cell, alloc))
            shown.append(f"{m.fmt(s.median)} {fmt_cmp(cmp)}" if s else "–")
            raw.append(s.median if s else None)
            raw += [cmp.ratio, cmp.ci_low, cmp.ci_high, cmp.verdict] if cmp else [None] * 4
        t.add(shown, raw)
    return t


def cells_table(a) -> Table:
    t = Table("cells", "Every cell: statistics over the repeats",
              ["metric", "engine", "part", "parameters", "allocator", "n", "median", "mean", "95% CI", "CV %",
               "outliers (repeat)", "note"],
              raw_headers=["metric", "engine", "part", "parameters", "allocator", "n", "median", "mean", "ci_low",
                           "ci_high", "cv", "outlier_repeats", "values"])
    for m in (THROUGHPUT, P99, PEAK_RSS):
        for s in a.summaries[m.column]:
            st = s.stats
            outl = ",".join(str(i + 1) for i in st.outliers)
            t.add([m.column, s.cell[0], s.cell[1], params(s.cell), s.allocator, str(st.n), m.fmt(st.median),
                   m.fmt(st.mean), fmt_ci(m, st), f"{100 * st.cv:.1f}" if st.cv is not None else "–", outl or "–",
                   st.note],
                  [m.column, s.cell[0], s.cell[1], params(s.cell), s.allocator, st.n, st.median, st.mean, st.ci_low,
                   st.ci_high, st.cv, outl, " ".join(repr(v) for v in s.values)])
    return t


def flame_groups(study: analyse.Study) -> list[tuple[tuple, str, list[Path]]]:
    """With --profile: the profiled runs' folders per cell and allocator, in cell order (their
    stacks, merged into flame graphs by the report)."""
    if not study.plan.get("perf"):
        return []
    return [(cell, alloc, [study.root / "runs" / r.run_id for r in rows])
            for (cell, alloc), rows in valid_by_cell(study, study.profiled())]


def valid_by_cell(study: analyse.Study, rows: list | None = None) -> list[tuple[tuple, list]]:
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
    for (cell, alloc), rows in valid_by_cell(study):
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
    groups = dict(valid_by_cell(study, study.profiled()))
    for (cell, alloc), _rows in valid_by_cell(study):
        got = [r for r in groups.get((cell, alloc), []) if r.alloc_cpu_total_pct is not None]
        vals = [_mean_ci([r.value(k) for r in got if r.value(k) is not None]) for k in fields_]
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
              raw_headers=["engine", "parameters", "allocator", "calls/s", "calls per operation", "malloc calls",
                           "free calls", "sizes", "library"],
              note="Counted in one short run per cell (the baseline allocator) with a uprobe on each call, which "
                   "slows every call: calls per operation is the number to compare, calls/s is a lower bound. "
                   "Histogram per run: runs/<run>/calls.json.")
    for (cell, alloc), rows in valid_by_cell(study, study.profiled("calls")):
        files = [study.root / "runs" / r.run_id / "calls.json" for r in rows]
        data = [json.loads(p.read_text()) for p in files if p.exists()]
        if not data:
            why = next(((study.run_json(r.run_id).get("profile") or {}).get("absent_because") for r in rows), None)
            t.add([cell[0], params(cell), alloc, "–", "–", "–", f"absent: {why or 'not recorded'}", ""],
                  [cell[0], params(cell), alloc, None, None, None, None, f"absent: {why or 'not recorded'}", None])
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


def spread_table(a) -> Table:
    t = Table("spread", "Best-to-worst throughput spread across allocators, per engine and cell",
              ["engine", "part", "parameters", "best", "worst", "spread %"])
    per_engine: dict[str, list[float]] = defaultdict(list)
    for cell, best, worst, pct in a.spreads:
        per_engine[cell[0]].append(pct)
        t.add([cell[0], cell[1], params(cell), best, worst, f"{pct:.1f}"], [cell[0], cell[1], params(cell), best,
                                                                             worst, pct])
    t.note = "; ".join(f"{e}: median spread {stats.median(v):.1f}% over {len(v)} cells"
                       for e, v in per_engine.items())
    return t


def engine_ratio_table(a) -> Table:
    t = Table("engine_ratios", "Engine ratios: throughput of each engine over the first engine, same cell and "
              "allocator", ["part", "parameters", "allocator", "ratio", "95% CI", "verdict"],
              raw_headers=["part", "parameters", "allocator", "engine", "reference", "ratio", "ci_low", "ci_high",
                           "verdict"])
    for cell, alloc, other, ref, c in a.engine_ratios[THROUGHPUT.column]:
        full = (ref, *cell)
        ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.ci_low is not None else "n<3"
        t.add([cell[0], params(full), alloc, f"{other}/{ref} = {c.ratio:.2f}x", ci, c.verdict],
              [cell[0], params(full), alloc, other, ref, c.ratio, c.ci_low, c.ci_high, c.verdict])
    return t


def sweep_table(a, m: Metric = THROUGHPUT) -> Table:
    """Study 3's shape for every thread sweep: Threads | Baseline | Variant | Δ, per variant."""
    study = a.study
    base = study.baseline
    allocs = [a for a in study.allocators if a != base]
    t = Table("thread_sweeps", f"Thread sweeps: {m.title.lower()} by threads, each allocator against {base}",
              ["engine", "part", "parameters", "threads", f"{base} {m.unit}"]
              + [h for a in allocs for h in (f"{a} {m.unit}", f"Δ {a} vs {base}")])
    groups = a.sweeps[m.column]
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
            for alloc in allocs:
                v = groups[cell].get(alloc)
                vm = stats.median(v) if v else None
                d = delta_pct(vm, bm)
                row += [m.fmt(vm), f"{d:+.1f}%" if d is not None else "–"]
                raw += [vm, d]
            t.add(row, raw)
    return t


def scaling_table(a) -> Table:
    t = Table("scaling", "Thread scaling: peak, last point within 5 % of linear, collapse below 50 % of the peak",
              ["engine", "part", "parameters", "allocator", "peak threads", "peak ops/s", "last linear threads",
               "collapse"])
    for key, alloc, sc in a.scalings:
        cell = (*key, 0)
        p = params(cell).rsplit(" t", 1)[0]
        col = f"t{sc.collapse_x}: {THROUGHPUT.fmt(sc.collapse_y)}" if sc.collapse_x is not None else "none"
        t.add([key[0], key[1], p, alloc, str(sc.peak_x), THROUGHPUT.fmt(sc.peak_y), str(sc.last_linear_x), col],
              [key[0], key[1], p, alloc, sc.peak_x, sc.peak_y, sc.last_linear_x, sc.collapse_x])
    return t


def verdict_table(ans: answers.Answers) -> Table:
    t = Table("verdicts", "Verdicts: every comparison, sorted by effect (throughput, then p99 latency, then peak RSS)",
              ["metric", "comparison", "engine", "workload", "threads", "settings", "variant vs baseline", "n",
               "ratio", "95% CI", "verdict", "rounds to decide"],
              raw_headers=list(decide.CSV_COLUMNS), note=ans.note)
    for v in ans.verdicts:
        ci = f"{v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else "–"
        ratio = f"{v.ratio:.3f}" if v.ratio is not None else "–"
        if metrics.differs(v.metric) and v.ratio is not None:  # a difference: in points, or in its unit
            ratio = f"{signed(v.delta_pct)} {v.unit}"
            ci = "–" if v.ci_delta is None else "{} to {}".format(*map(signed, v.ci_delta))
        todo = "" if v.rounds_to_decide is None else (
            ">1000" if v.rounds_to_decide >= 1000 else str(v.rounds_to_decide))
        t.add([metrics.words(v.metric), v.comparison, v.engine, v.workload, str(v.threads),
               v.settings, f"{v.variant} vs {v.baseline}", f"{v.n_variant}/{v.n_baseline}",
               ratio, ci, v.verdict, todo],
              [getattr(v, k) for k in decide.CSV_COLUMNS])
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
    for (cell, alloc), rs in valid_by_cell(study, rows):
        def per(r):
            n = workload.of(r.workload).work_done(r)
            return ((r.cpu_user_s + r.cpu_sys_s) / n * 1e3, (r.client_cpu_user_s + (r.client_cpu_sys_s or 0)) / n * 1e3
                    ) if n else None
        got = [x for x in map(per, rs) if x]
        if not got:
            continue
        srv, cli = stats.median([x[0] for x in got]), stats.median([x[1] for x in got])
        wl = workload.of(rs[0].workload)
        mode = wl.row_mode(rs[0]) or "–"
        what = wl.unit_of_work
        t.add([cell[0], params(cell), alloc, mode, str(len(got)), what, f"{srv:.3f}", f"{cli:.3f}",
               f"{cli / srv:.2f}" if srv else "–"],
              [cell[0], params(cell), alloc, mode, len(got), what, srv, cli, cli / srv if srv else None])
    return t


def dependence_table(a) -> Table | None:
    """The comparisons whose ratio depends on the host's state or drifted: one short table, not a
    bullet each (the forest plot marks their rows)."""
    if not a.dependence:
        return None
    t = Table("dependence", "Dependence on the host's state: comparisons whose ratio moves with the host's load, or "
              "drifted", ["cell", "comparison", "state", "slope [95% CI]", "slow / fast", "average [CI]",
                          "quiet host [CI]", "verdict uses", "cause", "halves"],
              raw_headers=["cell", "variant", "baseline", "state", "slope", "slope_ci_low", "slope_ci_high", "slow",
                           "fast", "average", "quiet", "quiet_ci_low", "quiet_ci_high", "verdict_uses", "cause",
                           "first_half", "second_half"],
              note="Slope of the paired log ratio on the host's state of each round; slow / fast: the ratio in the "
                   "rounds below and above the median state; quiet host: the fitted ratio at the quietest tenth of "
                   "the rounds; cause: the baseline's where its own speed moves unlike every other allocator's.")
    by = {(f.cell_key, f.variant, f.baseline): f for f in a.findings}

    def ci(r) -> str:
        return f"{r.ratio:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" if r else "–"

    for d in a.dependence:
        f = by.get((d.cell_key, d.variant, d.baseline))
        sl = d.slope
        halves = f.halves if f else (None, None)
        t.add([params(d.cell), f"{d.variant} vs {d.baseline}", d.state,
               f"{sl.slope:+.2f} [{sl.ci_low:+.2f}, {sl.ci_high:+.2f}]" if sl and sl.ci_low is not None else "–",
               f"{f.slow:.3f} / {f.fast:.3f}" if f and f.slow and f.fast else "–", ci(d.average), ci(d.quiet),
               d.verdict_uses, d.cause, " / ".join(f"{x:.3f}" for x in halves if x) or "–"],
              [params(d.cell), d.variant, d.baseline, d.state, sl.slope if sl else None,
               sl.ci_low if sl else None, sl.ci_high if sl else None, f.slow if f else None, f.fast if f else None,
               d.average.ratio if d.average else None, d.quiet.ratio if d.quiet else None,
               d.quiet.ci_low if d.quiet else None, d.quiet.ci_high if d.quiet else None, d.verdict_uses, d.cause,
               halves[0], halves[1]])
    return t


def excluded_table(study: analyse.Study) -> Table:
    excluded = Table("excluded", "Runs excluded (failed, or allocator not proved)",
                     ["run", "status", "allocator verified", "reason"])
    for r in study.not_valid():
        excluded.add([r.run_id, r.status, str(r.allocator_verified).lower(), r.reason])
    return excluded


@dataclass(frozen=True)
class Tables:
    """Every table of a folder's report, built once with its analysis, in the report's groups."""

    verdicts: Table
    main: list[Table]  # each allocator against the baseline, per headline metric
    own: list[Table]  # the workloads' own sections (TPC-C's runs and ratios, a life's memory)
    profiled: list[Table]  # the host's dependence, CPU per transaction, the allocator's share and calls
    rest: list[Table]  # the allocator's account, spreads, engine ratios, thread sweeps and scaling
    excluded: Table
    cells: Table


def build(a, study: analyse.Study) -> Tables:
    """The tables of the analysis `a` (answers.analysis, before its tables) of `study`."""
    own = [t for wl in workload.every() for t in wl.report_tables(a, study.valid_of(wl.names))]
    profiled = [t for t in (dependence_table(a), cpu_per_txn_table(study), cpu_share_table(study),
                            calls_table(study)) if t]
    rest = [memory_account_table(study), spread_table(a), engine_ratio_table(a), sweep_table(a), scaling_table(a)]
    return Tables(verdict_table(a.answers), [vs_baseline_table(a, m) for m in a.headline_metrics], own, profiled,
                  rest, excluded_table(study), cells_table(a))


def delta_pct(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return 100.0 * (value - base) / base
