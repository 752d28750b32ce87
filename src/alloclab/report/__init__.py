"""The report of a results folder, rebuilt from its stored files alone.

    report/report.html   one self-contained file (inline CSS and SVG, no script, no request)
    report/report.md     the same tables in Markdown, charts linked as PNG
    report/tables/       every table as .csv and .md
    report/charts/       every chart as .png and .svg

    build.py        the one build: the folder's analysis (answers.analysis), rendered
    tables.py       Table (with its CSV) and the study's tables
    tpcc.py         the TPC-C tables and the published figures beside ours
    charts.py       the charts (matplotlib) and the data table of each
    formatting.py   cell labels and statistics as text, shared by tables and charts
    provenance.py   the Environment section
    markdown.py     a table in Markdown, and report.md
    html.py         a table in HTML, and report.html
"""

from __future__ import annotations

from alloclab.report.build import REPORT_DIR, build
from alloclab.report.formatting import fmt_cmp, params
from alloclab.report.markdown import to_markdown
from alloclab.report.tables import Table

__all__ = ["REPORT_DIR", "Table", "build", "fmt_cmp", "params", "to_markdown"]
