"""The studies' own stack, made from ../shared/vendor alone: Debian's MariaDB 11.8.6 in a trixie
root, TideSQL built out of the server's tree against the 11.8.6 plugin headers, one plugin file
per TideSQL build (`mariadb11-tidesdb`, `@4.2.5`, `@seed000`, `@seed003`). Real servers in the
root under glibc and jemalloc; TPC-C and sysbench against InnoDB and TideSQL; engines that
return wrong results named, never measured; link-time allocators proved by where their calls
bind; and nothing left behind: no mariadbd, no mount."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, need

from alloclab import plan, study
from alloclab.alloc import allocators
from alloclab.catalog import targets, tidesql
from alloclab.clients import driver
from alloclab.core.errors import AlloclabError
from alloclab.host.vendor import find as find_vendored
from alloclab.results.store import Store
from alloclab.servers import root, sources, stack
from alloclab.servers.server import Server
from alloclab.study.progress import Progress


def cli(*args, env=None, timeout=900):
    e = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ["HOME"]}
    for k in ("ALLOCLAB_STACK", "ALLOCLAB_VENDOR", "XDG_CACHE_HOME"):
        if k in os.environ:
            e[k] = os.environ[k]
    return subprocess.run([sys.executable, "-m", "alloclab", *args], capture_output=True, text=True, timeout=timeout,
                          env=e | (env or {}))


def stack_mounts() -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if str(root.root()) in line]


def stack_servers() -> list[int]:
    p = subprocess.run(["pgrep", "-x", "mariadbd"], capture_output=True, text=True)
    out = []
    for pid in p.stdout.split():
        try:
            if os.readlink(f"/proc/{pid}/root").startswith(str(root.home())):
                out.append(int(pid))
        except OSError:
            continue
    return out


@pytest.fixture(scope="module", autouse=True)
def ready():
    if not root.ready():
        pytest.fail(f"the stack is not set up ({root.describe()}): ./setup.sh test sets it up from ../shared/vendor; "
                    f"see {root.home() / 'setup.log'}")
    yield
    # after the module: nothing of the stack is left running or mounted
    time.sleep(0.3)
    assert stack_servers() == [], "a stack server was left running"
    assert stack_mounts() == [], "a mount was left behind"
    leftovers = [p for p in (root.root() / "tmp").iterdir() if p.is_dir()]
    assert leftovers == [], f"mount points were left in the root: {leftovers}"


def test_the_stack_is_mariadb_11_8_6_from_vendored_files_with_tidesql_built_out_of_tree():
    st = root.info()
    check = st["steps"]["check"]
    assert check["server_version"].startswith("11.8.6-"), check["server_version"]
    assert "InnoDB" in check["engines"]
    assert set(check["allocators"]) >= {"glibc", "jemalloc", "mimalloc", "tcmalloc", "tcmalloc-minimal"}
    for base, a in check["allocators"].items():
        if a["path"]:
            assert (root.root() / a["path"].lstrip("/")).exists(), base
    # the vendored .debs, held; the headers of exactly that server; no MariaDB source in the root
    held = root.root_output(["apt-mark", "showhold"]).split()
    assert {"mariadb-server", "mariadb-server-core", "libmariadbd-dev", "mariadb-plugin-rocksdb"} <= set(held)
    assert st["steps"]["headers"]["headers_version"] == "11.8.6"
    assert stack.server_version_id(root.root() / "usr/include/mariadb/server/mysql_version.h") == 110806
    assert not (root.root() / stack.SRC.lstrip("/") / "mariadb").exists()
    # the default TideSQL build: the newest releases, loaded into that server
    default = st["builds"][tidesql.DEFAULT_BUILD]
    assert (default["tidesql_version"], default["tidesdb_version"], default["plugin_version"]) == (
        "4.5.5", "9.3.14", "1029.5")
    assert (root.root() / root.plugin_dir().lstrip("/") / default["plugin"]).exists()
    # setting up again is a no-op
    t0 = time.monotonic()
    p = cli("setup", "stack")
    assert p.returncode == 0, p.stderr
    assert [line for line in p.stdout.splitlines() if line.endswith(" ...")] == [], p.stdout
    assert "stack ready" in p.stdout and "TideSQL 4.5.5 + TidesDB 9.3.14 (plugin 1029.5)" in p.stdout
    assert time.monotonic() - t0 < 30
    d = cli("doctor")
    assert "[ok  ] MariaDB 11.8.6 + TideSQL stack: ready" in d.stdout, d.stdout


def test_plugin_headers_of_another_server_version_are_refused_with_why(tmp_path):
    (tmp_path / "VERSION").write_text("MYSQL_VERSION_MAJOR=11\nMYSQL_VERSION_MINOR=8\nMYSQL_VERSION_PATCH=6\n")
    (tmp_path / "mysql_version.h").write_text("#define MYSQL_VERSION_ID\t\t110809\n")
    with pytest.raises(AlloclabError) as e:
        stack.check_headers(tmp_path / "VERSION", tmp_path / "mysql_version.h")
    msg = str(e.value)
    assert "the plugin headers are MariaDB 11.8.6 but the stack's server is 11.8.9" in msg
    assert "MYSQL_VERSION_ID 110809" in msg and "undefined handler:: symbol" in msg
    (tmp_path / "mysql_version.h").write_text("#define MYSQL_VERSION_ID\t\t110806\n")
    assert stack.check_headers(tmp_path / "VERSION", tmp_path / "mysql_version.h") == "11.8.6"


def _vendor_copy(tmp_path) -> Path:
    """A vendor folder of links to every file the stack needs (one may then be replaced)."""
    vendor = tmp_path / "vendor-given"
    for v in sources.vendored_for():
        (vendor / v.file).parent.mkdir(parents=True, exist_ok=True)
        (vendor / v.file).symlink_to(find_vendored(v))
    return vendor


def test_a_vendored_file_with_another_sha256_is_refused_before_any_work(tmp_path):
    vendor = _vendor_copy(tmp_path)
    bad = vendor / sources.TIDESQL_ARCHIVES["4.5.5"].file
    data = bad.read_bytes()
    bad.unlink()
    bad.write_bytes(data[:-10] + b"0123456789")
    p = cli("setup", "stack", env={"ALLOCLAB_STACK": str(tmp_path / "cache" / "stack"), "ALLOCLAB_VENDOR": str(vendor)})
    assert p.returncode == 2
    assert "SHA-256" in p.stderr and "refused" in p.stderr and "tidesql-4.5.5.tar.gz" in p.stderr
    assert not (tmp_path / "cache" / "stack" / "root").exists()


def test_a_missing_vendored_file_says_where_to_put_it(tmp_path):
    vendor = _vendor_copy(tmp_path)
    (vendor / sources.PLUGIN_HEADERS.file).unlink()
    p = cli("setup", "stack", env={"ALLOCLAB_STACK": str(tmp_path / "cache" / "stack"), "ALLOCLAB_VENDOR": str(vendor)})
    assert p.returncode == 2
    assert "mariadb-11.8.6-plugin-headers.tar.xz is not in any vendor folder" in p.stderr
    assert f"SHA-256 {sources.PLUGIN_HEADERS.sha256}" in p.stderr
    assert not (tmp_path / "cache" / "stack" / "root").exists()


def test_ctrl_c_during_setup_stops_it_and_the_next_setup_resumes():
    # the step stopped: the default TideSQL build (TidesDB's cmake build, then the plugin)
    st = json.loads((root.home() / "state.json").read_text())
    for name in root.STEPS[root.STEPS.index("tidesql"):]:
        st["steps"].pop(name, None)
    st["builds"].pop(tidesql.DEFAULT_BUILD, None)
    st["tidesdb"].pop(tidesql.BUILDS[tidesql.DEFAULT_BUILD].tidesdb, None)
    st["ready"] = False
    (root.home() / "state.json").write_text(json.dumps(st))
    log = root.home() / "setup.log"
    size = log.stat().st_size
    marker = b"cmake -S /usr/src/alloclab/tidesdb-9.3.14"
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ["HOME"]}
    p = subprocess.Popen([sys.executable, "-m", "alloclab", "setup", "stack"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    for _ in range(1800):  # wait until the build runs inside the root, then Ctrl-C
        if marker in log.read_bytes()[size:]:  # bytes: the log is not all ASCII
            break
        time.sleep(0.1)
    else:
        pytest.fail("the tidesql step never started")
    time.sleep(2.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, (out, err)
    assert "tidesql" not in json.loads((root.home() / "state.json").read_text())["steps"]
    time.sleep(0.5)
    assert stack_mounts() == []
    left = subprocess.run(["pgrep", "-f", "cmake --build /usr/src/alloclab"], capture_output=True).stdout
    assert not left, "cmake left running"
    # the next setup does only what is missing
    again = cli("setup", "stack")
    assert again.returncode == 0, again.stderr
    assert "stack: tidesql ..." in again.stdout and "stack: root ..." not in again.stdout
    assert "stack: packages ..." not in again.stdout
    assert root.ready() and root.built(None)


def test_a_plugin_that_fails_to_load_names_the_server_log_line(tmp_path):
    plugin_dir = root.root() / root.plugin_dir().lstrip("/")
    broken = plugin_dir / "ha_alloclab_broken.so"
    broken.write_text("not a shared object\n")
    try:
        t = targets.parse("mariadb11:TIDESDB=ha_alloclab_broken.so")
        srv = Server(t, tmp_path / "d", tmp_path / "server.log")
        srv.initialise()
        with pytest.raises(AlloclabError) as e:
            srv.start({})
        assert "Couldn't load plugins from 'ha_alloclab_broken.so'" in str(e.value)
    finally:
        broken.unlink()


def test_an_unknown_tidesql_build_is_refused_naming_the_builds():
    with pytest.raises(AlloclabError) as e:
        plan.load({"engines": ["mariadb11-tidesdb@4.9"], "allocators": ["glibc"], "runs": 1, "scale": "smoke",
                   "workloads": [{"workload": "tpcc", "warehouses": 1, "duration_s": 1.0}]}, default_seed=1)
    assert "mariadb11-tidesdb@4.9" in str(e.value) and "@seed000 (TideSQL 4.2.5 + TidesDB 9.0.9)" in str(e.value)


# --- right results: TidesDB's string-index lookups after a restart ---------------------------

def by_name(tmp_path, target: str, collation: str) -> tuple[list[int], list[int], int]:
    """3,000 rows of 50 names (60 each), an index on (w, d, last VARCHAR, first): rows per name
    through the index before and after a clean restart, and what a scan finds of one name."""
    t = targets.parse(target)
    stack.ensure([t.tidesql])
    srv = Server(t, tmp_path / "d", tmp_path / "server.log", settings=targets.load_profile(t, "small"))
    srv.initialise()
    srv.start({})
    charset = collation.split("_")[0]
    try:
        srv.sql("CREATE DATABASE x")
        srv.sql(f"CREATE TABLE c (w INT, d INT, id INT, last VARCHAR(16), first VARCHAR(16), bal INT, "
                f"PRIMARY KEY (w, d, id)) CHARACTER SET {charset} COLLATE {collation}", "x")
        srv.sql("CREATE INDEX c_by_name ON c (w, d, last, first)", "x")
        srv.sql("INSERT INTO c VALUES " + ",".join(f"(1, 1, {i}, 'NAME{i % 50}', 'F{i}', 0)" for i in range(3000)),
                "x")
        before = lookups(srv)
    finally:
        assert srv.stop()
    srv.start({})
    try:
        after = lookups(srv)
        scanned = int(srv.sql("SELECT COUNT(*) FROM c IGNORE INDEX (c_by_name) WHERE last = 'NAME0'", "x"))
    finally:
        assert srv.stop()
    return before, after, scanned


def lookups(srv) -> list[int]:
    return [int(srv.sql(f"SELECT COUNT(*) FROM c WHERE w = 1 AND d = 1 AND last = 'NAME{i}'", "x"))
            for i in range(50)]


@pytest.mark.parametrize("collation", ["utf8mb4_general_ci", "latin1_bin"])
@pytest.mark.parametrize("target", ["mariadb11-tidesdb", "mariadb11-tidesdb@4.2.5"])
def test_tidesql_finds_every_name_through_a_string_index_after_a_restart(tmp_path, target, collation):
    before, after, scanned = by_name(tmp_path, target, collation)
    assert scanned == 60
    assert before == [60] * 50
    assert after == [60] * 50, after


@pytest.mark.parametrize("build", ["seed000", "seed003"])
def test_the_seeds_exact_tidesql_returns_wrong_results_and_alloclab_names_them(tmp_path, build):
    # the engine: after a restart most names find none of their rows (a scan still finds them)
    _, after, scanned = by_name(tmp_path, f"mariadb11-tidesdb@{build}", "utf8mb4_general_ci")
    assert scanned == 60 and sum(n == 0 for n in after) >= 30, after
    # alloclab: a TPC-C study on it fails its runs with the by-name sentence, measures nothing,
    # and says which release fixes it
    from alloclab.plan.presets import preset
    raw = preset("tpcc-allocators", "smoke") | {"engines": [f"mariadb11-tidesdb@{build}"], "allocators": ["glibc"]}
    res, out, rows = _study(tmp_path, raw)
    assert res.ok == 0 and [r.status for r in rows] == ["failed"]
    b = tidesql.BUILDS[build]
    assert (f"mariadb11-tidesdb@{build} ({b.describe()}) returns wrong results through a string secondary index: "
            "after a restart") in rows[0].reason
    assert "fixed in TidesDB 9.2.1" in rows[0].reason and "mariadb11-tidesdb@4.2.5" in rows[0].reason
    from alloclab import report
    answers = report.build(out).read_text().split("## Answers")[1].split("\n## ")[0]
    assert f"On mariadb11-tidesdb@{build}, no run is valid" in answers and "string secondary index" in answers


def _study(tmp_path, raw, seed=1):
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=seed), out, Progress(0, stream=io.StringIO(), live=False))
    return res, out, Store(out).rows()


# --- TPC-C on InnoDB and TideSQL in one MariaDB 11.8.6 -------------------------------------

def test_tpcc_on_innodb_and_tidesql_in_one_mariadb_11_8_6_in_both_modes(tmp_path, found):
    need(found, "jemalloc")
    from alloclab.plan.presets import preset
    raw = preset("tpcc-allocators", "smoke") | {"allocators": ["glibc", "jemalloc"]}
    assert raw["engines"] == ["mariadb11-tidesdb", "mariadb11-innodb"]  # study 1: both engines in one server
    raw["workloads"][0] |= {"warehouses": 2, "threads": 4, "duration_s": 4.0, "mode": ["procedures", "statements"]}
    res, out, rows = _study(tmp_path, raw)
    assert res.total == 8
    for r in rows:
        # every run measured a server that answered right: no failed transaction, conditions 1-4
        assert r.status == "ok" and r.own.nopm > 0, (r.run_id, r.reason)
        assert r.errors == 0, r.run_id
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        assert j["server_version"].startswith("11.8.6-"), j["server_version"]
        assert j["check"]["ok"] and [c["ok"] for c in j["check"]["conditions"]] == [True] * 4
        assert r.allocator_verified, r.reason  # proved from the host's /proc/PID/maps: the root's own library
        if r.allocator == "jemalloc":
            why = j["proof"]["server"]["reason"]
            assert str(root.root()) in why and "libjemalloc" in why
            assert j["allocator_used"]["version"].startswith("libjemalloc2 ")
        if r.engine.startswith("mariadb11-tidesdb"):  # which TideSQL on which TidesDB, as the server loaded it
            b = tidesql.build(r.engine.partition("@")[2] or None)
            plug = j["engine_plugin"]
            assert (plug["name"], plug["tidesql_version"], plug["tidesdb_version"], plug["library"]) == (
                "TidesDB", b.tidesql, b.tidesdb, b.plugin)
    assert sorted({r.own.tpcc_mode for r in rows}) == ["procedures", "statements"]
    assert Store(out).verify() == []
    from alloclab import report
    md = report.build(out).read_text()
    # the seeds' published figures beside ours, each as a ratio to its own glibc, and what they came from
    assert "## Published figures beside ours" in md and "| mariadb11-tidesdb | jemalloc | 75,100 | 1.09x |" in md
    answers = md.split("## Answers")[1].split("\n## ")[0]
    assert "The seeds' TidesDB figures came from TideSQL 4.2.5 + TidesDB 9.0.9, which returns wrong results" in answers
    assert "TidesDB 9.2.1 fixed it" in answers
    # one short line per cell of the main question
    assert "\n- mariadb11-innodb tpcc" in answers and "\n- mariadb11-tidesdb tpcc" in answers
    assert ("server mariadb11-tidesdb: 11.8.6-MariaDB-0+deb13u1 from Debian; engine TideSQL 4.5.5 on TidesDB 9.3.14, "
            "TidesDB plugin 1029.5") in md
    assert "libjemalloc2 " in md
    # the engine defects the correctness check found and the workload avoids, named
    assert "engine defect: mariadb11-tidesdb (TideSQL 4.5.5 + TidesDB 9.3.14) reads a secondary index backwards" in md


def test_tpcc_loads_into_one_tidesql_server_again_and_again_never_stop_at_a_conflict(tmp_path, driver_exe):
    # TidesDB's commit in REPEATABLE READ claims a hash slot per written key, and a commit the
    # engine's back-pressure turns back never frees its claims: every later write of a key in
    # those slots conflicts until a restart, the retry of that very commit too. Loaded in
    # REPEATABLE READ, half of twenty loads of two warehouses by two loaders into one server
    # stopped there (a hundred retries within 0.7 to 6 s, or 22,000 in two minutes), and with
    # only the rows in READ COMMITTED, three of fifteen runs of this test at the load's metadata;
    # every write of the load runs in READ COMMITTED, which claims none
    from alloclab.workloads.tpcc import DATABASE
    t = targets.parse("mariadb11-tidesdb")
    srv = Server(t, tmp_path / "data", tmp_path / "server.log")
    srv.initialise()
    srv.start({})
    try:
        for i in range(8):
            srv.sql(f"DROP DATABASE IF EXISTS {DATABASE}")
            srv.sql(f"CREATE DATABASE {DATABASE}")
            p = subprocess.run([str(driver_exe), "tpcc-load", *driver.reach(srv, DATABASE), "--table-engine",
                                t.engine, "--warehouses", "2", "--loaders", "2", "--seed", str(i), "--events",
                                str(tmp_path / f"load{i}.jsonl")], capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, (i, p.stderr[-400:])
    finally:
        assert srv.stop()

def test_sysbench_on_tidesql_innodb_and_myrocks_in_mariadb_11_8_6(tmp_path, found):
    need(found, "jemalloc")
    engines = ["mariadb11-innodb", "mariadb11-myrocks", "mariadb11-tidesdb"]
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
        assert j["server_version"].startswith("11.8.6-")


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
    r = stack.link_binding("mimalloc")
    assert r["mapped"] and not r["bound"], r
    assert "binds to libc.so.6" in r["reason"] and "although mimalloc is mapped" in r["reason"]


def test_link_time_allocators_are_refused_on_servers_with_the_reason():
    with pytest.raises(AlloclabError) as e:
        plan.load({"engines": ["mariadb11-tidesdb"], "allocators": ["glibc", "mimalloc@link"], "runs": 1,
                   "scale": "smoke", "workloads": [{"workload": "tpcc", "warehouses": 1, "duration_s": 1.0}]},
                  default_seed=1)
    msg = str(e.value)
    assert "mimalloc@link" in msg and "binds to libc.so.6" in msg and "preload is the only effective way" in msg
    with pytest.raises(AlloclabError, match="takes no library path|no link-time build"):
        allocators.parse("jemalloc@link=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    with pytest.raises(AlloclabError, match="no link-time build with hoard"):
        allocators.parse("hoard@link")
