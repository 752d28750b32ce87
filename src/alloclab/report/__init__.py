"""The report of a results folder, rebuilt from its stored files alone.

    report/report.html   one self-contained file (inline CSS and SVG, no script, no request)
    report/report.md     the same tables in Markdown, charts linked as PNG
    report/tables/       every table as .csv and .md
    report/charts/       every chart as .png and .svg

    build.py        the one build: the folder's analysis (answers.analysis), rendered
    charts.py       the charts (matplotlib) and the data table of each
    flames.py       flame graphs of the profiled runs (inferno), and their table
    markdown.py     a table in Markdown, and report.md
    html.py         a table in HTML, and report.html

Every number it shows is the analysis' (answers.analysis: its tables are answers.tables', the
TPC-C ones answers.tpcc's, a life's answers.lives', the Environment answers.provenance's); the
report computes no statistic and never reads the stored files itself.
"""

from __future__ import annotations

from alloclab.report.build import REPORT_DIR, build
from alloclab.report.markdown import to_markdown

__all__ = ["REPORT_DIR", "build", "to_markdown"]
