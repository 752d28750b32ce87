"""Writing the report of a results folder: its analysis (answers.analysis, built once from the
stored files) rendered as tables, charts, report.md and report.html."""

from __future__ import annotations

from pathlib import Path

from alloclab.answers import analysis
from alloclab.answers import sentences as answers
from alloclab.answers.table import to_csv
from alloclab.plan import workload
from alloclab.report import html, markdown
from alloclab.report.charts import (
    chart_table,
    draw_cell_bars,
    draw_chart,
    draw_host_state,
    draw_rss_timelines,
    draw_verdicts,
)
from alloclab.report.flames import flame_table
from alloclab.report.markdown import to_markdown
from alloclab.results.store import atomic_write

REPORT_DIR = "report"
RSS_CAPTION = ("RSS of the process under test over its run (MiB, sampled at 20 Hz from /proc), repeat 1 of the cell "
               "with the largest peak per engine; y axis starts at 0.")


def build(root: Path) -> Path:
    """Write the report of a results folder; return the path of report.md."""
    a = analysis.build(root)
    ans, tabs = a.answers, a.tables
    out = Path(root) / REPORT_DIR
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "charts").mkdir(parents=True, exist_ok=True)
    title = f"alloclab report: {a.title}"
    env = list(a.environment)
    verdicts = tabs.verdicts
    atomic_write(out / "verdicts.csv", to_csv(verdicts))
    atomic_write(out / "verdicts.json", answers.to_json(ans))
    atomic_write(out / "answers.md", answers.to_markdown(ans))

    main_tables = tabs.main
    shaped = [t for t in (chart_table(a, c) for c in analysis.CHARTS) if t] + tabs.own
    other = tabs.profiled + [t for t in (flame_table(a, out),) if t] + tabs.rest
    excluded, cells = tabs.excluded, tabs.cells
    tables = [verdicts] + main_tables + shaped + other + [excluded, cells]
    for t in tables:
        atomic_write(out / "tables" / f"{t.name}.csv", to_csv(t))
        atomic_write(out / "tables" / f"{t.name}.md", f"## {t.title}\n\n{to_markdown(t)}\n")

    forest = draw_verdicts(ans, out / "charts")  # the main question's answer, on the first screen
    # the memory answer beside it, where the study compares several allocators
    memory = draw_verdicts(ans, out / "charts", "peak_rss") if len(a.allocators) > 2 else None
    first, beside = [forest] if forest else [], [memory] if memory else []
    own = [c for wl in workload.every() for c in wl.first_charts(a, out / "charts")]
    if own:  # a study whose answer is memory over a life: its pictures first, the speed beside them
        first, beside = own, [forest] if forest else []
    charts = [c for c in (draw_host_state(a, out / "charts"), draw_cell_bars(a, out / "charts")) if c]
    for wl in workload.every():
        charts += wl.report_charts(a, out / "charts")
    for spec in analysis.CHARTS:
        c = draw_chart(a, spec, out / "charts")
        if c:
            charts.append((*c, a.charts[spec.name].caption))
    rss = draw_rss_timelines(a, out / "charts")
    if rss:
        charts.append((*rss, RSS_CAPTION))

    warns = a.warnings()  # after the tables and charts: they note files they could not read
    later = main_tables + shaped + other + ([excluded] if excluded.rows else [])
    md_path = out / "report.md"
    atomic_write(md_path, markdown.page(title, ans, verdicts, charts, warns, env, later, first, beside))
    atomic_write(out / "report.html", html.page(title, ans, verdicts, charts, warns, env, later, cells, first, beside))
    return md_path
