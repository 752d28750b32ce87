"""The allocator catalog: every entry complete; the source-built ones built once into the cache
(a second setup does nothing); every usable allocator proved by its own library in a real
TidesDB run and a real MariaDB server run, with its version and source on every row; a build
that fails refused with its reason; tunings checked before the run and rejected in the
allocator's own words after it."""

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from alloclab import plan, report, study
from alloclab.alloc import allocators, build, listing, tuning
from alloclab.catalog.allocators import CATALOG, CRATE, SOURCE_BUILT, TUNING
from alloclab.core.digest import sha256_file
from alloclab.core.errors import AlloclabError
from alloclab.results.store import Store
from alloclab.run.preflight import preflight
from alloclab.study.progress import Progress

# the issue's list: at least 12 allocators besides glibc, each proved in both kinds of process
ISSUE_LIST = ("glibc", "jemalloc", "jemalloc@5.3.1", "mimalloc", "mimalloc@2", "mimalloc@3", "tcmalloc",
              "tcmalloc-minimal", "tcmalloc-google", "tbbmalloc", "scudo", "snmalloc", "rpmalloc")


def test_every_entry_says_what_it_is_where_it_comes_from_and_how_it_is_tuned():
    assert set(ISSUE_LIST) <= {e.name for e in CATALOG}
    for e in CATALOG:
        assert e.about and e.family in TUNING, e
        if e.source == CRATE:
            c = e.crate
            assert c.name and c.version and c.upstream and c.library and c.recipe in build.RECIPES, e
        else:
            assert e.package and (e.sonames or e.name == "glibc"), e
    # names carry the version where two builds of one allocator exist
    assert {"mimalloc", "mimalloc@2", "mimalloc@3", "jemalloc", "jemalloc@5.3.1"} <= {e.name for e in CATALOG}


def test_a_second_setup_builds_nothing():
    """setup.sh built the source allocators; setup again is a no-op: same files, same hashes."""
    before = {n: (m["sha256"], os.stat(m["path"]).st_mtime_ns) for n, m in build.built().items()}
    assert set(before) == set(SOURCE_BUILT), "run ./setup.sh (it runs alloclab setup allocators)"
    out = subprocess.run([sys.executable, "-m", "alloclab", "setup", "allocators"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "building" not in out.stdout
    assert {n: (m["sha256"], os.stat(m["path"]).st_mtime_ns) for n, m in build.built().items()} == before
    for m in build.built().values():
        assert sha256_file(m["path"]) == m["sha256"] and {"malloc", "free", "realloc", "calloc"} <= set(m["exports"])


def test_a_build_that_fails_is_refused_with_its_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("ALLOCLAB_ALLOCATORS", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "/bin/false")
    made = build.setup(["rpmalloc"], notify=lambda m: None)
    assert "could not be built or loaded here" in made["rpmalloc"]["refused"]
    assert "rpmalloc" in build.refusals() and "rpmalloc" not in allocators.discover()
    with pytest.raises(AlloclabError, match="allocator 'rpmalloc' is refused here: rpmalloc could not be built"):
        allocators.parse("rpmalloc")
    line = next(x for x in listing.catalog() if x.startswith("rpmalloc "))
    assert " refused " in line
    # one never built is built on its first use (tests/test_first_use.py), as the catalog says
    assert "built on its first use" in next(x for x in listing.catalog() if x.startswith("  snmalloc: "))


def test_debian_mimallocs_options_are_the_ones_compiled_into_it():
    """Debian's mimalloc (2.0.9) knows the options of its own option table and no other: the 2.1
    names (purge_delay, ...) would be ignored without a word, so they are refused."""
    lib = Path("/usr/lib/x86_64-linux-gnu/libmimalloc.so.2")
    if not lib.exists():
        pytest.skip("Debian's libmimalloc2.0 is not installed")
    text = subprocess.run(["strings", str(lib)], capture_output=True, text=True, check=True).stdout.split()
    table = text[text.index("show_errors"):text.index("destroy_on_exit") + 1]
    assert TUNING["mimalloc-2.0"] == tuple(f"MIMALLOC_{o.upper()}" for o in table if not o.startswith("deprecated_"))
    with pytest.raises(AlloclabError, match="MIMALLOC_PURGE_DELAY is not an option mimalloc documents"):
        tuning.check("mimalloc+MIMALLOC_PURGE_DELAY=0", "mimalloc", [("MIMALLOC_PURGE_DELAY", "0")])


def test_tunings_are_checked_against_each_allocators_own_options(found):
    tuning.check("mimalloc@3+MIMALLOC_PAGE_RECLAIM_ON_FREE=1", "mimalloc@3", [("MIMALLOC_PAGE_RECLAIM_ON_FREE", "1")])
    with pytest.raises(AlloclabError, match="MIMALLOC_PAGE_RECLAIM_ON_FREE is not an option mimalloc documents"):
        tuning.check("mimalloc+X", "mimalloc", [("MIMALLOC_PAGE_RECLAIM_ON_FREE", "1")])
    with pytest.raises(AlloclabError, match="none at run time"):
        tuning.check("rpmalloc+X", "rpmalloc", [("RPMALLOC_X", "1")])
    with pytest.raises(AlloclabError, match="SCUDO_OPTIONS='x' is not a list of key=value"):
        tuning.check("scudo+X", "scudo", [("SCUDO_OPTIONS", "x")])
    tuning.check("jemalloc@5.3.1+MALLOC_CONF=narenas:2", "jemalloc@5.3.1", [("MALLOC_CONF", "narenas:2")])
    said = tuning.complaints("Scudo WARNING: found 1 unrecognized flag(s):\n    bogus=1\nok\n")
    assert said == ["Scudo WARNING: found 1 unrecognized flag(s): bogus=1"]


def _study(tmp_path, engine, names, workload, **extra):
    raw = {"engines": [engine], "allocators": names, "runs": 1, "scale": "smoke", "workloads": [workload], **extra}
    out = tmp_path / engine
    study.run(plan.load(raw, default_seed=1), out, Progress(0, stream=io.StringIO(), live=False))
    return out, Store(out).rows()


KV = {"part": "w", "workload": "write", "ops": 20000, "threads": [2], "batch": [10]}
SYSBENCH = {"part": "sb", "workload": "sysbench", "test": "oltp_read_only", "threads": [2], "tables": 2,
            "table_size": 2000, "duration_s": 2.0}


@pytest.mark.parametrize("engine,workload", [("tidesdb", KV), ("mariadb-innodb", SYSBENCH)])
def test_every_catalog_allocator_is_proved_by_its_own_library(engine, workload, tmp_path, found):
    usable = [e.name for e in CATALOG if e.name in found]
    refused = allocators.unavailable()
    assert set(usable) | set(refused) == {e.name for e in CATALOG}  # none dropped without a word
    assert all(why for why in refused.values())
    assert len(set(usable) - {"glibc"}) >= 12, f"only {usable} usable here; refused: {refused}"
    extra = {"profiles": {"sysbench": {}}} if engine != "tidesdb" else {}
    out, rows = _study(tmp_path, engine, usable, workload, **extra)
    assert {r.allocator for r in rows} == set(usable)
    for r in rows:
        assert r.status == "ok" and r.allocator_verified, (r.allocator, r.reason)
        assert r.allocator_version and r.allocator_source, r
        j = json.loads((out / "runs" / r.run_id / "run.json").read_text())
        proof = j["proof"] if engine == "tidesdb" else j["proof"]["server"]
        lib = found[r.allocator].path
        assert (lib is None and "no other allocator mapped" in proof["reason"]) or lib in proof["reason"], proof
        if r.allocator in SOURCE_BUILT:
            assert build.built()[r.allocator]["sha256"] in r.allocator_source
        if r.allocator == "tcmalloc-google":  # per-CPU caches in use, by its own account
            assert j["alloc_account"]["per_cpu_caches_active"] is True, j["alloc_account"]
    proved = build.last_proofs()
    assert all(proved[n]["engine"] == engine for n in usable)
    env = report.build(out).read_text().split("## Environment")[1]
    for r in rows:  # the report names each allocator's version and where it came from
        assert f"allocator {r.allocator}: {r.allocator_version}, {r.allocator_source}" in env
    if "tcmalloc-google" in usable:
        assert "per-CPU caches (rseq) active in 1/1 runs, by its own MallocExtension" in env


def test_a_tuning_the_allocator_rejects_fails_the_run_in_its_own_words(tmp_path, found):
    out, rows = _study(tmp_path, "tidesdb", ["scudo+SCUDO_OPTIONS=no_such_flag=1"], KV)
    (r,) = rows
    assert r.status == "failed" and "scudo rejected its tuning: Scudo WARNING" in r.reason, r.reason
    assert "no_such_flag=1" in r.reason


def test_postgres_refuses_a_preload_its_user_cannot_reach(tmp_path, found):
    """PostgreSQL's backends load the preload as the user postgres: a library behind a private
    folder (as ~/.cache is under /root) would never load there; refused before any work."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    lib = private / "libmimalloc.so.3"
    lib.write_bytes(open(found["mimalloc@3"].path, "rb").read())
    p = plan.load({"engines": ["postgres"], "allocators": ["glibc", f"mine={lib}"], "runs": 1, "scale": "smoke",
                   "profiles": {"sysbench": {}}, "workloads": [SYSBENCH]}, default_seed=1)
    with pytest.raises(AlloclabError, match="the server runs as user postgres, who cannot pass through"):
        preflight(p, None)


def test_proofs_noted_at_once_by_many_runs_are_all_kept(tmp_path, monkeypatch):
    """The runs of a group in turns end together: their notes of the last proof (threads of one
    process and other processes) must all be kept, in a file that stays JSON."""
    monkeypatch.setenv("ALLOCLAB_ALLOCATORS", str(tmp_path))
    (tmp_path / build.PROVED).write_text('{"glibc": {"at": "x"')  # a torn note from before: started again
    names = [f"a{i}" for i in range(24)]
    threads = [threading.Thread(target=build.remember_proof, args=(n, "tidesdb", f"PID {i}: mapped"))
               for i, n in enumerate(names[:16])]
    code = ("import sys; from alloclab.alloc import build\n"
            "[build.remember_proof(n, 'mariadb-innodb', 'mapped') for n in sys.argv[1:]]")
    procs = [subprocess.Popen([sys.executable, "-c", code, *names[16 + 4 * k:20 + 4 * k]], env=os.environ)
             for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(p.wait(60) == 0 for p in procs)
    seen = json.loads((tmp_path / build.PROVED).read_text())
    assert set(seen) == set(names), sorted(set(names) - set(seen))
    assert seen["a0"]["engine"] == "tidesdb" and seen["a20"]["engine"] == "mariadb-innodb"


def test_allocator_facts_live_in_the_catalog():
    """Tuning prefixes, the foreign libraries, the linkable allocators and setup.sh's packages
    are the catalog's: every family's documented variable starts with a tuning prefix, every
    catalog library is foreign to glibc, and setup.sh installs what the catalog names."""
    from alloclab.alloc import allocators as alloc_mod
    from alloclab.alloc import environment
    from alloclab.catalog import allocators as cat
    for fam, names in cat.TUNING.items():
        assert all(n.startswith(cat.TUNING_PREFIXES) for n in names), fam
    for e in cat.CATALOG:
        for so in e.sonames + ((e.crate.library,) if e.crate else ()):
            assert alloc_mod.FOREIGN_ALLOCATOR.search(so.rsplit("/", 1)[-1]), so
    assert cat.LINKABLE == ("jemalloc", "mimalloc", "tcmalloc")
    assert environment.clean({"MALLOC_CONF": "x", "TBB_MALLOC_USE_HUGE_PAGES": "1", "HOME": "/"}) == {"HOME": "/"}
    pkgs = cat.debian_packages()
    assert {"libjemalloc2", "libtbbmalloc2", "libclang-rt-16-dev", "libgoogle-perftools-dev"} <= set(pkgs)
    setup = (Path(__file__).resolve().parents[1] / "setup.sh").read_text()
    assert "debian_packages()" in setup and "LINKABLE" in setup
    for p in pkgs:  # no allocator package written into setup.sh by hand
        assert f" {p} " not in setup and f"({p} " not in setup, p
