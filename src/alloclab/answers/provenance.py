"""Where the numbers come from: the report's Environment section (machine, engines and servers,
versions, the plan, and how each allocator was used and proved)."""

from __future__ import annotations

from alloclab.answers import analyse
from alloclab.catalog.allocators import short_name
from alloclab.plan import workload
from alloclab.results.store import rounds_ran


def _rounds(study: analyse.Study) -> str:
    """How many rounds the plan asked for: a fixed number, or rounds until decided."""
    p = study.plan
    if p.get("runs") is not None:
        return f"{p['runs']} repeat(s)"
    ran = len(study.schedule.get("rounds") or ()) or rounds_ran(study.rows)
    return f"rounds until decided ({ran} run, at most {p.get('max_rounds')})"


def environment(study: analyse.Study) -> list[str]:
    m, p = study.machine, study.plan
    engines = (m.get("driver") or {}).get("engines", {})
    fs = m.get("data_filesystem", {})
    lines = [
        f"machine: {m.get('cpu_model')}, {m.get('cores')} cores, {(m.get('memory_bytes') or 0) / 2**30:.0f} GiB, "
        f"{m.get('os')}, kernel {m.get('kernel')}",
        f"data filesystem: {fs.get('type')} on {fs.get('device')} ({fs.get('mount')})",
        "engines: " + ", ".join(f"{k} {v}" for k, v in engines.items() if k in study.engines),
        f"alloclab {m.get('alloclab_version')} ({m.get('alloclab_commit') or 'no commit'}), "
        f"driver {(m.get('driver') or {}).get('driver_version')}, Python {m.get('python')}",
        f"plan: {p.get('name')} ({p.get('preset') or 'custom'}, scale {p.get('scale')}), {_rounds(study)}, "
        f"seed {p.get('seed')}, warm-up {p.get('warmup_s')} s, baseline {study.baseline}",
        "engine settings: " + (", ".join(f"{k}={v}" for k, v in sorted(p.get("engine_options", {}).items()))
                               or "engine defaults"),
        "latency is per call: one call is one engine batch/transaction of `batch` operations",
    ]
    if m.get("executor") == "ray":  # a study on a Ray cluster: its nodes and what each ran
        ran: dict[str, int] = {}
        for r in study.rows:
            ran[r.node] = ran.get(r.node, 0) + 1
        lines.append(f"executor: Ray cluster at {m.get('ray_address')}, one run per node at a time; pairs are "
                     "formed within a node")
        for n in m.get("nodes", []):
            lines.append(f"node {n.get('node')}: {n.get('hostname')}, machine {n.get('machine_fingerprint')}, "
                         f"{ran.pop(n.get('node'), 0)} run(s)")
        for node, count in sorted(ran.items()):  # nodes that joined later (replacements)
            lines.append(f"node {node}: {count} run(s)")
    servers: dict[str, dict[str, set]] = {}  # target -> server version -> allocator libraries used
    plugins: dict[str, set] = {}  # target -> the storage-engine plugin the server reported
    for r in study.rows:
        j = study.run_json(r.run_id) if r.engine not in engines else {}
        if j.get("server_version"):
            used = servers.setdefault(r.engine, {}).setdefault(j["server_version"], set())
            a = j.get("allocator_used") or {}
            used.add(f"{a.get('name')}: {a.get('version')}, {a.get('path') or 'no preload'}")
        plug = j.get("engine_plugin")
        if plug:
            what = (f"TideSQL {plug['tidesql_version']} on TidesDB {plug['tidesdb_version']}, "
                    if plug.get("tidesql_version") else "")
            plugins.setdefault(r.engine, set()).add(f"{what}{plug.get('name')} plugin {plug.get('version')} "
                                                    f"({plug.get('library')})")
    for wl in workload.every():  # the clients each workload's runs used
        lines += wl.environment_lines(study.rows_of(wl.names))
    for target, versions in sorted(servers.items()):
        for version, used in versions.items():
            engine = "; ".join(sorted(plugins.get(target, ())))
            lines.append(f"server {target}: {version}{'; engine ' + engine if engine else ''}; allocators as the "
                         f"server used them: {'; '.join(sorted(used))}")
    for a in p.get("allocators", []):
        runs = [r for r in study.rows if r.allocator == a["name"]]
        ok = sum(r.allocator_verified for r in runs)
        proof = next((study.run_json(r.run_id).get("proof", {}).get("reason") for r in runs if r.allocator_verified),
                     "no proved run")
        env = " ".join(f"{k}={v}" for k, v in (a.get("env") or {}).items())
        how = "linked into the driver" if a.get("link") else (a.get("path") or "no preload")
        # Google's TCMalloc says in its own account whether its per-CPU caches were in use
        said = [acc["per_cpu_caches_active"] for r in runs
                if "per_cpu_caches_active" in (acc := study.run_json(r.run_id).get("alloc_account") or {})]
        percpu = (f"; per-CPU caches (rseq) active in {sum(map(bool, said))}/{len(said)} runs, by its own "
                  "MallocExtension" if said else "")
        named = a["name"] if short_name(a["name"]) == a["name"] else f"{short_name(a['name'])} ({a['name']})"
        lines.append(f"allocator {named}: {a.get('version')}{', ' + a['source'] if a.get('source') else ''}, {how}"
                     f"{' ' + env if env else ''}; proved in {ok}/{len(runs)} runs, e.g. {proof}{percpu}")
    return lines
