"""bench/rounds_curve.py on a stored study of the real driver (null engine: this tests the harness):
a single look after the study's last round says what the study itself said."""

from collections import Counter

from conftest import need
from helpers import bench
from test_rounds import alloclab, write_plan

from alloclab.answers import analyse
from alloclab.plan.design import UNDECIDED


def test_the_last_rounds_single_look_is_what_the_study_answered(tmp_path, found):
    need(found, "jemalloc")
    out = tmp_path / "res"
    p = alloclab("run", "--plan", str(write_plan(tmp_path)), "--runs", "4", "--out", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    names, curve, every = bench("rounds_curve").curve(out)
    assert [k for k, _took, _got in curve] == [2, 3, 4]
    assert all(a[1] < b[1] for a, b in zip(curve, curve[1:]))  # the time by each round's end grows
    study = [v for v in analyse.load(out).verdicts() if v.comparison == "allocators" and v.metric in names]
    said = Counter(v.metric for v in study if v.verdict != UNDECIDED)
    assert curve[-1][2] == {m: (said[m], sum(1 for v in study if v.metric == m)) for m in names}
    assert [(v.metric, v.verdict, v.ratio) for v in every[4]] == [(v.metric, v.verdict, v.ratio) for v in study]
