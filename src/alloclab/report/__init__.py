"""The report of a results folder, rebuilt from its stored files alone.

    report/report.html   one self-contained file (inline CSS and SVG, no script, no request)
    report/report.md     the same tables in Markdown, charts linked as PNG
    report/tables/       every table as .csv and .md
    report/charts/       every chart as .png and .svg

    tables.py       Table (with its CSV) and the study's tables
    tpcc.py         the TPC-C tables and the published figures beside ours
    charts.py       the charts (matplotlib) and the data table of each
    formatting.py   cell labels and statistics as text, shared by tables and charts
    provenance.py   the Environment section
    markdown.py     a table in Markdown, and report.md
    html.py         a table in HTML, and report.html
"""

from __future__ import annotations

from pathlib import Path

from alloclab.answers import analyse
from alloclab.answers import sentences as answers
from alloclab.answers.metrics import NOPM, P99, PEAK_RSS, THROUGHPUT
from alloclab.report import html, markdown
from alloclab.report.charts import (
    KV_CHARTS,
    SCALING_CHARTS,
    caption,
    chart_table,
    draw_cell_bars,
    draw_chart,
    draw_host_state,
    draw_rss_timelines,
    draw_tpcc_charts,
    draw_verdicts,
)
from alloclab.report.formatting import fmt_cmp, params
from alloclab.report.markdown import to_markdown
from alloclab.report.provenance import environment
from alloclab.report.tables import (
    Table,
    calls_table,
    cells_table,
    cpu_per_txn_table,
    cpu_share_table,
    engine_ratio_table,
    excluded_table,
    flame_table,
    memory_account_table,
    scaling_table,
    spread_table,
    sweep_table,
    to_csv,
    verdict_table,
    vs_baseline_table,
)
from alloclab.report.tpcc import (
    loads_table,
    published_table,
    tpcc_ratio_table,
    tpcc_runs_table,
    tpcc_txn_table,
    tpcc_valid,
)
from alloclab.results.store import atomic_write

__all__ = ["REPORT_DIR", "Table", "build", "fmt_cmp", "params", "to_markdown"]

REPORT_DIR = "report"


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
    loads = loads_table(study)
    shaped += [loads] if loads else []
    other = [t for t in (cpu_per_txn_table(study), cpu_share_table(study), calls_table(study),
                         flame_table(study, out)) if t] + [
        memory_account_table(study), spread_table(study), engine_ratio_table(study), sweep_table(study),
        scaling_table(study)]
    excluded = excluded_table(study)
    cells = cells_table(study)
    tables = [verdicts] + main_tables + shaped + other + [excluded, cells]
    for t in tables:
        atomic_write(out / "tables" / f"{t.name}.csv", to_csv(t))
        atomic_write(out / "tables" / f"{t.name}.md", f"## {t.title}\n\n{to_markdown(t)}\n")

    forest = draw_verdicts(ans, out / "charts")  # the main question's answer, on the first screen
    # the memory answer beside it, where the study compares several allocators
    memory = draw_verdicts(ans, out / "charts", "peak_rss") if len(study.allocators) > 2 else None
    charts = [c for c in (draw_host_state(study, out / "charts"), draw_cell_bars(study, out / "charts")) if c]
    tp = tpcc_valid(study)
    charts += [(png, svg, caption(name, tp)) for (png, svg), name in
               zip(draw_tpcc_charts(study, out / "charts"), ("TPC-C NOPM by allocator, per engine",
                                                            "TPC-C NEW-ORDER average latency (ms)"))]
    for spec in KV_CHARTS + SCALING_CHARTS:
        c = draw_chart(study, spec, out / "charts")
        if c:
            charts.append((*c, caption(f"{spec.title} ({spec.metric.unit})", spec.rows(study))))
    rss = draw_rss_timelines(study, out / "charts")
    if rss:
        charts.append((*rss, "RSS of the process under test over its run (MiB, sampled at 20 Hz from /proc), repeat 1 "
                             "of the cell with the largest peak per engine; y axis starts at 0."))

    warns = analyse.warnings(study)  # after the tables and charts: they note files they could not read
    later = main_tables + shaped + other + ([excluded] if excluded.rows else [])
    md_path = out / "report.md"
    atomic_write(md_path, markdown.page(title, ans, verdicts, charts, warns, env, later, forest, memory))
    atomic_write(out / "report.html", html.page(title, ans, verdicts, charts, warns, env, later, cells, forest, memory))
    return md_path
