"""Fault injection with real processes: a hung driver, Ctrl-C then --resume, kill -9 of
alloclab then --resume, a damaged runs.csv with a half-written run folder, a library that is
not an allocator, a full disk. In each, no finished run is lost or duplicated and the
manifest verifies."""

import csv
import io
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, need

from alloclab import plan, study
from alloclab.results.store import Store
from alloclab.study.progress import Progress

LIBZ = "/usr/lib/x86_64-linux-gnu/libz.so.1"


def alloclab(*args, timeout=600, env=None, **kw):
    return subprocess.run([sys.executable, "-m", "alloclab", *args], capture_output=True, text=True, timeout=timeout,
                          env=env or _env(), **kw)


def _env():
    return {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}


def write_plan(tmp_path, engine="tidesdb", runs=3, duration_s=1.0, allocators=("glibc", "jemalloc"), threads=(1, 2),
               extra=""):
    p = tmp_path / "plan.toml"
    p.write_text(f"""
scale = "smoke"
engines = ["{engine}"]
allocators = {list(allocators)!r}
runs = {runs}
seed = 4
{extra}
[[workloads]]
workload = "write"
threads = {list(threads)!r}
duration_s = {duration_s}
""".replace("'", '"'))
    return p


def rows(out):
    with open(out / "runs.csv") as f:
        return list(csv.DictReader(f))


def wait_rows(out, n, proc, timeout=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if (out / "runs.csv").exists() and len(rows(out)) >= n:
            return
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.1)
    raise AssertionError("the study did not progress")


def assert_complete(out, expected):
    r = rows(out)
    ids = [x["run_id"] for x in r]
    assert len(ids) == len(set(ids)) == expected
    assert all(x["status"] == "ok" and x["allocator_verified"] == "true" for x in r), [x["reason"] for x in r]
    assert sorted(d.name for d in (out / "runs").iterdir()) == sorted(ids)
    assert Store(out).verify() == []


def test_hung_driver_is_killed_and_the_study_goes_on(tmp_path, found):
    need(found, "jemalloc")
    raw = {"engines": ["tidesdb"], "allocators": ["glibc", "jemalloc"], "runs": 1, "hang_timeout_s": 10,
           "scale": "smoke", "interval_ms": 200, "workloads": [{"workload": "write", "threads": 1, "duration_s": 6}]}
    # 10 s: the healthy run's TidesDB closes (flushes, compacts) without a word for a second or two
    p = plan.load(raw, default_seed=1)

    class Stopper(Progress):
        """Stops the first run's driver (SIGSTOP) once it starts measuring."""

        pid, stopped = None, False

        def event(self, ev):
            super().event(ev)
            if ev.type == "start":
                self.pid = ev.data["pid"]
            if ev.type == "phase" and ev.data.get("phase") == "measure" and not self.stopped:
                self.stopped = True
                os.kill(self.pid, signal.SIGSTOP)

    prog = Stopper(2, stream=io.StringIO(), live=False)
    out = tmp_path / "res"
    res = study.run(p, out, prog)
    assert res.total == 2 and res.failed == 1 and res.ok == 1
    r = rows(out)
    hung = [x for x in r if x["status"] == "failed"][0]
    assert "no event for 10s (hung)" in hung["reason"]
    assert (out / "runs" / hung["run_id"] / "driver.log").exists()
    assert Store(out).verify() == []


def interrupt(out, proc, after_rows: int, total: int) -> list[dict]:
    """Ctrl-C a study once `after_rows` runs finished, in its next run: exit 130 with the resume
    command, finished runs kept, the interrupted one gone, the folder consistent."""
    wait_rows(out, after_rows, proc, timeout=300)
    time.sleep(0.5)  # into the next run
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"resume with: alloclab run --resume {out}" in err
    kept = rows(out)
    assert after_rows <= len(kept) < total
    assert sorted(d.name for d in (out / "runs").iterdir()) == sorted(x["run_id"] for x in kept)
    assert Store(out).verify() == []
    return kept


def test_sigint_then_resume(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "alloclab", "run", "--plan", str(write_plan(tmp_path)),
                             "--out", str(out), "--quiet"], env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    kept = interrupt(out, proc, 2, 12)
    p = alloclab("run", "--resume", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    assert f"{len(kept)} finished run(s) kept" in p.stderr
    assert_complete(out, 12)
    after = {x["run_id"]: x for x in rows(out)}
    for x in kept:  # finished runs were not run again
        assert after[x["run_id"]]["started_at"] == x["started_at"]
        assert after[x["run_id"]]["ops"] == x["ops"]


def test_kill_9_of_alloclab_then_resume(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    scratch = tmp_path / "scratch"  # where alloclab keeps its data copies (ALLOCLAB_SCRATCH)
    env = {**_env(), "ALLOCLAB_SCRATCH": str(scratch)}
    proc = subprocess.Popen([sys.executable, "-m", "alloclab", "run", "--plan",
                             str(write_plan(tmp_path, duration_s=2.0)), "--out", str(out), "--quiet"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_rows(out, 1, proc)
    time.sleep(1.0)  # mid-run
    partial = {d.name for d in (out / "runs").iterdir()} - {x["run_id"] for x in rows(out)}
    driver_pids = [int(x) for x in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                  text=True).stdout.split()]
    proc.kill()
    proc.communicate(timeout=30)
    assert partial, "expected a run in progress"
    time.sleep(0.5)
    for pid in driver_pids:  # the driver died with its parent
        assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
    # the killed study's scratch folder (named after its host and pid) outlives it ...
    left = list(scratch.glob(f"alloclab-{socket.gethostname()}-{proc.pid}-*"))
    assert len(left) == 1 and left[0].is_dir()
    before = rows(out)
    p = alloclab("run", "--resume", str(out), "--quiet", env=env)
    assert p.returncode == 0, p.stderr
    assert "1 partial run(s) removed" in p.stderr
    assert_complete(out, 12)
    # ... until the next study on this machine sweeps it (and removes its own when it ends)
    assert list(scratch.iterdir()) == []
    after = {x["run_id"]: x for x in rows(out)}
    assert all(after[x["run_id"]]["started_at"] == x["started_at"] for x in before)


def test_truncated_runs_csv_and_half_written_run_folder(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path, runs=1, duration_s=0.3)), "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    full = rows(out)
    text = (out / "runs.csv").read_text()
    (out / "runs.csv").write_text(text[: len(text) - 40])  # the last row is cut in the middle
    # and a run folder that was being written when the machine went down
    half = out / "runs" / "9999-tidesdb-write-t1-b1-glibc-r9"
    half.mkdir()
    (half / ".events.jsonl.partial").write_text('{"v":1,"type":"start"')
    assert alloclab("verify", str(out)).returncode == 1
    p = alloclab("report", str(out))
    assert p.returncode == 2 and "damaged" in p.stderr and "--resume" in p.stderr
    p = alloclab("run", "--resume", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    assert "1 damaged line(s) of runs.csv dropped" in p.stderr and "2 partial run(s) removed" in p.stderr
    assert_complete(out, len(full))


def test_a_library_that_is_not_an_allocator_is_refused_before_any_work(tmp_path):
    assert os.path.exists(LIBZ)
    out = tmp_path / "never"
    p = alloclab("run", "--engines", "tidesdb", "--allocators", f"glibc,zlib={LIBZ}", "--workloads", "write",
                 "--ops", "100", "--out", str(out))
    assert p.returncode == 2
    assert "not an allocator" in p.stderr and "malloc" in p.stderr
    assert not out.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_full_disk_keeps_finished_runs_and_resumes(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mnt)], check=True)
    try:
        out = mnt / "res"
        plan_file = write_plan(tmp_path, engine="null", runs=20, duration_s=0.2, allocators=("glibc",), threads=(1,),
                               extra="interval_ms = 50")
        p = alloclab("run", "--plan", str(plan_file), "--out", str(out), "--quiet")
        assert p.returncode == 2, p.stderr
        assert "no space left" in p.stderr and f"alloclab run --resume {out}" in p.stderr
        kept = rows(out)
        assert 0 < len(kept) < 20
        assert Store(out).verify() == []
        subprocess.run(["mount", "-o", "remount,size=20m", str(mnt)], check=True)
        p = alloclab("run", "--resume", str(out), "--quiet")
        assert p.returncode == 0, p.stderr
        assert_complete(out, 20)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_scratch_folders_of_dead_processes_of_this_host_are_swept_and_no_others(tmp_path):
    from alloclab.run.node import make_scratch
    host = socket.gethostname()
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that was, and is no more
    gone = tmp_path / f"alloclab-{host}-{dead.pid}-abc"
    gone_node = tmp_path / f"alloclab-node-{host}-{dead.pid}-def"
    alive = tmp_path / f"alloclab-{host}-{os.getpid()}-ghi"
    other_host = tmp_path / f"alloclab-not{host}x-{dead.pid}-jkl"
    old_style = tmp_path / "alloclab-k3j4h5"  # from before folders were named after their process
    for d in (gone, gone_node, alive, other_host, old_style):
        (d / "data").mkdir(parents=True)
    mine = make_scratch(tmp_path)
    assert mine.name.startswith(f"alloclab-{host}-{os.getpid()}-")
    assert not gone.exists() and not gone_node.exists()
    assert alive.exists() and other_host.exists() and old_style.exists()


def test_a_conflict_given_up_now_and_then_is_counted_but_an_error_or_a_livelock_fails_the_run():
    from alloclab.run.execute import failed_calls
    one_in_500 = {"total_calls": 500, "total_errors": 1, "total_gave_up": 1, "first_error": "neword gave up"}
    assert failed_calls(one_in_500, tpcc=True) is None
    livelock = one_in_500 | {"total_errors": 10, "total_gave_up": 10}
    assert "10 failed transactions (10 gave up after their retries, more than 1%)" in failed_calls(livelock, True)
    wrong = one_in_500 | {"total_gave_up": 0, "first_error": "neword error: ERROR 1146"}
    assert failed_calls(wrong, tpcc=True) == "1 failed transactions; first: neword error: ERROR 1146"
    assert failed_calls({"total_calls": 9, "total_errors": 0}, tpcc=False) is None
    # a TPC-C window in which no transaction completed measured nothing: never a NOPM of 0
    stalled = {"total_calls": 0, "total_errors": 0, "duration_s": 5.05}
    assert failed_calls(stalled, tpcc=True).startswith("no transaction completed in the 5.0 s window")
