"""Driver events round-trip through the Python parser, with the schema version checked."""

import json
import subprocess

import pytest

from alloclab.core import events
from alloclab.core.errors import AlloclabError
from alloclab.core.events import SCHEMA_VERSION


def run_driver(driver_exe, tmp_path, *args):
    out = tmp_path / "events.jsonl"
    cmd = [str(driver_exe), "run", "--db-path", str(tmp_path / "db"), "--events", str(out), *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return p, out


def test_info_reports_schema_and_engines(driver_exe):
    info = json.loads(subprocess.run([str(driver_exe), "info"], capture_output=True, text=True, check=True).stdout)
    assert info["event_schema"] == SCHEMA_VERSION
    assert {"tidesdb", "rocksdb", "sqlite", "null"} <= set(info["engines"])
    assert info["engines"]["tidesdb"].startswith("10.")


@pytest.mark.parametrize("engine", ["tidesdb", "rocksdb", "sqlite"])
def test_real_engine_events_round_trip(engine, driver_exe, tmp_path):
    p, out = run_driver(driver_exe, tmp_path, "--engine", engine, "--workload", "mixed", "--threads", "3",
                        "--batch", "10", "--ops", "6000", "--interval-ms", "50", "--warmup-s", "0.1")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "", "events must never go to stdout"
    evs = list(events.parse_lines(out.read_text().splitlines()))
    kinds = [e.type for e in evs]
    assert kinds[0] == "start" and kinds[-1] == "end" and "summary" in kinds
    phases = [(e.data["phase"], e.data["state"]) for e in evs if e.type == "phase"]
    assert ("populate", "begin") in phases and ("warmup", "end") in phases
    # warm-up precedes measurement and is not counted in it
    assert phases.index(("warmup", "end")) < phases.index(("measure", "begin"))
    summary = next(e.data for e in evs if e.type == "summary")
    assert summary["total_ops"] == 6000 and summary["warmup_ops"] > 0
    assert set(summary["ops"]) == {"put", "get"}
    # each op's encoded histogram decodes to its own count and percentiles
    for op in summary["ops"].values():
        h = events.decode_histogram(op["hist"])
        assert h.get_total_count() == op["calls"] - op["errors"]
        pct = events.percentiles_ns(h)
        for k in ("p50_ns", "p95_ns", "p99_ns", "p999_ns", "max_ns"):
            assert pct[k] == op[k], k
    merged = events.merged_histogram(summary)
    assert merged.get_total_count() == sum(op["calls"] for op in summary["ops"].values())
    # the intervals add up to the summary
    counted = sum(o["ops"] for e in evs if e.type == "interval" for o in e.data["ops"].values())
    assert counted == summary["total_ops"]


def test_other_schema_versions_are_refused():
    line = json.dumps({"v": SCHEMA_VERSION + 1, "type": "start", "t_s": 0})
    with pytest.raises(AlloclabError, match="schema version"):
        events.parse_line(line)
    with pytest.raises(AlloclabError, match="unknown driver event type"):
        events.parse_line(json.dumps({"v": SCHEMA_VERSION, "type": "gossip"}))
    with pytest.raises(AlloclabError, match="malformed"):
        events.parse_line("{not json")


def test_driver_refuses_stdio_as_event_channel(driver_exe, tmp_path):
    p = subprocess.run([str(driver_exe), "run", "--engine", "null", "--db-path", str(tmp_path), "--events-fd", "1"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "channel of their own" in p.stderr


def test_duration_mode_and_bad_flags(driver_exe, tmp_path):
    p, out = run_driver(driver_exe, tmp_path, "--engine", "null", "--null-latency-ns", "20000", "--threads", "2",
                        "--duration-s", "0.5", "--interval-ms", "100")
    assert p.returncode == 0, p.stderr
    evs = list(events.parse_lines(out.read_text().splitlines()))
    summary = next(e.data for e in evs if e.type == "summary")
    assert 0.45 < summary["duration_s"] < 1.0
    assert sum(e.type == "interval" for e in evs) >= 4
    p, _ = run_driver(driver_exe, tmp_path, "--engine", "null", "--threads", "0")
    assert p.returncode != 0 and "--threads" in p.stderr


def test_driver_info_lists_every_workload_it_runs(driver_exe):
    from alloclab.clients import driver
    info = driver.info(str(driver_exe))
    assert {"write", "read", "mixed", "delete", "seek", "range", "tpcc", "oltp_point_select", "oltp_read_only",
            "oltp_read_write"} <= set(info["workloads"])


def test_the_gate_answers_full_once_the_turns_add_up_to_the_window(driver_exe, tmp_path):
    """--gate: `ready` after the warm-up, `paused` after a turn while the window is not measured,
    `full` once the turns add up to --duration-s (a turn that ran long ends the run's turns
    early), and `end` then finishes it with the window it measured."""
    p, evs = _gated(driver_exe, tmp_path, 0.5, "go 100\ngo 450\nend\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["ready", "paused", "full"]
    summary = next(e.data for e in evs if e.type == "summary")
    assert 0.55 <= summary["duration_s"] < 0.8


def _gated(driver_exe, tmp_path, window_s: float, said: str):
    """A gated run of the null engine (2 threads, 20 µs a call: at most 100,000 calls a second)
    told `said` on its stdin: the process and its events."""
    out = tmp_path / "events.jsonl"
    out.unlink(missing_ok=True)
    cmd = [str(driver_exe), "run", "--db-path", str(tmp_path / "db"), "--events", str(out), "--engine", "null",
           "--null-latency-ns", "20000", "--threads", "2", "--duration-s", str(window_s), "--gate"]
    p = subprocess.run(cmd, input=said, capture_output=True, text=True, timeout=60)
    return p, (list(events.parse_lines(out.read_text().splitlines())) if out.exists() else [])


def test_a_turns_warm_up_works_unmeasured_before_its_turn_is_timed(driver_exe, tmp_path):
    """`go MS W`: W milliseconds of work that no interval counts (the caches the others' turns
    took are the process's again), then a turn timed as `go MS` times it: each turn's interval
    measures its MS alone, and the warm-up's operations are in no interval."""
    p, evs = _gated(driver_exe, tmp_path, 0.4, "go 200 300\ngo 200\nend\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["ready", "paused", "full"]
    turns = [e.data for e in evs if e.type == "interval" and e.data.get("phase") == "measure"]
    assert len(turns) == 2
    # each interval's time is its turn's 200 ms (and the workers' last calls), never the 300 ms before it
    assert 0.2 <= turns[0]["elapsed_s"] < 0.3 and 0.4 <= turns[1]["elapsed_s"] < 0.55, turns
    # and its calls are its turn's: about as many as the next turn's, which had no warm-up (with the
    # warm-up's they would be 2.5 times as many)
    calls = [sum(o["ops"] for o in t["ops"].values()) for t in turns]
    assert 0 < calls[0] < 1.5 * calls[1], calls
    summary = next(e.data for e in evs if e.type == "summary")
    assert 0.4 <= summary["duration_s"] < 0.55
    p, _ = _gated(driver_exe, tmp_path, 0.4, "go 200 x\n")
    assert p.returncode != 0 and "whole milliseconds" in p.stderr
