"""TPC-C (studies 1 and 4): its runs, transactions and ratios over its valid rows (the TPC-C
workload, alloclab.workloads.tpcc, names them as its report section), its loads, and the
published figures beside ours."""

from __future__ import annotations

import json
from collections import defaultdict

from alloclab.answers import analyse, stats
from alloclab.answers.metrics import NOPM
from alloclab.answers.table import Table, params
from alloclab.catalog.names import HAMMERDB_VERSION
from alloclab.plan import published

TXN_NAMES = {"neword": "NEWORD", "payment": "PAYMENT", "delivery": "DELIVERY", "slev": "SLEV", "ostat": "OSTAT"}


def group_label(r) -> str:
    return r.engine if r.profile == "default" else f"{r.engine} [{r.profile}]"


def _manifest_digests(study: analyse.Study) -> dict[str, str]:
    try:
        lines = (study.root / "MANIFEST.sha256").read_text().splitlines()
    except OSError:
        return {}
    return {rel: digest for digest, _, rel in (line.partition("  ") for line in lines)}


def tpcc_runs_table(study: analyse.Study, rows: list) -> Table:
    """Study 1's shape: one line per run, with the SHA-256 of its raw events."""
    t = Table("tpcc_runs", "TPC-C runs: NOPM, TPM and NEW-ORDER latency per run",
              ["engine", "allocator", "run", "NOPM", "client NOPM", "TPM", "NEWORD avg (ms)", "NEWORD p95 (ms)",
               "events.jsonl SHA-256"],
              note="NOPM is HammerDB's: the growth of the sum of D_NEXT_O_ID over the measured window, per minute; "
                   "client NOPM counts committed New-Orders at the client; TPM counts committed and rolled-back "
                   "transactions.")
    digests = _manifest_digests(study)
    for r in sorted(rows, key=lambda r: (group_label(r), r.allocator, r.repeat)):
        no = study.run_json(r.run_id).get("ops", {}).get("neword", {})
        o = r.own
        t.add([group_label(r), r.allocator, str(r.repeat), f"{o.nopm:,.0f}", f"{o.client_nopm:,.0f}", f"{o.tpm:,.0f}",
               f"{no.get('mean_ns', 0) / 1e6:.2f}", f"{no.get('p95_ns', 0) / 1e6:.2f}",
               digests.get(f"runs/{r.run_id}/events.jsonl", "")],
              [group_label(r), r.allocator, r.repeat, r.own.nopm, r.own.client_nopm, r.own.tpm, no.get("mean_ns"),
               no.get("p95_ns"), digests.get(f"runs/{r.run_id}/events.jsonl", "")])
    return t


def tpcc_txn_table(study: analyse.Study, rows: list) -> Table:
    """Study 4's shape: per transaction type, medians over the repeats."""
    t = Table("tpcc_transactions", "TPC-C per transaction type (median over repeats; ms)",
              ["engine", "allocator", "transaction", "runs", "count", "avg", "p50", "p95", "p99", "max", "sd",
               "conflict retries", "rolled back", "errors"],
              note="Retries are conflicts retried inside one transaction; rolled back are the 1 % of New-Orders "
                   "that roll back by design; errors are transactions that gave up.")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        for txn, op in study.run_json(r.run_id).get("ops", {}).items():
            groups[(group_label(r), r.allocator, txn)].append(op)
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


def tpcc_ratio_table(a) -> Table:
    t = Table("tpcc_ratios", "TPC-C NOPM ratios: engines against the first engine, profiles against the first profile",
              ["what", "cell", "allocator", "ratio", "95% CI", "verdict"])
    for cell, alloc, other, ref, c in a.engine_ratios[NOPM.column]:
        ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.ci_low is not None else "n<3"
        t.add([f"{other} / {ref}", params((ref, *cell)), alloc, f"{c.ratio:.2f}x", ci, c.verdict])
    for cell, alloc, other, ref, c in a.profile_gains[NOPM.column]:
        ci = f"[{c.ci_low:.2f}, {c.ci_high:.2f}]" if c.ci_low is not None else "n<3"
        t.add([f"{cell[0]}: {other} / {ref}", params(cell), alloc, f"{c.ratio:.2f}x", ci, c.verdict])
    return t


def loads_table(study: analyse.Study) -> Table | None:
    """Each TPC-C load (unmeasured, once per target and size), and who loaded it: alloclab's
    loader and HammerDB's schema build side by side."""
    recs = []
    for f in sorted((study.root / "loads").glob("*/*.json")):
        if f.name not in ("prepare.json", "load.json"):
            continue
        try:
            j = json.loads(f.read_text())
        except (OSError, ValueError):
            study.problems.add(str(f.relative_to(study.root)))
            continue
        if f.name == "load.json" or j.get("client") in ("native", "hammerdb"):  # not sysbench's prepares
            recs.append(j)
    if not recs:
        return None
    t = Table("tpcc_loads", "TPC-C loads (unmeasured, once per target and size)",
              ["target", "loaded by", "warehouses", "load s", "warehouses/min", "client CPU s"],
              note="alloclab's loader (LOAD DATA from memory, or batched transactions embedded) and HammerDB's "
                   "buildschema (its own rows and procedures), each timed on a fresh server; client CPU: the "
                   "loading process and its children.")
    for j in recs:
        s_ = j.get("load_s") or j.get("wall_s")
        wh = j.get("warehouses") or 0
        who = {"hammerdb": f"HammerDB {HAMMERDB_VERSION} buildschema"}.get(j.get("client"), "alloclab")
        t.add([j.get("target") or j.get("engine", ""), who, str(wh), f"{s_:.1f}" if s_ else "",
               f"{60 * wh / s_:.1f}" if s_ and wh else "",
               f"{j['client_cpu_s']:.1f}" if j.get("client_cpu_s") is not None else ""],
              [j.get("target") or j.get("engine"), who, wh, s_, 60 * wh / s_ if s_ and wh else None,
               j.get("client_cpu_s")])
    return t


def published_table(study: analyse.Study, valid: list) -> Table | None:
    """The published NOPM of the study this preset reproduces beside ours, each as a ratio to
    its own glibc: the shape (which allocator helps, by how much) is what carries over."""
    pub = published.PUBLISHED.get(study.plan.get("preset") or "")
    if not pub:
        return None
    t = Table("published", "Published figures beside ours (shape references)",
              ["engine", "allocator", "published NOPM", "published vs glibc", "our median NOPM", "ours vs glibc",
               "our runs"], note=pub["source"] + "; ours from this study's valid runs. Levels differ with the "
              "hardware; the ratios to glibc are the comparison." + "".join(
                  " " + c for c in published.published_caveats(study.plan, study.engines)))
    for target, figures in pub.items():
        if target == "source":
            continue
        # a published target's figures stand beside every build of it (mariadb11-tidesdb@4.2.5 ...)
        for engine in sorted(e for e in study.engines if e.split("@")[0] == target) or [target]:
            _published_rows(t, study, valid, engine, figures)
    return t


def _published_rows(t: Table, study: analyse.Study, valid: list, target: str, figures: dict) -> None:
    """Our runs of `target` beside the published figures of what it reproduces."""
    ours = {}
    for r in valid:
        if r.engine == target:
            ours.setdefault(r.allocator, []).append(r.own.nopm)
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
