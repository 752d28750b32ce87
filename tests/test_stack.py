"""The studies' own stack: MariaDB 11.8 from a Debian trixie root with TideSQL (TidesDB inside
MariaDB) built for it, set up by `alloclab setup stack` (./setup.sh test does it first). Real
servers in the root under glibc and jemalloc, TPC-C and sysbench against InnoDB and TideSQL,
link-time allocators proved by where their calls bind, and nothing left behind: no mariadbd,
no mount."""

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, need

from alloclab import allocators, driver, plan, stack, study, targets
from alloclab.errors import AlloclabError
from alloclab.progress import Progress
from alloclab.store import Store


def cli(*args, env=None, timeout=900):
    e = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ["HOME"]}
    for k in ("ALLOCLAB_STACK", "ALLOCLAB_VENDOR", "XDG_CACHE_HOME"):
        if k in os.environ:
            e[k] = os.environ[k]
    return subprocess.run([sys.executable, "-m", "alloclab", *args], capture_output=True, text=True, timeout=timeout,
                          env=e | (env or {}))


def stack_mounts() -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if str(stack.root()) in line]


def stack_servers() -> list[int]:
    p = subprocess.run(["pgrep", "-x", "mariadbd"], capture_output=True, text=True)
    out = []
    for pid in p.stdout.split():
        try:
            if os.readlink(f"/proc/{pid}/root").startswith(str(stack.home())):
                out.append(int(pid))
        except OSError:
            continue
    return out


@pytest.fixture(scope="module", autouse=True)
def ready():
    if not stack.ready():
        try:
            for a in (stack.TIDESQL, stack.TIDESDB):
                stack.find_archive(a)
        except AlloclabError as e:  # no vendor folder and no network: cannot be built here
            pytest.skip(f"the stack cannot be built on this machine: {e}")
        pytest.fail(f"the stack is not set up ({stack.describe()}): ./setup.sh test sets it up; "
                    f"see {stack.home() / 'setup.log'}")
    yield
    # after the module: nothing of the stack is left running or mounted
    time.sleep(0.3)
    assert stack_servers() == [], "a stack server was left running"
    assert stack_mounts() == [], "a mount was left behind"
    leftovers = [p for p in (stack.root() / "tmp").iterdir() if p.is_dir()]
    assert leftovers == [], f"mount points were left in the root: {leftovers}"


def need_tidesql() -> None:
    """The TideSQL plugin is built against the source of exactly the root's server; a mirror that
    serves that server's binaries but not its source leaves the stack without it (said by
    setup, doctor and preflight): the tests of TideSQL itself cannot run then."""
    if stack.tidesql_missing():
        pytest.skip(f"the stack has no TideSQL: {stack.tidesql_missing()}")


def test_the_stack_has_mariadb_11_8_with_tidesql_and_the_allocators():
    st = stack.info()
    check = st["steps"]["check"]
    assert check["server_version"].startswith("11.8.")
    missing = stack.tidesql_missing()
    assert ("TidesDB" in check["engines"]) == (not missing) and "InnoDB" in check["engines"]
    assert set(check["allocators"]) >= {"glibc", "jemalloc", "mimalloc", "tcmalloc", "tcmalloc-minimal"}
    for base, a in check["allocators"].items():
        if a["path"]:
            assert (stack.root() / a["path"].lstrip("/")).exists(), base
    # setting up again is a no-op: every step is done
    t0 = time.monotonic()
    p = cli("setup", "stack")
    assert p.returncode == 0, p.stderr
    redone = [line for line in p.stdout.splitlines() if line.endswith(" ...")]
    # without TideSQL only the source is tried again (a mirror or vendor folder may have it now)
    assert redone == (["stack: source ..."] if missing else []), p.stdout
    assert "stack ready" in p.stdout and time.monotonic() - t0 < 30
    d = cli("doctor")
    if missing:
        assert "[WARN] MariaDB 11.8 + TideSQL stack: ready" in d.stdout and "without TideSQL" in d.stdout
        assert "without TideSQL (mariadb11-tidesdb is refused)" in p.stdout and "source of mariadb" in p.stdout
        with pytest.raises(AlloclabError, match="the stack has no TideSQL plugin: .*source of mariadb"):
            targets.check_available(targets.parse("mariadb11-tidesdb"))
    else:
        assert "[ok  ] MariaDB 11.8 + TideSQL stack: ready" in d.stdout


def test_an_archive_with_another_sha256_is_refused_before_any_work(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    shutil.copy(stack.find_archive(stack.TIDESDB), vendor / stack.TIDESDB.file)
    (vendor / stack.TIDESQL.file).write_bytes(stack.find_archive(stack.TIDESQL).read_bytes()[:-10] + b"0123456789")
    p = cli("setup", "stack", env={"ALLOCLAB_STACK": str(tmp_path / "stack"), "ALLOCLAB_VENDOR": str(vendor)})
    assert p.returncode == 2
    assert "SHA-256" in p.stderr and "refused" in p.stderr and stack.TIDESQL.file in p.stderr
    assert not (tmp_path / "stack" / "root").exists() and not (tmp_path / "stack" / "root.partial").exists()


def test_a_missing_archive_without_network_says_where_to_put_it(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    p = cli("setup", "stack", env={"ALLOCLAB_STACK": str(tmp_path / "stack"), "ALLOCLAB_VENDOR": str(vendor)},
            timeout=300)
    if p.returncode == 0:
        pytest.skip("this machine reached upstream and the archives matched")
    assert p.returncode == 2
    assert "is not in any vendor folder" in p.stderr and "put tidesql-4.2.5.tar.gz" in p.stderr
    assert not (tmp_path / "stack" / "root").exists()


def test_ctrl_c_during_setup_stops_it_and_the_next_setup_resumes():
    # the step stopped: MariaDB's configure (about a minute), or without TideSQL the TidesDB build
    step, marker = ("tidesdb", b"cmake -S /usr/src/alloclab/tidesdb") if stack.tidesql_missing() else \
        ("configure", b"-G 'Unix Makefiles'")
    st = json.loads((stack.home() / "state.json").read_text())
    for name in stack.STEPS[stack.STEPS.index(step):]:
        st["steps"].pop(name, None)
    st["ready"] = False
    (stack.home() / "state.json").write_text(json.dumps(st))
    log = stack.home() / "setup.log"
    size = log.stat().st_size
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ["HOME"]}
    p = subprocess.Popen([sys.executable, "-m", "alloclab", "setup", "stack"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    # wait until the step's build runs inside the root, then Ctrl-C
    for _ in range(1800):
        if marker in log.read_bytes()[size:]:  # bytes: the log is not all ASCII
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the {step} step never started")
    time.sleep(3.0 if step == "configure" else 1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err)
    assert step not in json.loads((stack.home() / "state.json").read_text())["steps"]
    time.sleep(0.5)
    assert stack_mounts() == []
    left = subprocess.run(["pgrep", "-f", marker.decode()], capture_output=True).stdout
    assert not left, "cmake left running"
    # the next setup does only what is missing
    again = cli("setup", "stack")
    assert again.returncode == 0, again.stderr
    assert f"stack: {step} ..." in again.stdout and "stack: root ..." not in again.stdout
    assert stack.ready()


def test_a_plugin_that_fails_to_load_names_the_server_log_line(tmp_path):
    plugin_dir = stack.root() / stack.plugin_dir().lstrip("/")
    broken = plugin_dir / "ha_alloclab_broken.so"
    broken.write_text("not a shared object\n")
    try:
        t = targets.parse("mariadb11:TIDESDB=ha_alloclab_broken.so")
        srv = targets.Server(t, tmp_path / "d", tmp_path / "server.log")
        srv.initialise()
        with pytest.raises(AlloclabError) as e:
            srv.start({})
        assert "Couldn't load plugins from 'ha_alloclab_broken.so'" in str(e.value)
    finally:
        broken.unlink()


def _study(tmp_path, raw, seed=1):
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=seed), out, Progress(0, stream=io.StringIO(), live=False))
    return res, out, Store(out).rows()


# how TideSQL's missed rows show in a TPC-C run: a by-name lookup without a customer, or a
# district whose orders the consistency check cannot see (max(o_id)=0 while d_next_o_id says 3000+)
TIDESQL_MISSES = ("no customer named", "max(o_id)=0")


def test_tpcc_on_innodb_and_tidesql_in_one_mariadb_11_8_under_glibc_and_jemalloc(tmp_path, found):
    need_tidesql()
    need(found, "jemalloc")
    from alloclab.presets import preset
    raw = preset("tpcc-allocators", "smoke") | {"allocators": ["glibc", "jemalloc"]}
    raw["workloads"][0] |= {"warehouses": 2, "duration_s": 4.0}
    assert raw["engines"] == ["mariadb11-tidesdb", "mariadb11-innodb"]  # study 1: both engines in one server
    res, out, rows = _study(tmp_path, raw)
    assert res.total == 4
    for r in rows:
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        assert j["server_version"].startswith("11.8."), j["server_version"]
        # proved from the host's /proc/PID/maps: the root's own library
        assert r.allocator_verified, r.reason
        if r.allocator == "jemalloc":
            why = j["proof"]["server"]["reason"]
            assert str(stack.root()) in why and "libjemalloc" in why
            assert j["allocator_used"]["version"].startswith("libjemalloc2 ")
        if r.engine == "mariadb11-innodb":
            assert r.status == "ok" and r.nopm > 0, r.reason
            assert j["check"]["ok"] and [c["ok"] for c in j["check"]["conditions"]] == [True] * 4
        else:
            # TideSQL 4.2.5 misses rows it holds once they are in its SSTables, through secondary
            # indexes after a restart (see the test below), and the golden copy is restarted: a
            # by-name lookup that finds no customer, or a consistency check that finds no order
            # of a district, is an error of the run, never a silent wrong answer
            assert r.status == "ok" or any(s in r.reason for s in TIDESQL_MISSES), r.reason
    # both engines were loaded once, their TidesDB data beside the datadir in the copy
    assert sorted(p.name.split("-tpcc")[0] for p in (out / "loads").iterdir()) == ["mariadb11-innodb",
                                                                                  "mariadb11-tidesdb"]
    assert Store(out).verify() == []
    from alloclab import report
    md = report.build(out).read_text()
    # the seed's published figures beside ours, each as a ratio to its own glibc
    assert "## Published figures beside ours" in md and "| mariadb11-tidesdb | jemalloc | 75,100 | 1.09x |" in md
    answers = md.split("## Answers")[1].split("##")[0]
    tides = [r for r in rows if r.engine == "mariadb11-tidesdb"]
    if not any(r.status == "ok" for r in tides):  # what could not be answered is said, with why
        assert "On mariadb11-tidesdb, no run is valid (2 failed or unproved)" in answers, answers
        assert any(s in answers for s in TIDESQL_MISSES), answers
    assert "On mariadb11-innodb, tpcc" in answers
    assert "server mariadb11-innodb: 11.8." in md and "libjemalloc2 " in md


@pytest.mark.xfail(strict=True, reason="TideSQL 4.2.5 / TidesDB 9.0.9: once rows are in SSTables (a flush, a clean "
                                       "restart), equality lookups on a VARCHAR secondary index miss most of them")
def test_tidesql_finds_rows_through_a_secondary_index_after_a_restart(tmp_path):
    need_tidesql()
    t = targets.parse("mariadb11-tidesdb")
    srv = targets.Server(t, tmp_path / "d", tmp_path / "server.log", settings=targets.load_profile(t, "small"))
    srv.initialise()
    srv.start({})
    try:
        srv.sql("CREATE DATABASE x")
        srv.sql("CREATE TABLE c (w INT, d INT, id INT, last VARCHAR(16), first VARCHAR(16), bal INT, "
                "PRIMARY KEY (w, d, id))", "x")
        srv.sql("CREATE INDEX c_by_name ON c (w, d, last, first)", "x")
        values = ",".join(f"(1, 1, {i}, 'NAME{i % 50}', 'F{i}', 0)" for i in range(3000))
        srv.sql(f"INSERT INTO c VALUES {values}", "x")
        before = lookups(srv)
    finally:
        assert srv.stop()
    assert before == [60] * 50  # every name has 60 rows, and the index finds them
    srv.start({})
    try:
        after = lookups(srv)
        scanned = int(srv.sql("SELECT COUNT(*) FROM c IGNORE INDEX (c_by_name) WHERE last = 'NAME0'", "x"))
    finally:
        assert srv.stop()
    assert scanned == 60  # the rows are there
    assert after == [60] * 50, after  # TideSQL 4.2.5 here: [0, 0, 0, 0, 0, 60, ..., 0, 60, 60, 60, 60, 60]


def lookups(srv) -> list[int]:
    return [int(srv.sql(f"SELECT COUNT(*) FROM c WHERE w = 1 AND d = 1 AND last = 'NAME{i}'", "x"))
            for i in range(50)]


def test_sysbench_on_tidesql_innodb_and_myrocks_in_mariadb_11_8(tmp_path, found):
    need(found, "jemalloc")
    engines = ["mariadb11-innodb", "mariadb11-myrocks"] + ([] if stack.tidesql_missing() else ["mariadb11-tidesdb"])
    raw = {"engines": engines,
           "allocators": ["glibc", "jemalloc"], "runs": 1,
           "scale": "smoke", "profiles": {"sysbench": {}},
           "workloads": [{"part": "sb", "workload": "sysbench", "test": "oltp_read_write", "threads": [2],
                          "tables": 2, "table_size": 2000, "duration_s": 2.0}]}
    res, out, rows = _study(tmp_path, raw)
    assert res.ok == 2 * len(engines), [(r.run_id, r.reason) for r in rows]
    assert all(r.allocator_verified and r.ops_per_s > 0 for r in rows)
    for r in rows:  # every run on the stack's server
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        assert j["server_version"].startswith("11.8.")


# --- link-time allocators -------------------------------------------------------------------

def test_a_link_time_driver_is_proved_by_where_its_calls_bind(tmp_path, found):
    need(found, "jemalloc")
    raw = {"engines": ["tidesdb"], "allocators": ["glibc", "jemalloc@link"], "runs": 1, "scale": "smoke",
           "workloads": [{"part": "c", "workload": "write", "pattern": "random", "threads": [2], "batch": [100],
                          "ops": 20000}]}
    res, out, rows = _study(tmp_path, raw)
    assert res.ok == 2, [(r.run_id, r.reason) for r in rows]
    linked = next(r for r in rows if r.allocator == "jemalloc@link")
    j = json.loads((out / "runs" / linked.run_id / "run.json").read_text())
    assert j["driver_binary"].endswith("alloclab-driver-jemalloc")
    assert "bind to libjemalloc.so.2" in j["proof"]["reason"] and "LD_DEBUG=bindings" in j["proof"]["source"]
    # nothing was preloaded: the allocator came with the binary
    assert "LD_PRELOAD" not in allocators.parse("jemalloc@link").target_env({"LD_PRELOAD": "/x.so"})


def test_a_library_that_is_mapped_but_not_bound_is_not_the_allocator(tmp_path, found, monkeypatch):
    # a binary whose libc comes first in its lookup scope maps jemalloc but binds to libc
    # (linked here from a two-line C program)
    need(found, "jemalloc")
    src = tmp_path / "m.c"
    src.write_text("#include <stdlib.h>\nint main(void){void *p = malloc(64); free(p); return p == 0;}\n")
    exe = tmp_path / "alloclab-driver-jemalloc"
    subprocess.run(["cc", "-o", str(exe), str(src), "-Wl,--no-as-needed", "-lc", "-ljemalloc"], check=True)
    proof = allocators.prove_binding("jemalloc", allocators.binding_text([str(exe)]), exe.name)
    assert not proof.verified and "libc.so.6" in proof.reason
    # ... and alloclab refuses to run such a build as jemalloc@link
    monkeypatch.setattr(driver, "locate_link", lambda base: exe)
    with pytest.raises(AlloclabError, match="jemalloc@link refused: .*libc.so.6"):
        driver.check_links([allocators.parse("jemalloc@link")])
    # the real case: TidesDB built with TIDESDB_WITH_MIMALLOC, loaded as TideSQL's library into
    # mariadbd, maps mimalloc while libtidesdb's malloc/free bind to glibc
    need_tidesql()
    r = stack.link_binding("mimalloc")
    assert r["mapped"] and not r["bound"], r
    assert "binds to libc.so.6" in r["reason"] and "although mimalloc is mapped" in r["reason"]


def test_link_time_allocators_are_refused_on_servers_with_the_reason():
    with pytest.raises(AlloclabError) as e:
        plan.load({"engines": ["mariadb11-tidesdb"], "allocators": ["glibc", "mimalloc@link"], "runs": 1,
                   "scale": "smoke", "workloads": [{"workload": "tpcc", "warehouses": 1, "duration_s": 1.0}]},
                  default_seed=1)
    msg = str(e.value)
    measured = "not measured: the stack has no TideSQL" if stack.tidesql_missing() else "binds to libc.so.6"
    assert "mimalloc@link" in msg and measured in msg and "preload is the only effective way" in msg
    with pytest.raises(AlloclabError, match="takes no library path|no link-time build"):
        allocators.parse("jemalloc@link=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    with pytest.raises(AlloclabError, match="no link-time build with hoard"):
        allocators.parse("hoard@link")
