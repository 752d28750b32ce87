"""The analysis of a results folder, built once as a value (`build`): every statistic a report
shows, from the stored files alone. The report (alloclab.report) only renders it: tables,
charts, HTML and Markdown never compute a statistic of their own, so two renderings of one
folder cannot disagree (hyperfine's exporters, pyperf's one comparison module).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from alloclab.answers import analyse, causes, cautions, dependence, provenance, stats, tables
from alloclab.answers import sentences as answers_mod
from alloclab.answers.analyse import CellSummary, Study, VsBaseline
from alloclab.answers.metrics import BY_COLUMN, METRICS, NOPM, P99, PEAK_RSS, THROUGHPUT, Metric
from alloclab.answers.table import caption, params
from alloclab.plan import workload
from alloclab.results.store import RunRow


@dataclass(frozen=True)
class Chart:
    """A chart of study 2's shape (or study 3's allocator share): which runs, against what."""

    name: str
    title: str
    parts: tuple[str, ...]
    x: str
    metric: Metric
    kind: str = "line"  # line | bars
    logx: bool = False
    source: str = "measure"  # the runs drawn: "measure", or "profile" (the profiled runs)
    per_test: bool = False  # a panel per engine and sysbench test (else per engine)

    def rows(self, study: Study) -> list:
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
CHARTS = KV_CHARTS + SCALING_CHARTS


@dataclass(frozen=True)
class ChartData:
    """A chart's numbers: its table's medians per (panel, x) and allocator, and what is drawn,
    in the chart's unit (line: each allocator's points with their intervals; bars: medians)."""

    spec: Chart
    rows: tuple[RunRow, ...]  # the runs it draws (the metric present)
    allocators: tuple[str, ...]
    medians: dict  # (panel, x) -> allocator -> median (the metric's column), in the table's order
    panels: tuple[str, ...]  # in the engines' order
    lines: dict = field(default_factory=dict)  # (panel, allocator) -> [(x, CellStats)] (line charts)
    bars: dict = field(default_factory=dict)  # panel -> (groups, allocator -> medians per group) (bar charts)
    caption: str = ""  # what it shows, over how many runs per point


def _chart_data(study: Study, spec: Chart) -> ChartData | None:
    rows = [r for r in spec.rows(study) if r.value(spec.metric.column) is not None]
    if not rows:
        return None
    allocs = tuple(a for a in study.allocators if any(r.allocator == a for r in rows))
    groups: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(spec.panel(r), r.value(spec.x))][r.allocator].append(r.value(spec.metric.column))
    medians = {k: {a: stats.median(groups[k][a]) if groups[k].get(a) else None for a in allocs}
               for k in sorted(groups, key=analyse.sort_key)}
    order = {e: i for i, e in enumerate(study.engines)}
    panels = tuple(dict.fromkeys(spec.panel(r) for r in sorted(rows, key=lambda r: (order[r.engine], r.pattern))))
    lines, bars = {}, {}
    for panel in panels:
        er = [r for r in rows if spec.panel(r) == panel]
        if spec.kind == "line":
            for a in allocs:
                pts: dict = defaultdict(list)
                for r in er:
                    if r.allocator == a:
                        pts[r.value(spec.x)].append(r.value(spec.metric.column) / spec.metric.scale)
                lines[(panel, a)] = [(x, stats.describe(pts[x])) for x in sorted(pts)]
        else:
            gs = list(dict.fromkeys(r.value(spec.x) for r in er))
            meds = {}
            for a in allocs:
                ys = []
                for g in gs:
                    vals = [r.value(spec.metric.column) / spec.metric.scale for r in er
                            if r.allocator == a and r.value(spec.x) == g]
                    ys.append(stats.median(vals) if vals else 0)
                meds[a] = ys
            bars[panel] = (gs, meds)
    return ChartData(spec, tuple(rows), allocs, medians, panels, lines, bars,
                     caption(f"{spec.title} ({spec.metric.unit})", rows))


@dataclass(frozen=True)
class Groups:
    """Per group label and allocator, the statistics of a value over runs (grouped bars)."""

    groups: tuple[str, ...]
    allocators: tuple[str, ...]
    stats: dict  # (group, allocator) -> CellStats


def grouped(study: Study, rows: list, label, value) -> Groups | None:
    """Bars of `value(study, row)` per `label(row)` (in the engines' order) and allocator."""
    if not rows:
        return None
    groups = tuple(dict.fromkeys(label(r) for r in sorted(rows, key=lambda r: (
        study.engines.index(r.engine) if r.engine in study.engines else 9, r.profile))))
    allocs = tuple(a for a in study.allocators if any(r.allocator == a for r in rows))
    out = {}
    for a in allocs:
        for g in groups:
            vals = [value(study, r) for r in rows if r.allocator == a and label(r) == g]
            if vals:
                out[(g, a)] = stats.describe(vals)
    return Groups(groups, allocs, out)


@dataclass(frozen=True)
class Timeline:
    """One engine's RSS over its run, per allocator, in the cell with the largest peak (repeat 1)."""

    engine: str
    title: str
    lines: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...]  # (allocator, seconds, MiB)


def _rss_timelines(study: Study) -> list[Timeline]:
    valid = study.valid()
    out = []
    for engine in [e for e in study.engines if any(r.engine == e for r in valid)]:
        er = [r for r in valid if r.engine == engine]
        cell = analyse.cell_of(max(er, key=lambda r: r.peak_rss_bytes))
        lines = []
        for a in study.allocators:
            runs = [r for r in er if analyse.cell_of(r) == cell and r.allocator == a]
            if runs:
                samples = study.samples(runs[0].run_id)
                lines.append((a, tuple(float(s["t_s"]) for s in samples),
                              tuple(int(s["rss_bytes"]) / 2**20 for s in samples)))
        out.append(Timeline(engine, f"{engine}: {cell[1]} {params(cell)} (repeat 1)", tuple(lines)))
    return out


@dataclass(frozen=True)
class Analysis:
    """Everything a report of one folder shows, computed once. The report renders its fields and
    never its `study` (the stored files it was computed from)."""

    study: Study
    answers: answers_mod.Answers
    title: str  # the plan's name
    allocators: tuple[str, ...]  # the plan's, in its order
    baseline: str
    perf: bool  # profiled runs were asked for (--profile)
    headline_metrics: tuple[Metric, ...]  # the vs-baseline tables' metrics: workloads' headlines, then METRICS
    summaries: dict[str, list[CellSummary]]  # metric column -> per cell and allocator
    comparisons: dict[str, list[VsBaseline]]  # metric column -> each allocator against the baseline
    spreads: list
    engine_ratios: dict[str, list]  # metric column -> each engine against the baseline engine
    profile_gains: dict[str, list]  # metric column -> each profile against the first
    scalings: list
    sweeps: dict[str, dict]  # metric column -> cell -> allocator -> values (thread sweeps)
    findings: list[dependence.Finding]
    dependence: list[causes.DependenceLine]  # the comparisons that depend on the host's state or drifted
    charts: dict[str, ChartData]  # chart name -> its numbers (charts with runs only)
    sections: dict[str, dict]  # a workload's first name -> the statistics of its own report section
    environment: tuple[str, ...] = ()  # where the numbers come from (answers.provenance)
    rss: tuple[Timeline, ...] = ()  # RSS over a run, per engine
    flames: tuple = ()  # (cell, allocator, [run folders]) of the profiled runs (answers.tables.flame_groups)
    tables: tables.Tables | None = None  # every table, built after the rest (answers.tables.build)
    _warnings: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        """What the report warns of: the analysis's, then every stored file that could not be read
        (while building it or while the report read the runs' files)."""
        return list(self._warnings) + sorted(self.study.problems)


def build(root: Path) -> Analysis:
    """The analysis of a results folder, from its stored files alone."""
    study = analyse.load(root)
    ans = answers_mod.build(study)
    present = [wl for wl in workload.every() if study.valid_of(wl.names)]
    headlines = tuple(BY_COLUMN[wl.headline] for wl in present if wl.headline != THROUGHPUT.column)
    shown = headlines + METRICS
    ratios = (THROUGHPUT,) + tuple(m for m in headlines if m is NOPM)
    charts = {c.name: d for c in CHARTS if (d := _chart_data(study, c))}
    a = Analysis(
        study=study, answers=ans, title=str(study.plan.get("name", "study")), allocators=tuple(study.allocators),
        baseline=study.baseline, perf=bool(study.plan.get("perf")), headline_metrics=shown,
        summaries={m.column: analyse.summaries(study, m) for m in shown},
        comparisons={m.column: analyse.comparisons(study, m) for m in shown},
        spreads=analyse.spreads(study),
        engine_ratios={m.column: analyse.engine_ratios(study, m) for m in ratios},
        profile_gains={m.column: analyse.profile_gains(study, m) for m in ratios},
        scalings=analyse.scalings(study),
        sweeps={THROUGHPUT.column: analyse.by_cell(study.valid(), THROUGHPUT.column)},
        findings=study.findings(), dependence=causes.table(study.findings(), study.own_slopes()), charts=charts,
        sections={wl.names[0]: wl.section_data(study, study.valid_of(wl.names)) for wl in workload.every()},
        environment=tuple(provenance.environment(study)), rss=tuple(_rss_timelines(study)),
        flames=tuple(tables.flame_groups(study)), _warnings=tuple(cautions.warnings(study)))
    return replace(a, tables=tables.build(a, study))
