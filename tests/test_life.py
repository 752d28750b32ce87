"""Memory over a server's life (answers.life): settled RSS and its creep, what a burst gives back,
overheads over the engine's and the allocator's accounts, OOM kills from a cgroup's counter,
and a planted creep (driver/creep/creep.c) found in a real process."""

import csv
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from alloclab.answers import life
from alloclab.core.errors import AlloclabError
from alloclab.host import sampler

ROOT = Path(__file__).resolve().parents[1]
MIB = life.MIB
HZ = 20.0


def shape(pieces, hz=HZ):
    """A 20 Hz timeline from (t_from_s, t_to_s, rss_at(t)) pieces."""
    out = []
    for t_from, t_to, rss_at in pieces:
        n = round((t_to - t_from) * hz)
        out += [(round(t_from + i / hz, 4), int(rss_at(t_from + i / hz))) for i in range(n)]
    return out


def write_samples(run_dir: Path, timeline) -> None:
    """A samples.csv as the runner writes it (sampler.Sample's columns)."""
    run_dir.mkdir(parents=True)
    with open(run_dir / "samples.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(sampler.Sample.columns())
        for t, rss in timeline:
            w.writerow(sampler.Sample(t, "life", rss, rss, 0.0, 0.0, 0, 0, 0, 0, 4).row())


# three cycles: steady 10 s, burst 5 s, idle 20 s
LIFE = life.phases([(c, name, kind, 35 * (c - 1) + a, 35 * (c - 1) + b)
                    for c in (1, 2, 3) for name, kind, a, b in
                    (("oltp", "steady", 0, 10), ("dump", "burst", 10, 15), ("rest", "idle", 15, 35))])


def known_shape():
    """Cycle 1 gives back 60 % of a 100 MiB burst, linearly at 6 MiB/s from 200 MiB; cycle 2 keeps
    all of its burst; cycle 3's burst takes nothing."""
    return shape([
        (0, 10, lambda t: 100 * MIB),
        (10, 15, lambda t: (100 + 20 * (t - 10)) * MIB),   # to 200 MiB at t = 15 (peak 198 sampled)
        (15, 15.05, lambda t: 200 * MIB),
        (15.05, 25, lambda t: (200 - 6 * (t - 15)) * MIB),
        (25, 35, lambda t: 140 * MIB),
        (35, 45, lambda t: 140 * MIB),
        (45, 50, lambda t: 240 * MIB),
        (50, 70, lambda t: 240 * MIB),
        (70, 105, lambda t: 240 * MIB),
    ])


def test_given_back_on_a_stored_timeline_of_known_shape(tmp_path):
    run_dir = tmp_path / "runs" / "0001-life"
    write_samples(run_dir, known_shape())
    tl = life.read_rss(run_dir)
    assert len(tl) == 105 * HZ and tl[0] == (0.0, 100 * MIB)

    first, second, third = life.given_back(tl, LIFE)
    assert (first.cycle, first.burst) == (1, "dump")
    assert first.before_bytes == 100 * MIB and first.peak_bytes == 200 * MIB  # before: steady's median
    assert first.excess_bytes == 100 * MIB and first.after_bytes == 140 * MIB
    assert first.share == pytest.approx(0.6) and first.warmup and "warming up" in first.note
    # 150 MiB is reached 50/6 s after the idle phase starts; the first sample at or below it
    assert first.half_s == pytest.approx(50 / 6, abs=1 / HZ)

    assert second.before_bytes == 140 * MIB and second.excess_bytes == 100 * MIB  # before: cycle 1's idle end
    assert second.share == 0 and second.half_s is None and "never" in second.note and not second.warmup

    assert third.excess_bytes == 0 and third.share is None and third.half_s is None
    assert "nothing to give back" in third.note


def test_given_back_with_no_idle_after_the_burst():
    phases = life.phases([(1, "oltp", "steady", 0, 10), (1, "dump", "burst", 10, 15)])
    tl = shape([(0, 10, lambda t: 100 * MIB), (10, 15, lambda t: 180 * MIB)])
    (only,) = life.given_back(tl, phases)
    assert only.excess_bytes == 80 * MIB and only.share is None and "no idle" in only.note


def test_settled_rss_is_the_median_of_the_idle_phase_tail():
    idle = life.Phase(1, "rest", "idle", 10, 20)
    # a single jump in the last 2 s does not move the median; the level before the tail is ignored
    tl = [(t / 10, (500 if t < 180 else 300) * MIB) for t in range(100, 201)]
    tl[90] = (19.0, 900 * MIB)
    assert life.settled_rss(tl, idle) == 300 * MIB
    assert life.settled_rss([(11.0, 7 * MIB)], idle) == 7 * MIB  # nothing in the tail: the last sample
    assert life.settled_rss([(30.0, 7 * MIB)], idle) is None
    with pytest.raises(AlloclabError, match="idle"):
        life.settled_rss(tl, life.Phase(1, "oltp", "steady", 0, 10))


def creeping_life(cycles, mib_per_cycle, noise_mib, seed):
    """A timeline whose idle ends step by `mib_per_cycle` plus Gaussian noise, its phases."""
    rng = random.Random(seed)
    phases, pieces = [], []
    for c in range(1, cycles + 1):
        t0 = 10.0 * (c - 1)
        level = (300 + mib_per_cycle * c + rng.gauss(0, noise_mib)) * MIB
        phases += [(c, "oltp", "steady", t0, t0 + 4), (c, "sort", "burst", t0 + 4, t0 + 6),
                   (c, "rest", "idle", t0 + 6, t0 + 10)]
        pieces += [(t0, t0 + 4, lambda t, v=level: v + 20 * MIB), (t0 + 4, t0 + 6, lambda t, v=level: v + 90 * MIB),
                   (t0 + 6, t0 + 10, lambda t, v=level: v)]
    return shape(pieces), life.phases(phases)


def test_creep_slope_has_its_true_value_inside_the_interval():
    tl, phases = creeping_life(cycles=8, mib_per_cycle=7.5, noise_mib=2.0, seed=36)
    measured = life.measure(tl, phases)
    c = measured.creep
    assert c.cycles == 7 and c.confidence == 0.95 and c.contains(7.5)  # from cycle 2 on: once warm
    assert c.ci_high_mib_per_cycle - c.ci_low_mib_per_cycle < 3.0
    assert [s[0] for s in measured.settled] == list(range(1, 9))
    assert measured.to_json()["creep"]["slope_mib_per_cycle"] == pytest.approx(c.slope_mib_per_cycle)


def test_creep_interval_covers_the_truth_about_95_times_in_100():
    rng = random.Random(7)
    hits = 0
    for _ in range(400):
        points = [(c, (250 + 3 * c + rng.gauss(0, 5)) * MIB) for c in range(1, 6)]
        hits += life.creep(points).contains(3.0)
    assert 0.91 <= hits / 400 <= 0.99


def test_creep_is_read_once_warm():
    """A first cycle that fills the engine's caches is warm-up, not creep: PostgreSQL's pool under
    glibc settled at 25 MiB after cycle 1 and near 46 MiB after each of the next seven."""
    pg = [25.3, 46.0, 45.7, 46.1, 45.9, 46.2, 46.4, 46.2]
    tl, phases = creeping_life(cycles=8, mib_per_cycle=0, noise_mib=0, seed=1)
    stepped = [(t, v + ((pg[min(int(t // 10), 7)] - 300) * MIB)) for t, v in tl]
    c = life.measure(stepped, phases).creep
    assert c.cycles == 7 and abs(c.slope_mib_per_cycle) < 0.15 and c.contains(0.0)
    assert life.creep([(i + 1, v * MIB) for i, v in enumerate(pg)]).slope_mib_per_cycle > 1.5  # all eight: not 0
    # too few warm cycles for a slope (a life killed in cycle 2): all of them
    assert life.warm([(1, 1), (2, 2)]) == [(1, 1), (2, 2)]
    assert life.warm([(1, None), (2, 5), (3, 6), (4, 7)]) == [(3, 6), (4, 7)]


def test_creep_with_two_cycles_or_fewer():
    two = life.creep([(1, 100 * MIB), (2, 104 * MIB)])
    assert two.slope_mib_per_cycle == pytest.approx(4.0)
    assert two.ci_low_mib_per_cycle is None and "interval is not" in two.note and not two.contains(4.0)
    one = life.creep([(1, 100 * MIB), (2, None)])
    assert one.slope_mib_per_cycle is None and one.cycles == 1
    flat = life.creep([(c, 100 * MIB) for c in range(1, 5)])
    assert flat.slope_mib_per_cycle == 0 and flat.contains(0.0)


def test_overheads_at_the_idle_ends():
    tl, phases = creeping_life(cycles=4, mib_per_cycle=5, noise_mib=0, seed=1)
    # the engine accounts a flat 250 MiB, polled once every 3 s; the allocator keeps 2 MiB more each cycle
    engine = [(float(t), 250 * MIB) for t in range(0, 40, 3)]
    account = [(t, 200 * MIB, (210 + 2 * (t // 10 + 1)) * MIB) for t in (x + 0.5 for x in range(40))]
    ends = life.idle_ends(tl, phases, engine, account)
    assert [e.cycle for e in ends] == [1, 2, 3, 4]
    assert [e.over_engine_bytes / MIB for e in ends] == [55, 60, 65, 70]
    assert [e.alloc_kept_bytes / MIB for e in ends] == [12, 14, 16, 18]
    o = life.overhead(ends)
    assert o.over_engine_median_bytes == 62.5 * MIB and o.over_engine_creep.slope_mib_per_cycle == pytest.approx(5)
    assert o.alloc_kept_creep.slope_mib_per_cycle == pytest.approx(2)
    bare = life.measure(tl, phases).ends[0]
    assert bare.engine_bytes is None and bare.over_engine_bytes is None and bare.alloc_kept_bytes is None


CGROUP_V2_EVENTS = "low 0\nhigh 0\nmax 1183\noom 3\noom_kill 2\noom_group_kill 0\n"
CGROUP_V1_OOM_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"


def test_oom_counter_parsed_from_cgroup_v1_and_v2():
    assert life.oom_kills(CGROUP_V2_EVENTS) == 2
    assert life.oom_kills(CGROUP_V1_OOM_CONTROL) == 1
    with pytest.raises(AlloclabError, match="no 'oom_kill N' line"):
        life.oom_kills("oom_kill_disable 0\nunder_oom 0\n")  # v1 before Linux 4.13
    with pytest.raises(AlloclabError, match="not 'oom_kill N'"):
        life.oom_kills("oom_kill many\n")


def test_oom_counter_of_this_machine_parses():
    here = [p for p in (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control"))
            if p.is_file()]
    for p in here:
        assert life.oom_kills(p.read_text()) >= 0


def test_oom_kill_placed_at_its_cycle_and_phase():
    readings = [(t / 2, 0 if t / 2 < 47.2 else 1) for t in range(0, 140)]
    oom = life.oom_outcome(readings, LIFE)
    assert oom.killed and oom.kills == 1 and (oom.cycle, oom.phase, oom.phase_kind) == (2, "dump", "burst")
    assert oom.t_before_s == 47.0 and oom.t_seen_s == 47.5
    # the counter started at 3 (the cgroup's earlier runs) and never moved
    assert life.oom_outcome([(0.0, 3), (50.0, 3), (104.0, 3)], LIFE) == life.Oom(False, 0)
    # read once more after the life ended: placed where it was last seen alive
    late = life.oom_outcome([(0.0, 0), (52.0, 0), (200.0, 1)], LIFE)
    assert late.killed and (late.cycle, late.phase) == (2, "rest")
    with pytest.raises(AlloclabError, match="went down"):
        life.oom_outcome([(0.0, 2), (1.0, 0)], LIFE)
    with pytest.raises(AlloclabError, match="no reading"):
        life.oom_outcome([], LIFE)
    killed = life.measure(known_shape()[: 48 * 20], LIFE, oom_readings=readings)
    assert killed.oom.cycle == 2 and killed.settled[1][2] is None and "cycle 2" in killed.notes[0]


def test_phases_are_checked():
    with pytest.raises(AlloclabError, match="kind 'nap'"):
        life.phases([(1, "x", "nap", 0, 1)])
    with pytest.raises(AlloclabError, match="not after its start"):
        life.phases([(1, "x", "idle", 2, 1)])
    with pytest.raises(AlloclabError, match="time order"):
        life.phases([(1, "a", "steady", 0, 5), (1, "b", "idle", 4, 8)])
    with pytest.raises(AlloclabError, match="time order"):
        life.given_back([(1.0, 1), (0.0, 1)], LIFE)


def test_read_rss_of_a_fixture_run():
    run_dir = next(p for p in sorted((ROOT / "tests/fixtures/study-v1/runs").iterdir()) if p.is_dir())
    tl = life.read_rss(run_dir)
    with open(run_dir / "samples.csv") as f:
        assert len(tl) == sum(1 for _ in f) - 1
    assert all(isinstance(v, int) and v > 0 for _, v in tl)
    with pytest.raises(AlloclabError, match="does not exist"):
        life.read_rss(run_dir / "nowhere")




def vm_rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def test_planted_creep_found_in_a_real_process(creep_shim):
    period_s, kib, cycles = 0.5, 1024, 6
    env = {**os.environ, "LD_PRELOAD": str(creep_shim), "ALLOCLAB_CREEP_KIB": str(kib),
           "ALLOCLAB_CREEP_PERIOD_S": str(period_s)}
    t0 = time.monotonic()
    proc = subprocess.Popen(["sleep", "30"], env=env)
    tl = []
    try:
        while (t := time.monotonic() - t0) < (cycles + 0.6) * period_s:
            rss = vm_rss_bytes(proc.pid)
            assert rss is not None and proc.poll() is None, "the preloaded process ended"
            tl.append((t, rss))
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    # cycle k: an idle phase from (k - 0.5) to (k + 0.5) periods; its settled tail lies between the
    # k-th keeping (at k periods) and the next one, with 0.3 of a period to spare for a late thread
    phases = [(k, "idle", "idle", (k - 0.5) * period_s, (k + 0.5) * period_s) for k in range(1, cycles + 1)]
    measured = life.measure(tl, phases)
    c = measured.creep
    assert c.cycles == cycles - 1, measured.notes  # once warm: from cycle 2 on
    planted = kib / 1024
    # the blocks fill whole pages, so the fit can be exact; allow for the rounding of an exact fit
    assert c.ci_low_mib_per_cycle - 1e-9 <= planted <= c.ci_high_mib_per_cycle + 1e-9, c


def test_creep_shim_refuses_to_run_without_a_rate(creep_shim):
    env = {**os.environ, "LD_PRELOAD": str(creep_shim)}
    env.pop("ALLOCLAB_CREEP_KIB", None)
    done = subprocess.run(["true"], env=env, capture_output=True, text=True)
    assert done.returncode == 97 and "ALLOCLAB_CREEP_KIB" in done.stderr


def test_a_storm_connection_lost_while_connecting_connects_again_once(tmp_path):
    """Under 29 other lives, MariaDB once dropped 1 of a storm's 60 connections while it was still
    authenticating (ERROR 2013, EPIPE): that connection never ran its query, so it connects again,
    once; a connection that failed in its query still fails the burst."""
    import subprocess

    from alloclab.clients import life as client
    flag = tmp_path / "tried"
    lost = (f"if [ -e {flag} ]; then exit 0; fi; touch {flag}; echo \"ERROR 2013 (HY000): Lost connection to server "
            "at 'sending authentication information', system error: 32\" >&2; exit 1")
    failed = "echo 'ERROR 1064 (42000): You have an error in your SQL syntax' >&2; exit 1"

    def start(script):
        return subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
    stop = client.Stop()
    procs = [start("exit 0"), start(lost)]
    client._wait(procs, stop)
    procs, again = client._connect_again(procs, stop)
    assert again == 1 and client._burst_error(procs, "storm") is None
    procs = [start("exit 0"), start(failed)]
    client._wait(procs, stop)
    procs, again = client._connect_again(procs, stop)
    assert again == 0 and "1 of 2 storm connection(s) failed; first: ERROR 1064" in client._burst_error(procs, "storm")
