"""The report of a results folder, rebuilt from its stored files alone: Markdown tables
(median per cell, delta against the baseline allocator) and PNG charts."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from alloclab import analyse  # noqa: E402
from alloclab.store import atomic_write  # noqa: E402

REPORT_DIR = "report"


@dataclass(frozen=True)
class Metric:
    column: str
    title: str
    unit: str
    scale: float
    higher_is_better: bool

    def fmt(self, v: float) -> str:
        x = v / self.scale
        if self.column == "ops_per_s":
            return f"{x / 1e6:.3f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"
        return f"{x:.2f}" if x < 100 else f"{x:.0f}"


THROUGHPUT = Metric("ops_per_s", "Throughput", "ops/s", 1, True)
P99 = Metric("p99_ns", "p99 latency per call", "ms", 1e6, False)
PEAK_RSS = Metric("peak_rss_bytes", "Peak RSS (VmHWM)", "MiB", 2**20, False)


@dataclass(frozen=True)
class Chart:
    """One of a study's published charts: which runs, what on each axis."""

    file: str
    title: str
    parts: tuple[str, ...]
    x: str
    metric: Metric
    kind: str = "line"  # line | bars
    logx: bool = False


# Study 2 (kv-allocators): the five charts of the published article.
KV_CHARTS = (
    Chart("put_throughput_vs_threads.png", "PUT throughput vs threads (small-value churn, b1)",
          ("churn_small",), "threads", THROUGHPUT),
    Chart("contention_throughput_vs_threads.png", "PUT contention throughput vs threads (b100)",
          ("contention",), "threads", THROUGHPUT),
    Chart("batch_size_vs_throughput.png", "Batch size vs PUT throughput (t8)", ("batch",), "batch", THROUGHPUT,
          logx=True),
    Chart("peak_rss_vs_threads.png", "Peak RSS vs threads (small-value churn)", ("churn_small",), "threads",
          PEAK_RSS),
    Chart("large_value_p99.png", "Large-value PUT p99 latency (t8)", ("large_4kb", "large_64kb"), "part", P99,
          kind="bars"),
)


def _params(cell: tuple) -> str:
    c = dict(zip(analyse.CELL_FIELDS, cell))
    return f"{c['workload']} {c['pattern']} k{c['key_bytes']} v{c['value_bytes']} b{c['batch']} t{c['threads']}"


def table(study: analyse.Study, metric: Metric) -> str:
    """Median per cell for each allocator, with delta % against the baseline."""
    cells = analyse.by_cell(study.valid(), metric.column)
    allocs = study.allocators
    base = study.baseline
    head = ["engine", "part", "parameters", "n"] + [
        f"{a} ({metric.unit})" if a == base else f"{a} (Δ% vs {base})" for a in allocs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell in sorted(cells, key=lambda c: tuple(str(x).zfill(8) if isinstance(x, int) else x for x in c)):
        per = cells[cell]
        b = analyse.median(per.get(base, []))
        n = max(len(v) for v in per.values())
        row = [cell[0], cell[1], _params(cell), str(n)]
        for a in allocs:
            m = analyse.median(per.get(a, []))
            if m is None:
                row.append("–")
            elif a == base:
                row.append(metric.fmt(m))
            else:
                d = analyse.delta_pct(m, b)
                row.append(f"{metric.fmt(m)} ({d:+.1f}%)" if d is not None else metric.fmt(m))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def chart(study: analyse.Study, spec: Chart, out: Path) -> Path | None:
    rows = [r for r in study.valid() if r.part in spec.parts]
    if not rows:
        return None
    engines = [e for e in dict.fromkeys(r.engine for r in rows)]
    allocs = [a for a in study.allocators if any(r.allocator == a for r in rows)]
    fig, axes = plt.subplots(1, len(engines), figsize=(5.2 * len(engines), 4), squeeze=False)
    for ax, engine in zip(axes[0], engines):
        er = [r for r in rows if r.engine == engine]
        if spec.kind == "line":
            for a in allocs:
                pts = defaultdict(list)
                for r in er:
                    if r.allocator == a:
                        pts[getattr(r, spec.x)].append(getattr(r, spec.metric.column) / spec.metric.scale)
                xs = sorted(pts)
                ax.plot(xs, [analyse.median(pts[x]) for x in xs], marker="o", label=a)
            ax.set_xlabel(spec.x)
            if spec.logx:
                ax.set_xscale("log")
        else:
            groups = list(dict.fromkeys(getattr(r, spec.x) for r in er))
            width = 0.8 / max(len(allocs), 1)
            for i, a in enumerate(allocs):
                ys = [analyse.median([getattr(r, spec.metric.column) / spec.metric.scale for r in er
                                      if r.allocator == a and getattr(r, spec.x) == g]) or 0 for g in groups]
                ax.bar([g + i * width for g in range(len(groups))], ys, width, label=a)
            ax.set_xticks([g + width * (len(allocs) - 1) / 2 for g in range(len(groups))])
            ax.set_xticklabels(groups)
        ax.set_title(engine)
        ax.set_ylabel(f"{spec.metric.title} ({spec.metric.unit})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(spec.title)
    fig.tight_layout()
    path = out / spec.file
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def build(root: Path) -> Path:
    """Write report/report.md and the charts; return the Markdown path."""
    study = analyse.load(root)
    out = Path(root) / REPORT_DIR
    out.mkdir(exist_ok=True)
    m = study.machine
    parts = [f"# alloclab report: {study.plan.get('name', 'study')}", ""]
    parts.append(f"- machine: {m.get('cpu_model')}, {m.get('cores')} cores, "
                 f"{(m.get('memory_bytes') or 0) / 2**30:.0f} GiB, kernel {m.get('kernel')}, "
                 f"{m.get('data_filesystem', {}).get('type')} data filesystem")
    engines = (m.get("driver") or {}).get("engines", {})
    parts.append("- engines: " + ", ".join(f"{k} {v}" for k, v in engines.items() if k != "null"))
    allocs = study.plan.get("allocators", [])
    parts.append("- allocators: " + ", ".join(f"{a['name']} ({a.get('version')})" for a in allocs))
    parts.append(f"- runs: {len(study.rows)} stored, {len(study.valid())} valid (finished, allocator proved); "
                 f"{study.plan.get('runs')} repeat(s) per cell, seed {study.plan.get('seed')}, "
                 f"baseline {study.baseline}")
    parts.append("- latency is per call: one call is one batch/transaction of `batch` operations")
    few = study.plan.get("runs", 1) < 3
    if few:
        parts.append(f"- **{study.plan.get('runs')} run(s) per cell: fewer than 3, so these are single "
                     "measurements, not intervals; differences under ~10 % are within this machine's noise**")
    parts.append("")
    bad = study.not_valid()
    if bad:
        parts += ["## Runs excluded", "", "| run | status | allocator verified | reason |", "|---|---|---|---|"]
        parts += [f"| {r.run_id} | {r.status} | {str(r.allocator_verified).lower()} | {r.reason} |" for r in bad]
        parts.append("")
    for metric in (THROUGHPUT, P99, PEAK_RSS):
        parts += [f"## {metric.title} (median per cell)", "", table(study, metric), ""]
    parts += ["## Charts", ""]
    for spec in KV_CHARTS:
        p = chart(study, spec, out)
        if p:
            parts.append(f"![{spec.title}]({p.name})")
    md = out / "report.md"
    atomic_write(md, "\n".join(parts) + "\n")
    return md
