"""The report in HTML: a table as <table>, and report.html, one self-contained file (inline CSS and
SVG, no script, no request)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from alloclab.answers import sentences as answers
from alloclab.answers.table import Table

CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px}
th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}.warn{background:#fff4e0;padding:.5em 1em}
svg{max-width:100%;height:auto}#forest{margin:.5em 0}#forest svg{max-height:560px;width:auto}
h1{font-size:22px;margin:.3em 0}details{margin:1em 0}.note{color:#555;font-size:12px}
.headline{font-size:17px;font-weight:bold}.subline{margin-top:-.4em}.answers li{margin:.3em 0}
figcaption{color:#444;font-size:12px;max-width:900px}"""


def _cell_html(c: str) -> str:
    """A table cell; a file beside the report (a flame graph) becomes a link to it."""
    if re.fullmatch(r"flamegraphs/[A-Za-z0-9_.-]+\.svg", c):
        return f'<a href="{html.escape(c)}">{html.escape(c.split("/")[-1])}</a>'
    return html.escape(c)


def to_html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td>{_cell_html(c)}</td>" for c in r) + "</tr>" for r in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _inline_svg(path: Path) -> str:
    """The SVG file as an element to embed: no XML prolog, no RDF metadata block."""
    text = re.sub(r"^<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>)?\s*", "", path.read_text())
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)


def _versions_link(text: str) -> str:
    """The line under the headline, its "versions under Environment" a link to that section."""
    words = "versions under Environment"
    return html.escape(text).replace(words, f"<a href='#environment'>{words}</a>")


def _group_html(label: str, items: list[str]) -> str:
    """A cell's answers under its name (a study-wide line stands alone)."""
    if not label:
        return "".join(f"<li>{html.escape(x)}</li>" for x in items)
    return (f"<li>{html.escape(label)}<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in items) + "</ul></li>")


def page(title: str, ans: answers.Answers, verdicts: Table, charts: list[tuple[Path, Path, str]], warns: list[str],
         env: list[str], later: list[Table], cells: Table, first: list[tuple[Path, Path, str]] = (),
         beside: list[tuple[Path, Path, str]] = ()) -> str:
    """report.html: the first screen holds the answer (the headline and the forest plot of the
    main question's verdicts, or a life's RSS and memory verdicts; one line per cell under it,
    then the forest plot of peak RSS: the memory answer beside the speed answer, or a life's speed
    beside its memory); then why, the verdicts, what
    report.md holds with the charts inlined as SVG, and the per-cell statistics folded away."""
    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
         f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
         f"<p class='headline' id='answer'>{html.escape(ans.headline)}</p>",
         f"<p class='subline'>{_versions_link(ans.subline)}</p>"]
    for i, (_png, svg, cap) in enumerate(first):
        h.append(f"<figure id='{'forest' if i == 0 else f'forest{i + 1}'}'>{_inline_svg(svg)}"
                 f"<figcaption>{html.escape(cap)}</figcaption></figure>")
    h += ["<ul class='answers'>"] + ([_group_html(label, items) for label, items in ans.groups]
                                     or ["<li>(no comparison)</li>"])
    h.append("</ul>")
    for i, (_png, svg, cap) in enumerate(beside):
        h.append(f"<figure id='{'memory' if i == 0 else f'memory{i + 1}'}'>{_inline_svg(svg)}"
                 f"<figcaption>{html.escape(cap)}</figcaption></figure>")
    h += [f"<p class='note'>{html.escape(ans.note)}</p>", "<h2>Why: each answer in full</h2><ul class='answers'>"]
    h += [f"<li>{html.escape(x)}</li>" for x in ans.sentences] + ["</ul>"]
    h += [f"<h2>{html.escape(verdicts.title)}</h2>", to_html(verdicts), "<h2>Charts</h2>"]
    h += [f"<figure>{_inline_svg(svg)}<figcaption>{html.escape(cap)}</figcaption></figure>"
          for _png, svg, cap in charts]
    h += ["<h2>Warnings</h2><div class='warn'><ul>"] + ([f"<li>{html.escape(w)}</li>" for w in warns]
                                                       or ["<li>none</li>"]) + ["</ul></div>"]
    h += ["<h2 id='environment'>Environment</h2><ul>"] + [f"<li>{html.escape(x)}</li>" for x in env] + ["</ul>"]
    for t in later:
        h += [f"<h2>{html.escape(t.title)}</h2>"] + ([f"<p class='note'>{html.escape(t.note)}</p>"] if t.note else [])
        h.append(to_html(t))
    h += [f"<details><summary>{html.escape(cells.title)} ({len(cells.rows)} rows)</summary>{to_html(cells)}"
          "</details></body></html>"]
    return "\n".join(h)
