"""Runs against a database server: golden data prepared once per (target, dataset, profile)
and kept as a stopped datadir; per run a copy of it, the server started with the run's
allocator preloaded, proved from /proc/PID/maps (for PostgreSQL the postmaster and the
backends that served the run), the client (the real sysbench), samples of the server's
process tree and of the client, a clean shutdown, and the server log kept with the run."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from alloclab import account, allocators, driver, environment, events, noise, sampler, sysbench, targets
from alloclab.datasets import Prepared
from alloclab.errors import AlloclabError
from alloclab.execute import (
    STATUS_FAILED,
    STATUS_INVALID,
    STATUS_OK,
    instrumented,
    profile_note,
    recorded,
    tpcc_rates,
)
from alloclab.placement import MemoryLimit, parse_cpus
from alloclab.plan import RunSpec
from alloclab.processes import die_with_parent
from alloclab.store import RunRow, atomic_write, write_json


def _copy(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    dst.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)  # keeps ownership (postgres)


def profile_settings(spec: RunSpec) -> dict[str, str]:
    """The server settings of a run: its named profile, else "small" for TPC-C (study 1) and
    "sysbench" for sysbench (studies 3 and 5)."""
    t = targets.parse(spec.cell.engine)
    default = "small" if spec.cell.workload == "tpcc" else "sysbench"
    return targets.load_profile(t, spec.cell.profile if spec.cell.profile != "default" else default)


class Golden:
    """Prepared datadirs, stopped, one per (target, dataset, profile)."""

    def __init__(self, scratch: Path, study_root: Path, exe: Path, notify=None):
        self.exe = exe
        self.cache = Prepared(scratch / "golden")
        self.study_root = study_root
        self.notify = notify or (lambda _t: None)

    @staticmethod
    def key(spec: RunSpec) -> str:
        c = spec.cell
        if c.workload == "tpcc":
            ident = {"target": c.engine, "warehouses": c.warehouses, "loaders": c.loaders, "seed": spec.study_seed,
                     "settings": profile_settings(spec)}
            what = f"tpcc-w{c.warehouses}"
        else:
            ident = {"target": c.engine, "tables": c.tables, "table_size": c.table_size,
                     "settings": profile_settings(spec)}
            what = f"sb{c.tables}x{c.table_size}"
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        return f"{c.engine.replace(':', '_')}-{what}-{digest}"

    def datadir(self, spec: RunSpec) -> Path:
        key = self.key(spec)
        return self.cache.get(key, lambda path: self._prepare(spec, key, path))

    def _prepare(self, spec: RunSpec, key: str, path: Path) -> None:
        c = spec.cell
        t = targets.parse(c.engine)
        logs = self.study_root / "loads" / key
        logs.mkdir(parents=True, exist_ok=True)
        what = (f"{c.warehouses} TPC-C warehouse(s)" if c.workload == "tpcc"
                else f"{c.tables} x {c.table_size} sysbench rows")
        self.notify(f"preparing {what} in {c.engine} ({key}), unmeasured")
        srv = targets.Server(t, path, logs / "server.log", settings=profile_settings(spec))
        t0 = time.monotonic()
        srv.initialise()
        srv.start(environment.clean())
        try:
            if c.workload == "tpcc":
                srv.sql(f"CREATE DATABASE {TPCC_DATABASE}")
                argv = [str(self.exe), "tpcc-load", *client_target(srv), "--warehouses", str(c.warehouses),
                        "--loaders", str(c.loaders), "--seed", str(spec.study_seed), "--events",
                        str(logs / "events.jsonl")]
            else:
                srv.sql(f"CREATE DATABASE {sysbench.DATABASE}")
                argv = sysbench.prepare_argv(srv, c.tables, c.table_size)
            with open(logs / "prepare.log", "wb") as log:
                p = subprocess.run(argv, stdout=log, stderr=log, timeout=spec.timeout_s, preexec_fn=die_with_parent,
                                   env=environment.clean())
            if p.returncode != 0:
                raise AlloclabError(f"preparing {key} failed: "
                                    f"{(logs / 'prepare.log').read_text(errors='replace').strip()[-300:]}")
        finally:
            clean = srv.stop()
        if not clean:
            raise AlloclabError(f"{c.engine} did not shut down cleanly after prepare: {srv.log_tail()}")
        write_json(logs / "prepare.json", {"key": key, "target": c.engine, "tables": c.tables,
                                           "table_size": c.table_size, "seconds": time.monotonic() - t0})
        self.notify(f"prepared {key} in {time.monotonic() - t0:.1f}s")


TPCC_DATABASE = "tpcc"


def client_target(srv: targets.Server) -> list[str]:
    """How the driver, as a client, reaches a server alloclab started."""
    engine = "postgres" if srv.target.kind == "postgres" else "mariadb"
    return ["--engine", engine, "--socket", str(srv.socket), "--database", TPCC_DATABASE,
            "--table-engine", srv.target.engine]


def oltp_client_argv(exe: Path, srv: targets.Server, spec: RunSpec, events_path: Path) -> list[str]:
    """The driver running sysbench's OLTP test natively against the server's sbtest tables."""
    c = spec.cell
    engine = "postgres" if srv.target.kind == "postgres" else "mariadb"
    return [str(exe), "run", "--workload", c.test, "--engine", engine, "--socket", str(srv.socket), "--database",
            sysbench.DATABASE, "--tables", str(c.tables), "--table-size", str(c.table_size), "--threads",
            str(c.threads), "--seed", str(spec.seed), "--warmup-s", repr(spec.warmup_s), "--interval-ms",
            str(spec.interval_ms), "--events", str(events_path)] + (
                ["--duration-s", repr(c.duration_s)] if c.duration_s is not None else ["--ops", str(c.ops)])


def tpcc_client_argv(exe: Path, srv: targets.Server, spec: RunSpec, events_path: Path) -> list[str]:
    c = spec.cell
    a = [str(exe), "run", "--workload", "tpcc", *client_target(srv), "--threads", str(c.threads),
         "--warehouses", str(c.warehouses), "--tpcc-mix", c.mix, "--tpcc-mode", c.tpcc_mode, "--seed",
         str(spec.seed), "--warmup-s",
         repr(spec.warmup_s), "--interval-ms", str(spec.interval_ms), "--check", "--events", str(events_path)]
    a += ["--all-warehouses"] if c.all_warehouses else []
    a += ["--think"] if c.think else []
    a += ["--duration-s", repr(c.duration_s)] if c.duration_s is not None else ["--ops", str(c.ops)]
    return a


def _proof(alloc: allocators.Allocator, pid: int) -> allocators.Proof:
    return allocators.prove(alloc, allocators.read_maps(pid), pid)


def execute_server(spec: RunSpec, run_dir: Path, scratch: Path, study: str, golden: Path, exe: Path,
                   sample_hz: float = 20.0) -> RunRow:
    c = spec.cell
    t = targets.parse(c.engine)
    run_dir.mkdir(parents=True, exist_ok=True)
    datadir = scratch / spec.run_id
    _copy(golden, datadir)
    if t.kind == "postgres":
        targets.check_reachable(scratch)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    srv = targets.Server(t, datadir, run_dir / "server.log", settings=profile_settings(spec))
    server_cpus = parse_cpus(spec.server_cpus, "server_cpus") if spec.server_cpus else None
    client_cpus = parse_cpus(spec.client_cpus, "client_cpus") if spec.client_cpus else None
    limit = MemoryLimit(f"alloclab-{os.getpid()}-{spec.index}", spec.server_memory_bytes) \
        if spec.server_memory_bytes else None
    failure, proofs, result, driven = None, {}, None, None
    server_tl, client_tl = sampler.Timeline(sample_hz), sampler.Timeline(sample_hz)
    cpu_watch = noise.CpuWatch()
    t0 = time.monotonic()
    client = None
    alloc = spec.allocator
    server_version = None
    recorder = instrumented(spec, run_dir)
    helper = driver.account_library()
    if helper and t.stack:
        from alloclab import stack
        helper = stack.place(helper)
    # the allocator's own account, read by a helper inside every server process at the window's end
    mem = account.ServerAccount(datadir / "alloc-account" if t.stack else scratch / f"{spec.run_id}.account", helper)
    acc, rss_at_end, account_read = None, None, False
    try:
        if t.stack:
            from alloclab import stack
            alloc = stack.allocator(spec.allocator)  # the root's own library of that allocator
        srv.start(mem.env(alloc.target_env(dict(os.environ))), cpus=server_cpus,
                  preexec=limit.attach if limit else None)
        proofs["server"] = _proof(alloc, srv.pid)
        if recorder:
            recorder.pids = [srv.pid]
            recorder.prepare()
        server_version = srv.sql("SELECT @@version" if t.kind == "mariadb" else "SHOW server_version").strip()
        if c.workload == "tpcc":
            argv = tpcc_client_argv(exe, srv, spec, run_dir / ".events.jsonl.partial")
        elif c.client == "native":
            argv = oltp_client_argv(exe, srv, spec, run_dir / ".events.jsonl.partial")
        else:
            argv = sysbench.run_argv(srv, c.test, c.threads, c.duration_s, c.tables, c.table_size, spec.seed,
                                     events=c.ops)
        with open(run_dir / "client.log", "wb") as out:
            t_client = time.monotonic()
            client = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=_client_setup(client_cpus), env=environment.clean())
            deadline = t0 + spec.timeout_s
            backend_checked = t.kind != "postgres"
            # the client reports every second (sysbench's --report-interval, the driver's interval
            # events): output that stops growing means a hang
            outputs = [run_dir / "client.log", run_dir / ".events.jsonl.partial"]
            last_size, last_growth = -1, time.monotonic()
            while client.poll() is None:
                size = sum(p.stat().st_size for p in outputs if p.exists())
                if size != last_size:
                    last_size, last_growth = size, time.monotonic()
                elif time.monotonic() - last_growth > spec.hang_timeout_s and failure is None:
                    failure = f"the client sent nothing for {spec.hang_timeout_s:g}s (hung) and was killed"
                    client.kill()
                time.sleep(max(0.0, min(server_tl.due(), client_tl.due())))
                begun, ended = _window(c, outputs[1], time.monotonic() - t_client)
                # sysbench counts transactions over its whole run, the driver over its window
                phase = ("measure" if _sysbench_client(c) or (begun and not ended)
                         else "rampup" if not begun else "after")
                pids = srv.pids()
                server_tl.take_tree(pids, phase) if pids else None
                client_tl.take(client.pid, phase)
                if ended and not account_read:  # first: stopping perf takes a while
                    acc, rss_at_end = _account(mem, srv, server_tl, spec.allocator.base)
                    account_read = True
                if recorder:  # sysbench's window ends with it: perf stops when it exits
                    _follow_window(recorder, srv, begun, ended and not _sysbench_client(c))
                if not backend_checked and time.monotonic() - t0 > 1.0:
                    backends = [p for p in pids if p != srv.pid]
                    if backends:  # the processes that served the run
                        proofs["backends"] = [_proof(alloc, p) for p in backends[:8]]
                        backend_checked = True
                if srv.proc.poll() is not None and failure is None:
                    failure = f"the server exited (code {srv.proc.returncode}) during the run: {srv.log_tail()}"
                if time.monotonic() > deadline and failure is None:
                    failure = f"ran past its deadline of {spec.timeout_s:g}s and was killed"
                    client.kill()
        if not account_read:  # a client that ended before its window's end was seen
            acc, rss_at_end = _account(mem, srv, server_tl, spec.allocator.base)
        text = (run_dir / "client.log").read_text(errors="replace")
        if failure is None and (c.workload == "tpcc" or c.client == "native"):
            driven, failure = _driver_outcome(run_dir, client.returncode, text, need_check=c.workload == "tpcc")
        elif failure is None:
            try:
                result = sysbench.parse(text)
            except AlloclabError as e:
                failure = f"sysbench failed (exit {client.returncode}): {e}; {text.strip()[-200:]}"
    except AlloclabError as e:
        failure = str(e)
    finally:
        if recorder:
            recorder.stop()
        if client is not None and client.poll() is None:
            client.kill()
            client.wait()
        clean = srv.stop()
        if limit:
            limit.remove()
        mem.close()
        shutil.rmtree(datadir, ignore_errors=True)
    wall = time.monotonic() - t0
    run_noise = cpu_watch.stop()  # server and client were reaped: their CPU is alloclab's children time

    all_proofs = [proofs["server"]] if "server" in proofs else []
    all_proofs += proofs.get("backends", [])
    verified = bool(all_proofs) and all(p.verified for p in all_proofs)
    if t.kind == "postgres" and "backends" not in proofs and failure is None:
        verified = False
        all_proofs.append(allocators.Proof(False, "no backend process was seen to prove"))
    status, reason = STATUS_OK, ""
    if failure:
        status, reason = STATUS_FAILED, failure
    elif c.workload == "sysbench" and client is not None and client.returncode != 0:
        status, reason = STATUS_FAILED, f"sysbench exited with code {client.returncode}"
    elif not clean:
        status, reason = STATUS_FAILED, f"the server did not shut down cleanly: {srv.log_tail()}"
    if not verified:
        bad = next((p.reason for p in all_proofs if not p.verified), "no proof")
        reason = f"allocator not proved: {bad}" + (f"; {reason}" if reason else "")
        status = STATUS_INVALID if status == STATUS_OK else status

    delta = _window_delta(server_tl)
    client_delta = _window_delta(client_tl)
    usage = ((driven or {}).get("summary") or {}).get("usage_window") or {}
    client_cpu = ({"client_cpu_user_s": round(usage.get("cpu_user_s", 0.0), 3),
                   "client_cpu_sys_s": round(usage.get("cpu_sys_s", 0.0), 3)} if usage else
                  {"client_cpu_user_s": round(client_delta("cpu_user_s"), 3),
                   "client_cpu_sys_s": round(client_delta("cpu_sys_s"), 3)} if client_tl.samples else {})

    row = RunRow(
        run_id=spec.run_id, index=spec.index, study=study, cell=c.key, engine=c.engine,
        allocator=spec.allocator.name, allocator_base=spec.allocator.base, allocator_verified=verified,
        workload=c.workload, part=c.part, pattern=c.test or "", threads=c.threads, batch=1, key_bytes=0,
        value_bytes=0, repeat=spec.repeat, seed=spec.seed,
        peak_rss_bytes=max(server_tl.peak_rss(), server_tl.peak_hwm()),
        cpu_user_s=round(delta("cpu_user_s"), 3), cpu_sys_s=round(delta("cpu_sys_s"), 3),
        ctx_voluntary=delta("ctx_voluntary"), ctx_involuntary=delta("ctx_involuntary"),
        minor_faults=delta("minor_faults"), major_faults=delta("major_faults"), wall_s=round(wall, 3),
        status=status, reason=reason, started_at=started_at, other_busy_cores=round(run_noise.other_cores, 3),
        profile=c.profile, shape=c.shape, warehouses=c.warehouses, client=c.client if c.workload == "sysbench" else "",
        purpose=spec.purpose, **_measures(result, driven), **account.row_fields(acc, rss_at_end), **client_cpu,
        tpcc_mode=c.tpcc_mode)
    if recorder:
        row = replace(row, **recorded(recorder, run_dir, row.ops, row.duration_s))
    for name, tl in (("samples.csv", server_tl), ("client_samples.csv", client_tl)):
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(sampler.Sample.columns())
        w.writerows(s.row() for s in tl.samples)
        atomic_write(run_dir / name, buf.getvalue())
    write_json(run_dir / "run.json", {
        "spec": spec.to_json(), "row": row.to_csv(), "target": t.name, "server_version": server_version,
        "allocator_used": alloc.to_json(),
        "proof": {"verified": verified, "server": proofs["server"].to_json() if "server" in proofs else None,
                  "backends": [p.to_json() for p in proofs.get("backends", [])],
                  "reason": all_proofs[0].reason if all_proofs else "no proof"},
        "server_settings": srv.settings, "clean_shutdown": clean, "profile": profile_note(spec, run_dir, recorder),
        "alloc_account": acc, "alloc_account_missing": None if acc else mem.missing,
        "sysbench": result.__dict__ if result else None, "noise": run_noise.to_json(),
        "summary": {k: v for k, v in (driven or {}).get("summary", {}).items() if k != "ops"} or None,
        "ops": {n: {k: v for k, v in op.items() if k != "hist"}
                for n, op in (driven or {}).get("summary", {}).get("ops", {}).items()},
        "check": (driven or {}).get("check"),
        "placement": {"server_cpus": sorted(server_cpus) if server_cpus else None,
                      "client_cpus": sorted(client_cpus) if client_cpus else None,
                      "server_memory_bytes": spec.server_memory_bytes or None},
    })
    return row


SYSBENCH_CONNECTED_S = 1.0  # sysbench has connected every thread by then
SYSBENCH_END_MARGIN_S = 0.5  # the window's end is read this long before sysbench's --time is up


def _window_delta(tl: sampler.Timeline):
    """A counter's growth over the samples of the measured window (all samples if none is
    marked so): CPU and context switches of the same span as the client's count."""
    inside = [x for x in tl.samples if x.phase == "measure"] or tl.samples
    first, last = (inside[0], inside[-1]) if inside else (None, None)

    def delta(attr):
        return getattr(last, attr) - getattr(first, attr) if first else 0
    return delta


def _account(mem: account.ServerAccount, srv: targets.Server, tl: sampler.Timeline,
             base: str) -> tuple[dict | None, int | None]:
    """The window is over: the allocator's account of every server process, and their RSS at the
    same moment."""
    pids = srv.pids()
    acc = account.own(mem.read(pids), base)
    end = tl.take_tree(pids, "end") if pids else None
    return acc, end.rss_bytes if end else None


def _sysbench_client(c) -> bool:
    return c.workload == "sysbench" and c.client != "native"


def _window(c, events_path: Path, since_client_s: float) -> tuple[bool, bool]:
    """Whether the client's measured window has begun and ended: sysbench's run once its threads
    have connected, until just before its time is up (its connections, and PostgreSQL's
    backends, are still there); the driver's `measure` phase (after the ramp-up)."""
    if _sysbench_client(c):
        return (since_client_s >= SYSBENCH_CONNECTED_S,
                bool(c.duration_s) and since_client_s >= c.duration_s - SYSBENCH_END_MARGIN_S)
    try:
        text = events_path.read_text(errors="replace")
    except OSError:
        return False, False
    return '"phase":"measure","state":"begin"' in text, '"phase":"measure","state":"end"' in text


def _follow_window(recorder, srv: targets.Server, begun: bool, ended: bool) -> None:
    """perf records the window: the server and every backend that serves the client
    (PostgreSQL's, forked later, inherit it)."""
    if recorder.window and recorder.window[1]:
        return
    if begun and recorder.proc is None:
        recorder.pids = srv.pids() or [srv.pid]
        recorder.start()
    if ended:
        recorder.stop()


def _driver_outcome(run_dir: Path, exit_code: int, log_text: str, need_check: bool) -> tuple[dict | None, str | None]:
    """The driver's events as a client (TPC-C or native OLTP): its summary and, for TPC-C, its
    consistency check; or why it failed."""
    partial = run_dir / ".events.jsonl.partial"
    if partial.exists():
        os.replace(partial, run_dir / "events.jsonl")
    try:
        evs = list(events.parse_lines((run_dir / "events.jsonl").read_text().splitlines()))
    except (OSError, AlloclabError) as e:
        return None, f"the TPC-C client left no readable events ({e}): {log_text.strip()[-200:]}"
    found = {e.type: e.data for e in evs}
    end = found.get("end", {})
    if exit_code != 0 or end.get("status") != "ok" or "summary" not in found:
        return None, f"the driver client failed (exit {exit_code}): {end.get('error') or log_text.strip()[-200:]}"
    out = {"summary": found["summary"], "check": found.get("check")}
    if found["summary"].get("total_errors"):
        return out, f"{found['summary']['total_errors']} transactions failed; first: " \
                    f"{found['summary'].get('first_error')}"
    if not need_check:
        return out, None
    check = found.get("check")
    if not check:
        return out, "the TPC-C consistency check did not run"
    if not check.get("ok"):
        bad = [x for x in check.get("conditions", []) if not x.get("ok")]
        return out, "consistency " + "; ".join(f"condition {x.get('id')} failed: {x.get('detail')}" for x in bad)
    return out, None


def _measures(result: sysbench.Result | None, driven: dict | None) -> dict:
    """The client-side numbers of a row, from sysbench or from the driver as client."""
    if driven:
        summ = driven["summary"]
        pct = events.percentiles_ns(events.merged_histogram(summ))
        return {"ops": int(summ.get("total_ops", 0)), "duration_s": round(float(summ.get("duration_s", 0)), 6),
                "ops_per_s": round(float(summ.get("ops_per_s", 0)), 2), **pct,
                "errors": int(summ.get("total_errors", 0)), "retries": int(summ.get("total_retries", 0)),
                **tpcc_rates(summ), "server_tpm": round(float((summ.get("workload") or {}).get("server_tpm") or 0), 1)}
    lat = result.latency_ms if result else {}

    def ns(key):  # what sysbench did not print stays empty
        return lat[key] * 1e6 if key in lat else None
    return {"ops": result.transactions if result else 0, "duration_s": result.total_time_s if result else 0.0,
            "ops_per_s": result.tps if result else 0.0, "p50_ns": ns("p50"), "p95_ns": ns("p95"),
            "p99_ns": lat.get("p99", 0) * 1e6, "p999_ns": ns("p99.9"),
            "max_ns": lat.get("max", 0) * 1e6, "mean_ns": lat.get("avg", 0) * 1e6, "errors": 0,
            # sysbench's "ignored errors" (deadlocks and the like) are retried by sysbench: recorded, not fatal
            "retries": result.errors if result else 0}


def _client_setup(cpus: set[int] | None):
    def setup():
        die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)
    return setup
