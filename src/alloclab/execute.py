"""Executing one run: launch the driver with the allocator preloaded, read its events, sample
it, prove its allocator, and turn it all into a row. Never raises for a run that went wrong:
a broken run becomes a row with status `failed` or `invalid` and its reason."""

from __future__ import annotations

import csv
import io
import os
import selectors
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from alloclab import account, allocators, driver, events, noise, profiling, sampler
from alloclab.datasets import Datasets
from alloclab.errors import AlloclabError
from alloclab.placement import parse_cpus
from alloclab.plan import RunSpec
from alloclab.processes import die_with_parent, kill_group
from alloclab.store import RunRow, atomic_write, write_json

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INVALID = "invalid"


@dataclass
class Watch:
    """What the executor learned from the event stream."""

    pid: int
    phase: str = "exec"
    start: dict | None = None
    summary: dict | None = None
    end: dict | None = None
    maps_at_start: list[str] | None = None
    maps_at_summary: list[str] | None = None
    check: dict | None = None
    parse_error: str | None = None

    def handle(self, ev: events.Event) -> None:
        d = ev.data
        if ev.type == "start":
            self.start = d
            self.pid = int(d.get("pid", self.pid))
            self.maps_at_start = allocators.read_maps(self.pid)
            self.phase = "open"
        elif ev.type == "phase":
            self.phase = d.get("phase", self.phase) if d.get("state") == "begin" else self.phase
        elif ev.type == "summary":
            self.summary = d
            self.maps_at_summary = allocators.read_maps(self.pid)
            self.phase = "close"
        elif ev.type == "check":
            self.check = d
        elif ev.type == "end":
            self.end = d


def _target_setup(cpus: str):
    """preexec_fn of an in-process target: die with alloclab, run on the shape's CPU set."""
    cpu_set = parse_cpus(cpus) if cpus else None

    def setup():
        die_with_parent()
        if cpu_set:
            os.sched_setaffinity(0, cpu_set)
    return setup


def _kill(proc: subprocess.Popen) -> None:
    kill_group(proc.pid)


def _reap(proc: subprocess.Popen, grace_s: float = 30.0):
    """Wait for the child and return (exit code, rusage). Kills it if it does not exit."""
    deadline = time.monotonic() + grace_s
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, ru
        if time.monotonic() > deadline:
            _kill(proc)
            grace_s, deadline = 0, time.monotonic() + 10
        time.sleep(0.01)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def tpcc_rates(summary: dict) -> dict[str, float]:
    """NOPM as HammerDB counts it (from the database's d_next_o_id), the client's own count
    of committed New-Orders per minute, and TPM (committed plus rolled-back transactions)."""
    minutes = float(summary.get("duration_s") or 0) / 60
    wl = summary.get("workload") or {}
    if not minutes or wl.get("kind") != "tpcc":
        return {"nopm": 0.0, "client_nopm": 0.0, "tpm": 0.0}
    ops = summary.get("ops", {})
    no = ops.get("neword", {})
    committed_no = no.get("calls", 0) - no.get("errors", 0) - no.get("rollbacks", 0)
    done = sum(o.get("calls", 0) - o.get("errors", 0) for o in ops.values())
    return {"nopm": round(float(wl.get("nopm", 0.0)), 1), "client_nopm": round(committed_no / minutes, 1),
            "tpm": round(done / minutes, 1)}


def _profile_window(recorder: profiling.Recorder, on_event):
    """perf runs from the start of the measured phase to the summary (the window's end)."""
    def hook(ev: events.Event) -> None:
        if ev.type == "phase" and ev.data.get("phase") == "measure" and ev.data.get("state") == "begin":
            recorder.start()
        elif ev.type == "summary":
            recorder.stop()
        if on_event:
            on_event(ev)
    return hook


def instrumented(spec: RunSpec, run_dir: Path) -> profiling.Recorder | None:
    """The recorder of a profiled or call-counting run; None for a measured run."""
    return profiling.Recorder(run_dir / "perf.data", spec.purpose) if spec.purpose != "measure" else None


def recorded(recorder: profiling.Recorder | None, run_dir: Path, ops: int, window_s: float) -> dict:
    """What the recorder saw, as row fields; written beside the run: the folded stacks of a
    profile, calls.json of a calls run. perf.data (large) is removed. Calls per operation count
    the operations of the part of the window that perf recorded (at the window's mean rate)."""
    data = run_dir / "perf.data"
    if recorder is None or not data.exists():
        return {}
    if recorder.purpose == "calls":
        seen = ops * min(1.0, recorder.seconds / window_s) if window_s > 0 else 0
        calls = profiling.read_calls(data, recorder.seconds) | {"library": recorder.library, "ops": round(seen)}
        data.unlink()
        write_json(run_dir / "calls.json", calls)
        return {"alloc_calls_per_s": calls["total_per_s"],
                "alloc_calls_per_op": round(calls["total"] / seen, 3) if seen else None}
    by_event = profiling.read_stacks(data)
    data.unlink()
    cpu, switches = by_event.get("cpu-clock", []), by_event.get("context-switches", [])
    atomic_write(run_dir / "stacks.folded", profiling.folded(cpu))
    atomic_write(run_dir / "switches.folded", profiling.folded(switches))
    sh = profiling.shares(cpu)
    out = {"alloc_cs_pct": profiling.switch_share(switches)}
    if sh.samples:
        out |= {"alloc_cpu_self_pct": sh.self_pct, "alloc_cpu_total_pct": sh.total_pct,
                "alloc_cpu_kernel_pct": sh.kernel_pct}
    return out


def profile_note(spec: RunSpec, run_dir: Path, recorder: profiling.Recorder | None) -> dict | None:
    """run.json's account of the instrument: what was recorded, or why nothing was."""
    if recorder is None:
        return None
    why = profiling.unavailable() or recorder.error
    if spec.purpose == "calls":
        return {"recorded": (run_dir / "calls.json").exists(), "probes": [f for f, _ in profiling.CALL_PROBES],
                "seconds": round(recorder.seconds, 3), "absent_because": why}
    return {"recorded": (run_dir / "stacks.folded").exists(), "event": "cpu-clock", "frequency_hz":
            profiling.FREQ_HZ, "switches": "context-switches, every one", "absent_because": why}


def failed_row(spec: RunSpec, study: str, reason: str) -> RunRow:
    """A run that could not start (e.g. its data could not be loaded)."""
    c = spec.cell
    return RunRow(
        run_id=spec.run_id, index=spec.index, study=study, cell=c.key, engine=c.engine,
        allocator=spec.allocator.name, allocator_base=spec.allocator.base, allocator_verified=False,
        workload=c.workload, part=c.part, pattern=c.pattern, threads=c.threads, batch=c.batch,
        key_bytes=c.key_bytes, value_bytes=c.value_bytes, repeat=spec.repeat, seed=spec.seed, ops=0,
        duration_s=0.0, ops_per_s=0.0, p50_ns=0, p95_ns=0, p99_ns=0, p999_ns=0, max_ns=0, mean_ns=0, errors=0,
        retries=0, peak_rss_bytes=0, cpu_user_s=0, cpu_sys_s=0, ctx_voluntary=0, ctx_involuntary=0, minor_faults=0,
        major_faults=0, wall_s=0.0, status=STATUS_FAILED, reason=reason,
        started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), profile=c.profile,
        warehouses=c.warehouses, shape=c.shape, purpose=spec.purpose)


def _watch(proc: subprocess.Popen, r: int, raw, watch: Watch, timeline: sampler.Timeline, spec: RunSpec,
           on_event: Callable[[events.Event], None] | None, t0: float) -> str | None:
    """Read events until the target closes its channel, sampling it meanwhile. Kills it if it
    runs past its deadline or stops sending events; returns why, or None."""
    failure = None
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    buf = b""
    last_event = time.monotonic()
    try:
        while True:
            for _key, _mask in sel.select(max(0.0, timeline.due())):
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    return failure
                raw.write(chunk)
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    try:
                        ev = events.parse_line(line.decode(errors="replace"))
                    except AlloclabError as e:
                        watch.parse_error = watch.parse_error or str(e)
                        continue
                    last_event = time.monotonic()
                    watch.handle(ev)
                    if on_event:
                        on_event(ev)
            if timeline.due() <= 0:
                timeline.take(watch.pid, watch.phase)
            now = time.monotonic()
            if failure is None and now - t0 > spec.timeout_s:
                failure = f"ran past its deadline of {spec.timeout_s:g}s and was killed"
                _kill(proc)
            elif failure is None and now - last_event > spec.hang_timeout_s:
                failure = f"sent no event for {spec.hang_timeout_s:g}s (hung) and was killed"
                _kill(proc)
    finally:
        sel.close()


def execute(spec: RunSpec, run_dir: Path, scratch: Path, exe: Path, study: str,
            on_event: Callable[[events.Event], None] | None = None, sample_hz: float = 20.0,
            seed_data: Path | None = None) -> RunRow:
    """`seed_data`: a pristine database to start from (copied, never touched)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    db_path = scratch / spec.run_id
    shutil.rmtree(db_path, ignore_errors=True)
    if seed_data is not None:
        Datasets.copy_to(seed_data, db_path)
    else:
        db_path.mkdir(parents=True)
    env = spec.allocator.target_env(dict(os.environ))
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    r, w = os.pipe()
    log_path = run_dir / "driver.log"
    raw_path = run_dir / ".events.jsonl.partial"
    watch_cpu = noise.CpuWatch()
    recorder = instrumented(spec, run_dir)
    if recorder:
        on_event = _profile_window(recorder, on_event)
    t0 = time.monotonic()
    with open(log_path, "wb") as log, open(raw_path, "wb") as raw:
        try:
            proc = subprocess.Popen(driver.argv(exe, spec, db_path, w), env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=log, pass_fds=(w,), start_new_session=True,
                                    preexec_fn=_target_setup(spec.server_cpus))
        except OSError as e:
            os.close(r)
            os.close(w)
            raise AlloclabError(f"cannot start the driver {exe}: {e.strerror}", "rebuild it: ./setup.sh") from e
        os.close(w)
        watch = Watch(pid=proc.pid)
        if recorder:  # uprobes are placed when the window opens, after the maps are read
            recorder.pids = [proc.pid]
        timeline = sampler.Timeline(sample_hz)
        try:
            failure = _watch(proc, r, raw, watch, timeline, spec, on_event, t0)
        except BaseException:
            # Ctrl-C, a full disk, a bug: never leave the target running
            _kill(proc)
            _reap(proc)
            raise
        finally:
            os.close(r)
            if recorder:
                recorder.stop()
        exit_code, ru = _reap(proc)
    wall_s = time.monotonic() - t0
    run_noise = watch_cpu.stop()  # the driver was reaped: its CPU is alloclab's children time
    os.replace(raw_path, run_dir / "events.jsonl")
    shutil.rmtree(db_path, ignore_errors=True)

    # --- proof: the parent's own read of /proc/PID/maps; the driver's self-report only if
    # the process was gone before the parent could look
    files, proof_source = watch.maps_at_start, "parent read /proc/PID/maps at start"
    if files is None:
        files, proof_source = watch.maps_at_summary, "parent read /proc/PID/maps at summary"
    if files is None and watch.start and watch.start.get("mapped_files"):
        files, proof_source = watch.start["mapped_files"], "driver's own /proc/self/maps at start"
    proof = allocators.prove(spec.allocator, files, watch.pid)
    if spec.allocator.link:
        # mapped is not enough for a linked allocator: its calls must bind to it
        bound = driver.link_proof(exe, spec.allocator.base)
        proof = allocators.Proof(proof.verified and bound.verified,
                                 proof.reason if not proof.verified else bound.reason, proof.mapped)
        proof_source += "; LD_DEBUG=bindings of a short start of the same binary"

    summary = watch.summary or {}
    acc = account.own(summary.get("alloc_account"), spec.allocator.base)
    merged = events.merged_histogram(summary) if summary else None
    pct = events.percentiles_ns(merged)
    usage = summary.get("usage_window", {})
    # VmHWM, sampled and as the driver read it at the end; never ru_maxrss, which survives
    # exec and so can hold the RSS of the forked Python parent
    peak_rss = max(timeline.peak_hwm(), int(summary.get("vm_hwm_bytes") or 0))

    status, reason = STATUS_OK, ""
    if failure:
        status, reason = STATUS_FAILED, failure
    elif watch.parse_error:
        status, reason = STATUS_FAILED, watch.parse_error
    elif exit_code != 0 or not watch.end or watch.end.get("status") != "ok":
        err = (watch.end or {}).get("error") or _tail(log_path) or "no output"
        how = f"exited with code {exit_code}" if exit_code >= 0 else f"was killed by signal {-exit_code}"
        status, reason = STATUS_FAILED, f"driver {how}: {err}"
    elif not summary:
        status, reason = STATUS_FAILED, "the driver sent no summary"
    elif summary.get("total_errors", 0):
        status, reason = STATUS_FAILED, f"{summary['total_errors']} failed calls; first: {summary.get('first_error')}"
    elif spec.cell.workload == "tpcc" and not watch.check:
        status, reason = STATUS_FAILED, "the TPC-C consistency check did not run"
    elif watch.check and not watch.check.get("ok"):
        bad = [c for c in watch.check.get("conditions", []) if not c.get("ok")]
        status, reason = STATUS_FAILED, "consistency " + "; ".join(
            f"condition {c.get('id')} failed: {c.get('detail')}" for c in bad)
    if not proof.verified:
        reason = f"allocator not proved: {proof.reason}" + (f"; {reason}" if reason else "")
        if status == STATUS_OK:
            status = STATUS_INVALID

    c = spec.cell
    row = RunRow(
        run_id=spec.run_id, index=spec.index, study=study, cell=c.key, engine=c.engine,
        allocator=spec.allocator.name, allocator_base=spec.allocator.base, allocator_verified=proof.verified,
        workload=c.workload, part=c.part, pattern=c.pattern, threads=c.threads, batch=c.batch,
        key_bytes=c.key_bytes, value_bytes=c.value_bytes, repeat=spec.repeat, seed=spec.seed,
        ops=int(summary.get("total_ops", 0)), duration_s=round(float(summary.get("duration_s", 0.0)), 6),
        ops_per_s=round(float(summary.get("ops_per_s", 0.0)), 2),
        p50_ns=pct["p50_ns"], p95_ns=pct["p95_ns"], p99_ns=pct["p99_ns"], p999_ns=pct["p999_ns"],
        max_ns=pct["max_ns"], mean_ns=pct["mean_ns"],
        errors=int(summary.get("total_errors", 0)), retries=int(summary.get("total_retries", 0)),
        peak_rss_bytes=peak_rss,
        cpu_user_s=round(usage.get("cpu_user_s", 0.0), 4), cpu_sys_s=round(usage.get("cpu_sys_s", 0.0), 4),
        ctx_voluntary=int(usage.get("ctx_voluntary", 0)), ctx_involuntary=int(usage.get("ctx_involuntary", 0)),
        minor_faults=int(usage.get("minor_faults", 0)), major_faults=int(usage.get("major_faults", 0)),
        wall_s=round(wall_s, 3), status=status, reason=reason, started_at=started_at,
        other_busy_cores=round(run_noise.other_cores, 3), profile=c.profile, warehouses=c.warehouses, shape=c.shape,
        **tpcc_rates(summary), **account.row_fields(acc, summary.get("rss_bytes")),
        **recorded(recorder, run_dir, int(summary.get("total_ops", 0)), float(summary.get("duration_s", 0.0))),
        purpose=spec.purpose, tpcc_mode=c.tpcc_mode,
    )

    buf_csv = io.StringIO()
    wr = csv.writer(buf_csv, lineterminator="\n")
    wr.writerow(sampler.Sample.columns())
    for s in timeline.samples:
        wr.writerow(s.row())
    atomic_write(run_dir / "samples.csv", buf_csv.getvalue())
    write_json(run_dir / "run.json", {
        "spec": spec.to_json(),
        "row": row.to_csv(),
        "proof": proof.to_json() | {"source": proof_source, "pid": watch.pid},
        "exit_code": exit_code,
        "rusage_total": {"cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime,
                         "minor_faults": ru.ru_minflt, "major_faults": ru.ru_majflt,
                         "ctx_voluntary": ru.ru_nvcsw, "ctx_involuntary": ru.ru_nivcsw},
        "summary": {k: v for k, v in summary.items() if k != "ops"},
        "ops": {name: {k: v for k, v in op.items() if k != "hist"} for name, op in summary.get("ops", {}).items()},
        "driver_version": (watch.start or {}).get("driver_version"),
        "driver_binary": str(exe),
        "engine_version": (watch.start or {}).get("engine_version"),
        "samples": len(timeline.samples),
        "noise": run_noise.to_json(),
        "check": watch.check,
        "alloc_account": acc,
        "profile": profile_note(spec, run_dir, recorder),
        "seed_data": str(seed_data) if seed_data else None,
    })
    return row
