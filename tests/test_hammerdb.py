"""HammerDB 4.12, the seeds' TPC-C client, beside alloclab's own: installed from ../shared/vendor
(./setup.sh), its own schema as golden data, its timed test measured like every run (allocator
proved in the server, NOPM from HammerDB and from the server, client and server CPU,
consistency conditions 1-4 on its tables), and its failures said in its own words."""

import io
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, need

from alloclab import plan, study
from alloclab.catalog import targets
from alloclab.clients import hammerdb
from alloclab.core.errors import AlloclabError
from alloclab.results.store import Store
from alloclab.servers.server import Server
from alloclab.study.progress import Progress


def cli(*args, env=None, timeout=900):
    e = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ["HOME"]}
    return subprocess.run([sys.executable, "-m", "alloclab", *args], capture_output=True, text=True, timeout=timeout,
                          env=e | (env or {}))


def test_hammerdb_is_installed_from_the_vendored_archives_once():
    rec = hammerdb.installed()
    assert rec, "./setup.sh installs HammerDB (alloclab setup hammerdb)"
    assert rec["version"] == "4.12" and "0.1" in rec["tcl_packages"]  # mariatcl, compiled here
    home = hammerdb.home()
    assert (home / "hammerdbcli").exists() and (home / "lib" / "mariatcl0.1" / "libmariatcl0.1.so").exists()
    assert (home / "lib" / "ticklecharts").is_dir()
    t0 = time.monotonic()
    p = cli("setup", "hammerdb")
    assert p.returncode == 0 and "HammerDB 4.12 ready" in p.stdout and time.monotonic() - t0 < 20, p.stderr


def test_an_archive_with_another_sha256_is_refused_and_nothing_is_installed(tmp_path):
    vendor = tmp_path / "vendor" / "hammerdb"
    vendor.mkdir(parents=True)
    for v in hammerdb.ARCHIVES.values():
        (tmp_path / "vendor" / v.file).symlink_to(hammerdb.find(v))
    bad = tmp_path / "vendor" / hammerdb.ARCHIVES["mariatcl"].file
    data = bad.read_bytes()
    bad.unlink()
    bad.write_bytes(data[:-4] + b"xxxx")
    p = cli("setup", "hammerdb", env={"ALLOCLAB_HAMMERDB": str(tmp_path / "hdb"),
                                      "ALLOCLAB_VENDOR": str(tmp_path / "vendor"),
                                      "ALLOCLAB_STACK": str(tmp_path / "cache" / "stack")})
    assert p.returncode == 2 and "mariatcl-0.1.tar.gz has SHA-256" in p.stderr and "refused" in p.stderr
    assert not (tmp_path / "hdb").exists()


@pytest.mark.parametrize("raw_workload, engines, says", [
    ({"client": ["hammerdb"]}, ["postgres"], "against MariaDB only, not postgres"),
    ({"client": ["hammerdb"]}, ["sqlite"], "against MariaDB only, not sqlite"),
    ({"client": ["hammerdb"], "mode": ["statements"]}, ["mariadb-innodb"], "HammerDB runs its own stored procedures"),
    ({"client": ["hammerdb"], "mix": "spec"}, ["mariadb-innodb"], "HammerDB's mix is its own"),
    ({"client": ["hammerdb"], "ops": 1000}, ["mariadb-innodb"], "HammerDB runs for a time"),
    ({"client": ["sysbench"]}, ["mariadb-innodb"], "'sysbench' does not run TPC-C"),
])
def test_a_hammerdb_cell_that_cannot_run_is_refused_before_any_work(raw_workload, engines, says):
    raw = {"engines": engines, "allocators": ["glibc"], "runs": 1, "scale": "smoke",
           "workloads": [{"workload": "tpcc", "warehouses": 1, "duration_s": 6.0} | raw_workload]}
    if "ops" in raw_workload:
        raw["workloads"][0].pop("duration_s")
    with pytest.raises(AlloclabError, match=says):
        plan.load(raw, default_seed=1)


def _study(tmp_path, engines, allocators, warehouses=2, threads=2):
    raw = {"engines": engines, "allocators": allocators, "runs": 1, "scale": "smoke",
           "workloads": [{"workload": "tpcc", "client": ["hammerdb"], "warehouses": warehouses, "threads": threads,
                          "loaders": 2, "rampup_s": 6.0, "duration_s": 12.0}]}
    out = tmp_path / "res"
    res = study.run(plan.load(raw, default_seed=3), out, Progress(0, stream=io.StringIO(), live=False))
    return res, out, Store(out).rows()


def test_hammerdb_runs_are_proved_counted_twice_and_checked(tmp_path, found):
    need(found, "jemalloc")
    res, out, rows = _study(tmp_path, ["mariadb-innodb", "mariadb11-innodb"], ["glibc", "jemalloc"])
    assert res.ok == 4, [(r.run_id, r.reason) for r in rows]
    for r in rows:
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        assert j["kind"] == "server TPC-C (HammerDB)" and r.client == "hammerdb"
        assert r.allocator_verified, r.reason  # the allocator proved in the server, as for every run
        # NOPM from HammerDB's result line and from the server over the same window
        o = r.own
        assert o.nopm > 0 and o.client_nopm > 0 and abs(o.nopm - o.client_nopm) / o.client_nopm < 0.1, (
            o.nopm, o.client_nopm)
        assert o.tpm > 0 and o.server_tpm > 0
        assert 11.0 < r.duration_s < 14.0  # HammerDB's timed test: 0.2 minute
        assert r.client_cpu_user_s + r.client_cpu_sys_s > 0 and r.cpu_user_s > 0
        assert j["check"]["ok"] and [c["id"] for c in j["check"]["conditions"]] == [1, 2, 3, 4]
        assert "TEST RESULT : System achieved" in (out / "runs" / r.run_id / "client.log").read_text()
    # HammerDB's own schema, built once per target by HammerDB, timed, with its client CPU
    loads = [json.loads(p.read_text()) for p in sorted((out / "loads").glob("*/prepare.json"))]
    assert len(loads) == 2 and all(x["client"] == "hammerdb" and x["load_s"] > 0 and x["client_cpu_s"] > 0
                                   for x in loads)
    from alloclab import report
    md = report.build(out).read_text()
    assert "TPC-C client: HammerDB 4.12" in md and "HammerDB 4.12 buildschema" in md


def test_a_hammerdb_error_fails_the_run_in_its_own_words(tmp_path):
    """A server without HammerDB's schema: HammerDB says so, and the adapter ends the run with it."""
    t = targets.parse("mariadb-innodb")
    srv = Server(t, tmp_path / "d", tmp_path / "server.log")
    srv.initialise()
    srv.start({})
    try:
        ev = tmp_path / "events.jsonl"
        p = subprocess.run([sys.executable, "-m", "alloclab.clients.hammerdb", "run", "--socket", str(srv.socket),
                            "--warehouses", "1", "--engine", "InnoDB", "--threads", "1", "--rampup-s", "6",
                            "--duration-s", "6", "--events", str(ev), "--tmp", str(tmp_path / "hdb")],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    finally:
        srv.stop()
    assert p.returncode != 0
    end = [json.loads(x) for x in ev.read_text().splitlines() if '"type": "end"' in x][-1]
    assert end["status"] == "error" and "HammerDB" in end["error"], end
    assert "tpcc" in end["error"].lower(), end  # its words name what is missing
    shutil.rmtree(tmp_path / "hdb", ignore_errors=True)
