"""Interleaved slices: the measured runs of one cell in one round, up together, measured in turns.

A shared machine's speed drifts: measured here, a memory-bound loop on both cores of this
2-core guest slows by up to half for seconds at a time, every few tens of seconds, with
nothing else running in the guest. Runs that follow each other meet different speeds, and
that difference lands in the allocators' ratios (a TidesDB read cell: ±11 % from round to
round with 5 s windows back to back; the same machine trace cut into 0.5 s turns: ±2 %).

With slices (plan key `slice_s`), each allocator's driver of the cell opens its engine,
populates and warms up in turn, one at a time, and waits (the driver's `--gate`); then each
gets a slice of its window in a fresh order per cycle, drawn from the round's seed, until
every one has measured its duration. Each run stays a run: its own process, folder, events,
proof and row; its window is the sum of its slices, and nothing else runs while it measures.

Whenever a driver waits at its gate, the processes under test are stopped (SIGSTOP): the
driver itself with its embedded engine, or the server it drives. An engine's background work
(InnoDB's purge and page cleaner, an LSM's flushes and compactions) runs only in its own run's
turns, so writing workloads and TPC-C take turns as well as reads.
"""

from __future__ import annotations

import random
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from alloclab.answers import drift
from alloclab.core import gate
from alloclab.host import noise
from alloclab.host.processes import kill_group
from alloclab.plan import RunSpec, side_by_side_groups
from alloclab.results import turns as stored_turns
from alloclab.results.store import RunRow


class Group:
    """What the runs of one group share: their number, and the machine's noise over the whole group
    (the other drivers of the group are not "other processes")."""

    def __init__(self, size: int):
        self.size = size
        self.turns = 0  # turns given so far, every member's: a turn's place in the group's sequence
        self.watch = noise.CpuWatch()
        self.noise: noise.Noise | None = None
        self.reaped = threading.Barrier(size, action=self._measure_noise)

    def _measure_noise(self) -> None:
        self.noise = self.watch.stop()  # every driver of the group was reaped


class Member:
    """One run of an interleaved group: its driver's gate (stdin for commands, stdout for answers)."""

    def __init__(self, spec: RunSpec, group: Group):
        self.spec, self.group = spec, group
        self.proc: subprocess.Popen | None = None
        self.target = None  # the run's target.Target: what freezes while the driver waits
        self.attached = threading.Event()
        self.row: RunRow | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        # at the gate, waiting for its turn: silent, and not hung (the runner's hang rule applies
        # while it prepares or measures)
        self.waiting = False
        self.abandoned = False  # the group was given up (Ctrl-C, an error): a driver that starts now is killed
        # the place of each of its turns in the group's sequence (0, 1, ... over every member's
        # turns), in the order of its measured intervals: the host's drift between turns is read
        # from its neighbours (answers.drift)
        self.places: list[int] = []

    def attach(self, proc: subprocess.Popen, target) -> None:
        """Called by the run's target once its driver has started."""
        self.proc, self.target = proc, target
        self.attached.set()
        if self.abandoned:  # given up while it was starting: its runner stops what it started
            kill_group(proc.pid)

    def freeze(self) -> None:
        """Its driver waits at the gate: what is under test waits too (a server's processes stop)."""
        if self.target is not None:
            self.target.freeze()

    def thaw(self) -> None:
        if self.target is not None:
            self.target.thaw()

    def group_noise(self) -> noise.Noise | None:
        """Called by the runner once its driver was reaped: the noise over the group, when every
        run of the group got there (else None: the run's own watch)."""
        try:
            self.group.reaped.wait(timeout=60)
        except threading.BrokenBarrierError:
            return None
        return self.group.noise

    def start(self, run_one: Callable[[RunSpec, Member], RunRow]) -> None:
        def body():
            try:
                self.row = run_one(self.spec, self)
            except BaseException as e:  # handed to the coordinator, re-raised there
                self.error = e
                self.group.reaped.abort()
            finally:
                self.attached.set()
        self.thread = threading.Thread(target=body, name=f"run {self.spec.run_id}", daemon=True)
        self.thread.start()

    def wait_attached(self) -> bool:
        self.attached.wait()
        return self.proc is not None and self.proc.poll() is None

    def say(self, line: str) -> bool:
        self.waiting = False
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):  # it died: its own run says why
            return False

    def hear(self) -> str:
        """The driver's next answer, however long it takes; "" once it has ended (its runner kills
        a driver that hangs or runs past its deadline, and records why)."""
        line = self.proc.stdout.readline().decode(errors="replace").strip()
        self.waiting = line in gate.WAITING
        return line

    def end(self) -> None:
        if self.proc is not None:
            self.thaw()
            self.say(gate.END)
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        self.abandoned = True
        self.thaw()  # its runner stops the server cleanly
        if self.proc is not None and self.proc.poll() is None:
            kill_group(self.proc.pid)


def groups(todo: list[RunSpec]) -> list[list[RunSpec]]:
    """A round's runs as they execute: the measured runs of a cell with slices together (they
    are consecutive in a round), those side by side up to that many together, or the whole round's
    where it runs at once (plan.side_by_side_groups), every other run alone."""
    out: list[list[RunSpec]] = []
    i = 0
    while i < len(todo):
        s = todo[i]
        if s.side_by_side > 1:  # the round's stretch of runs side by side, in groups
            j = i
            while j < len(todo) and todo[j].side_by_side > 1 and todo[j].repeat == s.repeat:
                j += 1
            stretch = todo[i:j]
            out += [[stretch[k] for k in g]
                    for g in side_by_side_groups([r.cell.key for r in stretch], s.side_by_side, s.whole_round)]
            i = j
            continue
        prev = out[-1][-1] if out else None
        if (prev is not None and s.slice_s and prev.slice_s and prev.cell.key == s.cell.key
                and prev.repeat == s.repeat):
            out[-1].append(s)
        else:
            out.append([s])
        i += 1
    return out


def slices(duration_s: float, slice_s: float) -> tuple[int, int]:
    """(turns per run, milliseconds per turn): the window cut into turns of about slice_s."""
    n = max(1, round(duration_s / slice_s))
    return n, max(1, round(1000 * duration_s / n))


def run_group(specs: list[RunSpec], run_one: Callable[[RunSpec, Member], RunRow], seed: int) -> list[RunRow]:
    """Run `specs` (one cell, one round, the allocators in the round's order) interleaved;
    `run_one(spec, member)` is the one runner, called in a thread per run. Rows in spec order.
    A run whose driver dies, or whose workers all end, leaves the turns; its own runner records
    why (a driver told to end before its window is complete fails its run)."""
    group = Group(len(specs))
    members = [Member(s, group) for s in specs]
    first = specs[0]
    turns, ms = slices(first.cell.duration_s or 0.0, first.slice_s)
    try:
        taking: list[Member] = []
        for m in members:  # one at a time: populate and warm-up never share the machine
            m.start(run_one)
            if m.wait_attached() and m.hear() == gate.READY:
                m.freeze()
                taking.append(m)
        rng = random.Random(seed)
        for _ in range(turns):
            order = list(taking)
            rng.shuffle(order)
            for m in order:
                m.thaw()
                m.places.append(group.turns)
                group.turns += 1
                said = m.hear() if m.say(gate.go(ms, round(1000 * first.turn_warmup_s))) else ""
                if said in (gate.PAUSED, gate.FULL):
                    m.freeze()
                if said != gate.PAUSED:  # its window is measured ("full"), its workers ended, or it died
                    taking.remove(m)
        for m in members:
            m.end()
        for m in members:
            m.thread.join()
    except BaseException:
        for m in members:
            m.kill()
        for m in members:
            if m.thread is not None:
                m.thread.join(60)  # a run that was starting: its server is up and stopped again
        raise
    for m in members:
        if m.error is not None:
            raise m.error
    return [m.row for m in members]


def with_drift(rows: list[RunRow], dirs: list[Path]) -> list[RunRow]:
    """A group's rows with each measured run's drift factor (answers.drift), read from the turns
    its folder stored, with a knot of the host's speed every cycle of turns (one turn of each of
    the group's runs); rows as they were where any of its finished runs' turns cannot be read,
    or the group cannot be fitted: all of a group's runs are adjusted, or none."""
    ok = [(r, d) for r, d in zip(rows, dirs) if r.status == "ok" and r.purpose == "measure"]
    got = {r.run_id: t for r, d in ok if (t := stored_turns.of_run(d)) is not None}
    factors = drift.factors(got, knot=len(rows)) if len(got) == len(ok) else {}
    return [replace(r, drift_factor=round(factors[r.run_id], 6)) if r.run_id in factors else r for r in rows]


def run_side_by_side(specs: list[RunSpec], run_one: Callable[[RunSpec], RunRow],
                     stop_all: Callable[[], None]) -> list[RunRow]:
    """Run `specs` (one cell's or one round's) all at the same time, each by the one runner in a thread
    of its own (plan key side_by_side): runs whose question is their memory over a life, which
    then share the machine alike, as runs in turns share its drift. Rows in spec order. On
    Ctrl-C or an error, `stop_all` stops every process tree the runs started, and the runs'
    own runners record nothing more."""
    rows: list[RunRow | None] = [None] * len(specs)
    errors: list[BaseException] = []

    def body(i: int, spec: RunSpec) -> None:
        try:
            rows[i] = run_one(spec)
        except BaseException as e:  # handed to the coordinator, re-raised there
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i, s), name=f"run {s.run_id}", daemon=True)
               for i, s in enumerate(specs)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except BaseException:
        stop_all()
        for t in threads:
            t.join(60)
        raise
    if errors:
        stop_all()
        raise errors[0]
    return rows  # type: ignore[return-value]
