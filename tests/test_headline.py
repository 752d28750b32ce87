"""The answers read: a headline of one sentence (what is decided and where it holds, at most 35
words for the default study), the stopping rule on the line under it, each cell's answers under
its name once, and the quiet-host ratio beside a comparison that depends on the host's state."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np

from alloclab.answers import analyse, sentences
from alloclab.report import build

REPLICATION = Path(__file__).parent / "fixtures" / "replication"
MAX_WORDS = 35


def test_the_default_studys_headline_is_one_short_sentence_that_names_the_machine():
    for name in ("machine-a", "machine-b"):  # two real default studies (kv-allocators, quick)
        study = analyse.load(REPLICATION / name)
        ans = sentences.build(study)
        words = ans.headline.split()
        assert len(words) <= MAX_WORDS, (len(words), ans.headline)
        m = study.machine
        assert m["cpu_model"] in ans.headline and f"{m['cores']} cores" in ans.headline
        assert f"kernel {m['kernel']}" in ans.headline and "in turns of 0.5 s" in ans.headline
        assert ans.headline.count(".") >= 1 and ans.headline.startswith("3 of 3 decided on throughput vs glibc: ")
        for v in ans.verdicts:
            if v.metric == "throughput":
                assert f"{v.variant} " in ans.headline and v.verdict in ans.headline
        # the stopping rule and the looks: the line under it, not the headline
        assert "stopped" not in ans.headline and "round" not in ans.headline
        assert ans.subline.startswith("After ") and "stopped: the " in ans.subline
        assert "versions under Environment" in ans.subline


def test_each_cell_is_named_once_with_its_answers_under_it():
    ans = sentences.build(analyse.load(REPLICATION / "machine-b"))
    md = sentences.to_markdown(ans)
    cell = "tidesdb read_random (read random k16 v100 b1, 2 threads)"
    assert md.count(cell) == 1
    lines = md.splitlines()
    i = lines.index(f"- {cell}")
    assert lines[i + 1].startswith("  - throughput vs glibc: tcmalloc −8.6 %")
    assert lines[i + 2].startswith("  - peak RSS vs glibc: ") and lines[i + 3].startswith("  - fastest: jemalloc")
    # every fact of the flat lines is kept (verdicts.json's answers)
    assert any(x.startswith(f"{cell}, throughput vs glibc") for x in ans.lines)


def test_a_comparison_that_depends_on_the_host_gives_its_quiet_host_ratio(tmp_path):
    """machine-b's tcmalloc depends on the host's state (slope +0.21 [+0.09, +0.33] on the other
    runs' speed): its answer line gives the ratio at the quiet state with its interval, says which
    the verdict uses, and its forest plot row is marked; machine-a's are not."""
    b = sentences.build(analyse.load(REPLICATION / "machine-b"))
    line = next(x for _label, items in b.groups for x in items if x.startswith("throughput vs glibc"))
    tc = line.split(";")[0]
    assert "tcmalloc −8.6 % [−15.9, −0.7] slower (on a quiet host −3.8 % [−8.1, +0.6], the verdict uses the " \
           "average)" == tc.split(": ", 1)[1]
    assert [m for m in b.marks.values()] == [("depends", "drifted")]
    a = sentences.build(analyse.load(REPLICATION / "machine-a"))
    assert "quiet host" not in sentences.to_markdown(a) and not a.marks
    # the report: the one short table, the marks on the forest plot's row and its caption
    out = tmp_path / "machine-b"
    shutil.copytree(REPLICATION / "machine-b", out)
    md = build(out).read_text()
    assert "## Dependence on the host's state" in md
    table = (out / "report" / "tables" / "dependence.csv").read_text().splitlines()
    assert len(table) == 2 and table[1].split(",")[1:3] == ["tcmalloc", "glibc"]
    assert "◆: the ratio depends on the host's load" in md


def test_a_planted_slope_gives_a_quiet_ratio_that_holds_the_planted_value(tmp_path):
    """Stored rows with a planted dependence: jemalloc's log ratio to glibc falls by 0.15 per core of
    other processes' busy share; the answer's quiet-host ratio holds the planted value there."""
    from tests.test_quiet_host import _busy_rows  # the planted rows, built once
    rows, busy = _busy_rows(np.random.default_rng(11), rounds=14, beta=-0.15, base_log=0.01)
    study = analyse.Study(root=tmp_path, rows=rows, plan={"allocators": [{"name": "glibc"}, {"name": "jemalloc"}],
                                                          "engines": ["tidesdb"], "baseline": "glibc", "runs": 14},
                          machine={"cpu_model": "Test CPU", "cores": 2, "kernel": "6.1"})
    ans = sentences.build(study)
    text = sentences.to_markdown(ans)
    assert "on a quiet host" in text
    f = study.findings()[0]
    planted = math.exp(0.01 - 0.15 * f.quiet.state_value)
    assert f.quiet.ci_low < planted < f.quiet.ci_high
    shown = f"on a quiet host {sentences._signed(f.quiet.delta_pct)} %"
    assert shown in text
