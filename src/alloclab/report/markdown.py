"""The report in Markdown: a table as a pipe table, and report.md (charts linked as PNG)."""

from __future__ import annotations

from pathlib import Path

from alloclab.answers import sentences as answers
from alloclab.answers.table import Table


def to_markdown(t: Table) -> str:
    esc = [h.replace("|", "\\|") for h in t.headers]
    lines = ["| " + " | ".join(esc) + " |", "|" + "---|" * len(t.headers)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in t.rows]
    return "\n".join(lines)


def page(title: str, ans: answers.Answers, verdicts: Table, charts: list[tuple[Path, Path, str]], warns: list[str],
         env: list[str], later: list[Table], first: list[tuple[Path, Path, str]] = (),
         beside: list[tuple[Path, Path, str]] = ()) -> str:
    """report.md: the answers (the main question's pictures right under the headline: the forest
    plot of its verdicts, or a life's RSS and memory verdicts), the answer lines, the pictures
    beside them (peak RSS; a life's speed), why, the verdicts, the other charts (as PNG, with
    captions), warnings, environment, then every other table."""
    md = [f"# {title}", ""] + answers.head_markdown(ans)
    for png, _svg, cap in first:
        md += [f"![{png.stem}](charts/{png.name})", "", f"_{cap}_", ""]
    md += answers.lines_markdown(ans) + ["", f"_{ans.note}_", ""]
    for png, _svg, cap in beside:  # the memory answer beside the speed answer
        md += [f"![{png.stem}](charts/{png.name})", "", f"_{cap}_", ""]
    md += [answers.details_markdown(ans), f"## {verdicts.title}", "", to_markdown(verdicts), ""]
    md += ["## Charts", ""]
    for png, _svg, cap in charts:
        md += [f"![{png.stem}](charts/{png.name})", "", f"_{cap}_", ""]
    md += ["## Warnings", ""] + ([f"- {w}" for w in warns] or ["- none"]) + [""]
    md += ["## Environment", ""] + [f"- {x}" for x in env] + [""]
    for t in later:
        md += [f"## {t.title}", ""] + ([f"_{t.note}_", ""] if t.note else []) + [to_markdown(t), ""]
    md += ["", "All per-cell statistics: [tables/cells.md](tables/cells.md) (CSV: tables/cells.csv); every verdict: "
           "[verdicts.csv](verdicts.csv), [verdicts.json](verdicts.json)", ""]
    return "\n".join(md)
