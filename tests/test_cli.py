"""The command line: every bad value gets one sentence and exit 2 before any work (values that
begin with '-', folders that cannot be made, tunings an allocator does not take), sysbench's
tests are workloads, and a fuzzer finds no traceback in any combination of flags."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT, need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alloclab import cli, study
from alloclab.core import units
from alloclab.core.errors import AlloclabError


class Started(Exception):
    """Raised instead of running a study: the command line got past every check."""


@pytest.fixture
def no_work(monkeypatch, tmp_path):
    """cli.main up to the start of the study's work, in a scratch working directory."""
    started = []

    def fake_run(plan, out, progress=None, scratch_root=None):
        started.append((plan, out))
        raise Started

    monkeypatch.setattr(study, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    return started


def run_cli(argv, capsys):
    """(exit code or 'started', stderr) of cli.main(argv)."""
    try:
        rc = cli.main(argv)
    except Started:
        rc = "started"
    except SystemExit as e:  # argparse's own refusals
        rc = e.code
    return rc, capsys.readouterr().err


@given(st.floats(min_value=0, max_value=30 * 3600))
def test_a_duration_the_report_writes_is_one_the_command_line_takes(seconds):
    # the report's "alloclab run --resume DIR --budget 1h40m" and the stop lines' "57m31s"
    written = units.fmt_duration(seconds)
    assert units.fmt_duration(units.parse_duration(written, "budget")) == written


@pytest.mark.parametrize("value, seconds", [("1h40m", 6000), ("57m31s", 3451), ("2m30s", 150), ("1h 5m", 3900),
                                            ("1h", 3600), ("90s", 90), ("500ms", 0.5), ("1.5h", 5400)])
def test_compound_durations_parse(value, seconds):
    assert units.parse_duration(value) == seconds


@pytest.mark.parametrize("value", ["1m1h", "1h1h", "5 m s", "h", "1ms2s", "m", ""])
def test_a_duration_out_of_order_or_without_a_number_is_refused(value):
    with pytest.raises(AlloclabError, match="is not a duration"):
        units.parse_duration(value, "budget")


@pytest.mark.parametrize("flag, value, says", [
    ("--duration", "-5s", "duration_s: '-5s' is not a duration"),
    ("--warmup", "-2s", "warmup_s"),
    ("--budget", "-5m", "budget: '-5m' is not a duration"),
    ("--threads", "-1", "threads[0]: must be >= 1, got -1"),
    ("--batch", "-100", "batch"),
    ("--runs", "-2", "runs"),
    ("--max-rounds", "-1", "max_rounds"),
    ("--margin", "-3", "margin"),
    ("--target-ci", "-1", "target_ci"),
    ("--warehouses", "-1", "--warehouses only apply to TPC-C"),
    ("--server-memory", "-1GiB", "server_memory"),
    ("--engines", "-tidesdb", "-tidesdb"),
    ("--allocators", "-glibc", "-glibc"),
    ("--seed", "-x", "--seed"),
])
def test_a_value_that_begins_with_a_dash_reaches_its_validation(no_work, capsys, tmp_path, flag, value, says):
    out = tmp_path / "never"
    rc, err = run_cli(["run", "--engines", "tidesdb", flag, value, "--out", str(out)], capsys)
    assert rc == 2, err
    assert says in err and "expected one argument" not in err and "Traceback" not in err
    assert not out.exists() and not no_work


@pytest.mark.parametrize("where, says", [
    ("/proc/alloclab-study", "cannot make a results folder there (No such file or directory)"),
    ("{file}/x", "cannot make a results folder there (Not a directory)"),
    ("{file}", "that is a file, not a folder"),
    ("{study}", "already holds a study"),
])
def test_a_results_folder_that_cannot_be_made_is_one_sentence_before_any_work(no_work, capsys, tmp_path, where,
                                                                               says):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "plan.json").write_text("{}")
    out = where.format(file=tmp_path / "a-file", study=tmp_path / "old")
    rc, err = run_cli(["run", "--engines", "tidesdb", "--out", out], capsys)
    assert rc == 2 and says in err and "Traceback" not in err, err
    assert not no_work
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "old"]  # nothing made, nothing left


def test_a_folder_that_can_be_made_is_not_left_behind_by_the_check(no_work, capsys, tmp_path):
    rc, _ = run_cli(["run", "--engines", "tidesdb", "--out", str(tmp_path / "a" / "b")], capsys)
    assert rc == "started" and not (tmp_path / "a").exists()  # the study makes it when it starts


@pytest.mark.parametrize("client", ["sysbench", "native"])
def test_sysbench_tests_are_workloads_and_the_client_a_flag(no_work, capsys, client):
    rc, err = run_cli(["run", "--engines", "mariadb-innodb", "--workloads", "oltp_read_only,oltp_point_select",
                       "--client", client, "--runs", "1"], capsys)
    assert rc == "started", err
    plan, _ = no_work[0]
    cells = plan.cells()
    assert {(c.workload, c.params.test, c.client) for c in cells} == {("sysbench", "oltp_read_only", client),
                                                             ("sysbench", "oltp_point_select", client)}


def test_a_client_where_none_applies_and_an_unknown_client_are_refused(no_work, capsys):
    rc, err = run_cli(["run", "--engines", "tidesdb", "--workloads", "write", "--client", "native"], capsys)
    assert rc == 2 and "client" in err and "sysbench" in err
    rc, err = run_cli(["run", "--engines", "mariadb-innodb", "--workloads", "oltp_read_only", "--client", "hammer"],
                      capsys)
    assert rc == 2 and "hammer" in err and "allowed values" in err


@pytest.mark.parametrize("spec, says", [
    ("jemalloc+TCMALLOC_RELEASE_RATE=5", "TCMALLOC_RELEASE_RATE is not an option jemalloc documents"),
    ("mimalloc+MIMALLOC_GARBAGE=1", "MIMALLOC_GARBAGE is not an option mimalloc documents"),
    ("glibc+MALLOC_ARENA_MAX=two", "MALLOC_ARENA_MAX='two' is not a number"),
    ("glibc+GLIBC_TUNABLES=glibc.malloc.bogus=1", "GLIBC_TUNABLES item 'glibc.malloc.bogus=1'"),
    ("jemalloc+MALLOC_CONF=narenas", "is not a list of key:value"),
    ("tcmalloc+TCMALLOC_RELEASE_RATE=fast", "TCMALLOC_RELEASE_RATE='fast' is not a number"),
])
def test_a_tuning_the_allocator_does_not_document_is_refused_before_any_work(no_work, capsys, found, spec, says):
    need(found, "jemalloc", "mimalloc", "tcmalloc")
    rc, err = run_cli(["run", "--engines", "tidesdb", "--allocators", f"glibc,{spec}"], capsys)
    assert rc == 2 and says in err, err
    assert not no_work


@pytest.mark.parametrize("engine", ["tidesdb", "mariadb-innodb"])
def test_a_tuning_the_allocator_rejects_fails_its_run_in_its_own_words(tmp_path, found, engine):
    need(found, "jemalloc")
    out = tmp_path / "res"
    workload = ["--workloads", "write", "--ops", "2000"] if engine == "tidesdb" else [
        "--workloads", "oltp_point_select", "--duration", "1s"]
    p = subprocess.run([sys.executable, "-m", "alloclab", "run", "--engines", engine, "--allocators",
                        "glibc,jemalloc+MALLOC_CONF=garbage:xx", *workload, "--threads", "1", "--runs", "1",
                        "--scale", "smoke", "--out", str(out), "--quiet"], capture_output=True, text=True,
                       timeout=600, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/sbin:/usr/bin:/bin"})
    assert p.returncode == 3, p.stderr[-1000:]
    rows = {r["allocator"]: r for r in map(json.loads, _rows_json(out))}
    assert rows["glibc"]["status"] == "ok"
    bad = rows["jemalloc+MALLOC_CONF=garbage:xx"]
    assert bad["status"] == "failed"
    assert "jemalloc rejected its tuning: <jemalloc>: Invalid conf pair: garbage:xx" in bad["reason"]


def _rows_json(out):
    import csv
    with open(out / "runs.csv") as f:
        return [json.dumps(r) for r in csv.DictReader(f)]


# --- the fuzzer -------------------------------------------------------------------------------

FLAGS = {
    "--preset": ["kv-allocators", "tpcc-allocators", "nope", "-x"],
    "--scale": ["smoke", "quick", "huge", "-1"],
    "--engines": ["tidesdb", "tidesdb,rocksdb", "sqlite", "mariadb-innodb", "oracle", "-tidesdb", "", ","],
    "--allocators": ["glibc", "glibc,jemalloc", "jemalloc+MALLOC_CONF=narenas:2", "x=/nonexistent.so", "-glibc",
                     "jemalloc+FOO=1", "glibc+MALLOC_ARENA_MAX=-2", "mimalloc@link", ""],
    "--workloads": ["write", "read,write", "churn_small", "oltp_read_only", "tpcc", "nope", "-write"],
    "--client": ["sysbench", "native", "-native", "hammer"],
    "--threads": ["1", "1,4", "0", "-1", "x", "1,,2"],
    "--batch": ["1", "100", "-5", "0"],
    "--runs": ["1", "3", "0", "-2", "x"],
    "--duration": ["5s", "1m", "-5s", "0", "x", "--5"],
    "--ops": ["1000", "-1", "0", "x"],
    "--warmup": ["1s", "-1s", "x"],
    "--slice": ["500ms", "0", "-1s", "x", "1h"],
    "--budget": ["10m", "-5m", "0", "x", "1e999"],
    "--margin": ["2", "-3", "x", "200"],
    "--target-ci": ["2", "-1", "0"],
    "--max-rounds": ["5", "-1", "0"],
    "--warehouses": ["1", "-1", "0"],
    "--loaders": ["1", "-1"],
    "--rampup": ["1s", "-1s"],
    "--seed": ["1", "-1", "x"],
    "--baseline": ["glibc", "jemalloc", "-glibc", "nope"],
    "--name": ["x", "-x", "../x", ""],
    "--server-cpus": ["0", "0-1", "-1", "99", "x"],
    "--client-cpus": ["1", "-1"],
    "--server-memory": ["1GiB", "-1GiB", "x"],
    "--out": ["{tmp}/new", "/proc/alloclab-fuzz", "{tmp}/a-file/x", "{tmp}/a-file", "-out", "{tmp}/old"],
    "--plan": ["{tmp}/plan.toml", "{tmp}/missing.toml", "-plan", "/proc/self/status"],
    "--resume": ["{tmp}/old", "{tmp}/missing", "/proc/alloclab", "-r"],
}
BOOLS = ["--quiet", "--profile", "--no-profile"]

argvs = st.lists(st.one_of(
    st.sampled_from(sorted(FLAGS)).flatmap(lambda f: st.sampled_from(FLAGS[f]).map(lambda v: [f, v])),
    st.sampled_from(BOOLS).map(lambda b: [b]),
    st.sampled_from(["-5s", "--", "-", "--bogus", "x"]).map(lambda t: [t]),
), max_size=6).map(lambda parts: [t for p in parts for t in p])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argvs)
def test_any_command_line_starts_the_study_or_exits_2_with_a_sentence(no_work, capsys, tmp_path, argv):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "old").mkdir(exist_ok=True)
    (tmp_path / "plan.toml").write_text('engines = ["sqlite"]\n[[workloads]]\nworkload = "write"\nops = 100\n')
    argv = [a.format(tmp=tmp_path) for a in argv]
    before = sorted(p.name for p in tmp_path.iterdir())
    rc, err = run_cli(["run", *argv], capsys)
    assert "Traceback" not in err
    assert rc in ("started", 2), (argv, rc, err)
    if rc == 2:
        assert "error" in err and err.strip(), argv
        assert sorted(p.name for p in tmp_path.iterdir()) == before, argv  # nothing made


def test_a_window_longer_than_the_budget_is_refused_before_any_folder(tmp_path, capsys):
    out = tmp_path / "res"
    rc, err = run_cli(["run", "--duration", "99999999999s", "--out", str(out)], capsys)
    assert rc == 2 and "does not fit the study's budget" in err and "--duration" in err
    assert not out.exists()
