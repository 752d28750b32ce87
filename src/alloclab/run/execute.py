"""The one runner: any kind of run (kinds.py) started, its allocator proved, its processes
sampled, stopped and recorded as one row through one row builder. Never raises for a run that
went wrong: a broken run becomes a row with status `failed` or `invalid` and its reason."""

from __future__ import annotations

import csv
import io
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from alloclab.alloc import account, allocators, build, tuning
from alloclab.catalog.names import SYSBENCH
from alloclab.clients import sysbench
from alloclab.core import events
from alloclab.core.errors import AlloclabError
from alloclab.host import noise, sampler
from alloclab.plan import RunSpec, workload
from alloclab.results.store import CELL_FIELDS, RunRow, atomic_write, write_json
from alloclab.run import kinds, profiling

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_INVALID = "invalid"


@dataclass
class Watch:
    """What the runner learned from the driver's events (none from the real sysbench)."""

    pid: int = 0
    under_test: bool = False  # the driver is the process under test: its maps are the proof
    phase: str = "exec"
    start: dict | None = None
    summary: dict | None = None
    end: dict | None = None
    maps_at_start: list[str] | None = None
    maps_at_summary: list[str] | None = None
    check: dict | None = None
    parse_error: str | None = None
    measure_begun: bool = False
    measure_ended: bool = False

    def handle(self, ev: events.Event) -> None:
        d = ev.data
        if ev.type == "start":
            self.start = d
            self.pid = int(d.get("pid", self.pid))
            if self.under_test:
                self.maps_at_start = allocators.read_maps(self.pid)
            self.phase = "open"
        elif ev.type == "phase":
            if d.get("state") == "begin":
                self.phase = d.get("phase", self.phase)
            if d.get("phase") == "measure":
                self.measure_begun = True
                self.measure_ended = self.measure_ended or d.get("state") == "end"
        elif ev.type == "summary":
            self.summary = d
            if self.under_test:
                self.maps_at_summary = allocators.read_maps(self.pid)
            self.phase = "close"
        elif ev.type == "check":
            self.check = d
        elif ev.type == "end":
            self.end = d

    def feed(self, lines: list[str], on_event: Callable[[events.Event], None] | None) -> None:
        """Handle new event lines; a line that does not parse is remembered, not raised."""
        for line in lines:
            try:
                ev = events.parse_line(line)
            except AlloclabError as e:
                self.parse_error = self.parse_error or str(e)
                continue
            self.handle(ev)
            if on_event:
                on_event(ev)


class Tail:
    """New lines of a growing events file, read as they come."""

    def __init__(self, path: Path):
        self.path, self.offset, self.buf = path, 0, b""

    def lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        self.offset += len(chunk)
        self.buf += chunk
        *done, self.buf = self.buf.split(b"\n")
        return [x.decode(errors="replace") for x in done]


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


def instrumented(spec: RunSpec, run_dir: Path) -> profiling.Recorder | None:
    """The recorder of a profiled or call-counting run; None for a measured run."""
    return profiling.Recorder(run_dir / "perf.data", spec.purpose) if spec.purpose in ("profile", "calls") else None


def recorded(recorder: profiling.Recorder | None, run_dir: Path, ops: int, window_s: float) -> dict:
    """What the recorder saw, as row fields; written beside the run: the folded stacks of a
    profile, calls.json of a calls run. perf.data (large) is removed. Calls per operation count
    the operations of the part of the window that perf recorded (at the window's mean rate)."""
    data = run_dir / "perf.data"
    if recorder is None or not data.exists():
        return {}
    if recorder.purpose == "calls":
        calls = profiling.read_calls(data, recorder.seconds)
        seen = ops * min(1.0, calls["seconds"] / window_s) if window_s > 0 else 0
        calls |= {"library": recorder.library, "ops": round(seen)}
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


def measures(summary: dict | None, result: sysbench.Result | None = None, kind: kinds.RunKind | None = None) -> dict:
    """The client-side numbers of a row: from the driver's summary (with what only the run's
    kind reads from it: TPC-C's rates), or from the real sysbench; none (the row builder's
    zeros) when the client left neither."""
    if summary:
        pct = events.percentiles_ns(events.merged_histogram(summary))
        return {"ops": int(summary.get("total_ops", 0)), "duration_s": round(float(summary.get("duration_s", 0)), 6),
                "ops_per_s": round(float(summary.get("ops_per_s", 0)), 2), **pct,
                "errors": int(summary.get("total_errors", 0)), "retries": int(summary.get("total_retries", 0)),
                **(kind.summary_fields(summary) if kind else {})}
    if result is None:
        return {}
    lat = result.latency_ms

    def ns(key):  # what sysbench did not print stays empty
        return lat[key] * 1e6 if key in lat else None
    return {"ops": result.transactions, "duration_s": result.total_time_s, "ops_per_s": result.tps,
            "p50_ns": ns("p50"), "p95_ns": ns("p95"), "p99_ns": lat.get("p99", 0) * 1e6, "p999_ns": ns("p99.9"),
            "max_ns": lat.get("max", 0) * 1e6, "mean_ns": lat.get("avg", 0) * 1e6, "errors": 0,
            # sysbench's "ignored errors" (deadlocks and the like) are retried by sysbench: recorded, not fatal
            "retries": result.errors}


USAGE = ("cpu_user_s", "cpu_sys_s", "ctx_voluntary", "ctx_involuntary", "minor_faults", "major_faults")


def build_row(spec: RunSpec, study: str, *, status: str, reason: str, verified: bool = False,
              fields: dict | None = None, started_at: str | None = None) -> RunRow:
    """The one row builder: what every run has from its spec, plus what it measured."""
    c = spec.cell
    base = {"ops": 0, "duration_s": 0.0, "ops_per_s": 0.0, "p50_ns": 0, "p95_ns": 0, "p99_ns": 0, "p999_ns": 0,
            "max_ns": 0, "mean_ns": 0, "errors": 0, "retries": 0, "peak_rss_bytes": 0, "wall_s": 0.0,
            **dict.fromkeys(USAGE, 0)}
    # the cell's fields (the one list), as the run's kind records them (a server's TPC-C has no key sizes),
    # and those of its workload's own that tell its cells apart
    cell = ({f: getattr(c, f) for f in CELL_FIELDS} | kinds.of(c).row_fields(spec)
            | workload.of(c.workload).row_own(c))
    return RunRow.of(
        run_id=spec.run_id, index=spec.index, study=study, cell=c.key, allocator=spec.allocator.name,
        allocator_base=spec.allocator.base, allocator_verified=verified, allocator_version=spec.allocator.version,
        allocator_source=spec.allocator.source, repeat=spec.repeat, seed=spec.seed, status=status, reason=reason,
        started_at=started_at or datetime.now(timezone.utc).isoformat(timespec="seconds"), purpose=spec.purpose,
        **(cell | base | (fields or {})))


def failed_row(spec: RunSpec, study: str, reason: str) -> RunRow:
    """A run that could not start (e.g. its data could not be prepared)."""
    return build_row(spec, study, status=STATUS_FAILED, reason=reason)


# Of the calls in the measured window, the share that may give up after the last retry of a
# conflict before the run fails: contention an optimistic engine meets now and then (as HammerDB
# and sysbench count a deadlock and go on), not a livelock.
GAVE_UP_SHARE = 0.01


def failed_calls(summary: dict, tpcc: bool) -> str | None:
    """Why the calls fail the run, or None: any error that is not a conflict, or more conflicts
    given up than `GAVE_UP_SHARE` of the calls."""
    errors, gave_up = int(summary.get("total_errors", 0)), int(summary.get("total_gave_up", 0))
    if tpcc and "total_calls" in summary and int(summary["total_calls"]) == 0:
        # a NOPM of 0 is no measurement: every virtual user waited out the window in one call
        return (f"no transaction completed in the {float(summary.get('duration_s') or 0):.1f} s window: every "
                "virtual user waited in one call the whole window (a stall, or a deadlock retried each time "
                "its lock wait timed out)")
    calls = int(summary.get("total_calls", 0)) or 1
    if errors == 0 or (errors == gave_up and gave_up <= GAVE_UP_SHARE * calls):
        return None
    what = "transactions" if tpcc else "calls"
    also = f" ({gave_up} gave up after their retries, more than {GAVE_UP_SHARE:.0%})" if errors == gave_up else ""
    return f"{errors} failed {what}{also}; first: {summary.get('first_error')}"


def driver_outcome(watch: Watch, exit_code: int | None, log: Path, tpcc: bool, who: str) -> str | None:
    """Why a run driven by the driver failed, from its events and exit, or None. The TPC-C
    consistency verdict lives here, once."""
    if watch.parse_error:
        return watch.parse_error
    summary = watch.summary
    if exit_code != 0 or not watch.end or watch.end.get("status") != "ok":
        err = (watch.end or {}).get("error") or _tail(log) or "no output"
        how = (f"exited with code {exit_code}" if exit_code is None or exit_code >= 0
               else f"was killed by signal {-exit_code}")
        return f"{who} {how}: {err}"
    if not summary:
        return f"the {who} sent no summary"
    if failed := failed_calls(summary, tpcc):
        return failed
    if tpcc and not watch.check:
        return "the TPC-C consistency check did not run"
    if watch.check and not watch.check.get("ok"):
        bad = [c for c in watch.check.get("conditions", []) if not c.get("ok")]
        return "consistency " + "; ".join(f"condition {c.get('id')} failed: {c.get('detail')}" for c in bad)
    return None


def _window_delta(tl: sampler.Timeline):
    """A counter's growth over the samples of the measured window (all samples if none is
    marked so): CPU and context switches of the same span as the client's count."""
    inside = [x for x in tl.samples if x.phase == "measure"] or tl.samples
    first, last = (inside[0], inside[-1]) if inside else (None, None)

    def delta(attr):
        return getattr(last, attr) - getattr(first, attr) if first else 0
    return delta


def _samples_csv(tl: sampler.Timeline) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(sampler.Sample.columns())
    w.writerows(s.row() for s in tl.samples)
    return buf.getvalue()


def run(spec: RunSpec, run_dir: Path, node, data: Path | None, on_event: Callable[[events.Event], None] | None = None,
        sample_hz: float = 20.0, kind: kinds.RunKind | None = None, gate=None) -> RunRow:
    """Execute one run of any kind into `run_dir`, from `data` (the kind's prepared data, copied,
    never touched). `node` gives the driver (`exe`), the scratch folder and the study's name;
    `gate` (an interleave.Member) makes the run measure in the turns it is given."""
    kind = kind or kinds.of(spec.cell)
    run_dir.mkdir(parents=True, exist_ok=True)
    partial = run_dir / ".events.jsonl.partial"
    partial.unlink(missing_ok=True)
    target = kind.target(spec, run_dir, node, data, partial)
    if gate is not None:
        target.gate = gate
    watch = Watch(under_test=not target.separate_client)
    tail = Tail(partial)
    tl, client_tl = sampler.Timeline(sample_hz), sampler.Timeline(sample_hz)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    cpu_watch = noise.CpuWatch()
    recorder = instrumented(spec, run_dir)
    failure, acc, rss_at_end, account_read = None, None, None, False
    deadline = spec.timeout_s * (gate.group.size if gate is not None else 1)  # in turns: the group's
    t0 = time.monotonic()
    try:
        target.start()
        t_client = time.monotonic()
        log = run_dir / target.log_name
        last_size, last_growth, prepared = -1, time.monotonic(), False
        while target.client.poll() is None:
            time.sleep(max(0.0, min(tl.due(), client_tl.due() if target.separate_client else 1.0, 0.05)))
            watch.feed(tail.lines(), on_event)
            now = time.monotonic()
            begun, ended = kind.window(spec, watch, now - t_client)
            # sysbench counts transactions over its whole run, the driver over its window
            phase = (watch.phase if not target.separate_client else "measure" if not kind.driver_client or (
                begun and not ended) else "rampup" if not begun else "after")
            pids = target.under_test()
            # in turns, a stopped run is sampled once a second: the samplers of a group's waiting
            # runs would otherwise take the CPU of the one that measures
            resting = bool(target.frozen)
            if tl.due() <= 0 and pids:
                tl.take_tree(pids, phase)
            if target.separate_client and client_tl.due() <= 0:
                client_tl.take(target.client.pid, phase)
            if gate is not None:
                tl.pace(resting)
                client_tl.pace(resting)
            if recorder and not prepared and target.settled(watch):
                recorder.pids, prepared = pids, True
                recorder.prepare()  # a calls run's uprobes are placed before its window opens
            if recorder and begun and recorder.proc is None and not (recorder.window and recorder.window[1]):
                recorder.pids = pids or recorder.pids  # PostgreSQL's backends, forked later, inherit it
                recorder.start()
            if ended and not account_read and target.separate_client:  # first: stopping perf takes a while
                acc, rss_at_end = target.account(watch, tl)
                account_read = True
            if recorder and ended and kind.driver_client and (target.separate_client or watch.summary):
                recorder.stop()  # sysbench's window ends with it: perf stops when it exits
            target.proving(watch, now - t0)
            # the client reports every second (the driver's interval events, sysbench's
            # --report-interval): output that stops growing means a hang
            size = sum(p.stat().st_size for p in (log, partial) if p.exists())
            if size != last_size or (gate is not None and gate.waiting):  # its turn is not hung
                last_size, last_growth = size, now
            if failure is None:
                failure = target.failure()
            if failure is None and now - t0 > deadline:
                failure = f"ran past its deadline of {deadline:g}s and was killed"
            elif failure is None and now - last_growth > spec.hang_timeout_s:
                failure = f"{target.client_name} sent no event for {spec.hang_timeout_s:g}s (hung) and was killed"
            if failure is not None:
                target.kill()
        # the client is reaped: its PID may already be another process's, so what came after
        # the last look is read without reading that PID's maps (the proof falls back to the
        # driver's own report)
        watch.under_test = False
        watch.feed(tail.lines(), on_event)
        if not account_read:  # a client that ended before its window's end was seen
            acc, rss_at_end = target.account(watch, tl)
    except AlloclabError as e:
        failure = failure or str(e)
    except BaseException:
        # Ctrl-C, a full disk, a bug: never leave anything running
        target.kill()
        raise
    finally:
        if recorder:
            recorder.stop()
        if target.client is not None and target.client.poll() is None:
            target.kill()
        exit_code = target.client.wait() if target.client is not None else None
        unclean = target.stop()
    wall_s = time.monotonic() - t0
    # everything was reaped: its CPU is alloclab's children time (in turns: the whole group's)
    run_noise = (gate.group_noise() if gate is not None else None) or cpu_watch.stop()
    if partial.exists():
        os.replace(partial, run_dir / "events.jsonl")

    result = None
    if failure is None and kind.driver_client:
        if not getattr(target, "driver_killed", False):  # the driver itself killed for memory: an outcome
            failure = driver_outcome(watch, exit_code, run_dir / target.log_name, kind.tpcc, target.client_name)
    elif failure is None:
        text = (run_dir / target.log_name).read_text(errors="replace")
        try:
            result = sysbench.parse(text)
        except AlloclabError as e:
            failure = f"sysbench failed (exit {exit_code}): {e}; {text.strip()[-200:]}"
        if failure is None and exit_code != 0:
            failure = f"sysbench exited with code {exit_code}"
    if failure is None and unclean:
        failure = unclean
    said = tuning.complaints(target.own_log_text())
    if said:  # in the allocator's own words: the run measured an allocator not tuned as named
        failure = f"{spec.allocator.base} rejected its tuning: {'; '.join(said[:3])}" + (
            f" (and then: {failure})" if failure else "")
    verified, why, proof_json = target.proof(watch)
    if verified:
        build.remember_proof(spec.allocator.base, spec.cell.engine, str(proof_json.get("reason") or why))
    status, reason = (STATUS_FAILED, failure) if failure else (STATUS_OK, "")
    if not verified:
        reason = f"allocator not proved: {why}" + (f"; {reason}" if reason else "")
        status = STATUS_INVALID if status == STATUS_OK else status

    summary = watch.summary or {}
    if target.separate_client:  # the server's tree over the window; the client apart
        delta, client_delta = _window_delta(tl), _window_delta(client_tl)
        usage = {k: (round(delta(k), 3) if k.startswith("cpu") else delta(k)) for k in USAGE}
        window = summary.get("usage_window") or {}
        client_cpu = ({"client_cpu_user_s": round(window.get("cpu_user_s", 0.0), 3),
                       "client_cpu_sys_s": round(window.get("cpu_sys_s", 0.0), 3)} if window else
                      {"client_cpu_user_s": round(client_delta("cpu_user_s"), 3),
                       "client_cpu_sys_s": round(client_delta("cpu_sys_s"), 3)} if client_tl.samples else {})
    else:  # the driver's own account of its window
        window = summary.get("usage_window", {})
        usage = {k: (round(window.get(k, 0.0), 4) if k.startswith("cpu") else int(window.get(k, 0))) for k in USAGE}
        client_cpu = {}
    m = measures(watch.summary if kind.driver_client else None, result, kind)
    # VmHWM as sampled and as the driver read it at the end; never ru_maxrss, which survives
    # exec and so can hold the RSS of the forked Python parent
    peak = max(tl.peak_rss(), tl.peak_hwm(), 0 if target.separate_client else int(summary.get("vm_hwm_bytes") or 0))
    atomic_write(run_dir / "samples.csv", _samples_csv(tl))
    own, own_json = kind.outcome(target, watch, tl, run_dir)  # from what was stored (a life's memory)
    row = build_row(spec, node.study, status=status, reason=reason, verified=verified, started_at=started_at, fields={
        **m, **usage, **client_cpu, "peak_rss_bytes": peak, "wall_s": round(wall_s, 3),
        "other_busy_cores": round(run_noise.other_cores, 3), **account.row_fields(acc, rss_at_end),
        **recorded(recorder, run_dir, m.get("ops", 0), m.get("duration_s", 0.0)), **own})

    if target.separate_client:
        atomic_write(run_dir / "client_samples.csv", _samples_csv(client_tl))
    write_json(run_dir / "run.json", {
        "spec": spec.to_json(), "row": row.to_csv(), "kind": kind.name, "proof": proof_json, "exit_code": exit_code,
        "summary": {k: v for k, v in summary.items() if k != "ops"} or None,
        "ops": {name: {k: v for k, v in op.items() if k != "hist"} for name, op in summary.get("ops", {}).items()},
        "driver_version": (watch.start or {}).get("driver_version"),
        "engine_version": (watch.start or {}).get("engine_version"),
        "samples": len(tl.samples), "noise": run_noise.to_json(), "check": watch.check, "alloc_account": acc,
        "profile": profile_note(spec, run_dir, recorder), SYSBENCH: result.__dict__ if result else None,
        # in turns: how often its processes under test were stopped while its client waited
        **({"frozen_while_waiting": target.freezes} if gate is not None else {}),
        # in turns: each measured interval's place in the group's sequence of turns
        **({"turn_places": list(gate.places)} if gate is not None else {}),
        **target.run_json(), **({"alloc_account_missing": None} if acc else {}), **own_json})
    return row

