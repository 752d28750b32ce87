"""Two or more folders of one plan: what to expect on a new machine (random-effects pooling, τ and
a prediction interval) over 2, 3 and many studies, τ = 0, the real default-study folders from two
machines of one kind (tests/fixtures/replication, runs.csv, rounds.json, machine.json and
plan.json only), the before/after of two folders by decide's rule, the order of the machines'
differences, and `alloclab verify` of a folder that is not a results folder."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from alloclab import cli
from alloclab.answers import analyse, compare, metrics, replicate, stats
from alloclab.answers.decide import Verdict
from alloclab.plan.design import Design

FIXTURES = Path(__file__).parent / "fixtures"
REAL = FIXTURES / "replication"
V1 = FIXTURES / "study-v1"
Z = sps.norm.ppf(0.975)


def verdict(ratio: float, se: float, metric: str = "throughput", variant: str = "jemalloc", df: int = 29) -> Verdict:
    """A study's verdict with this mean log ratio and standard error (the rest as a study makes it)."""
    m = math.log(ratio)
    return Verdict("allocators", "tidesdb", "read_random", 2, "k16 v100", metric, "glibc", variant, df + 1, df + 1,
                   df + 1, ratio, math.exp(m - 2 * se), math.exp(m + 2 * se), "undecided", None, 0.95, variant,
                   ("c", "glibc"), ("c", variant), mean_log=m, se_log=se, df=df)


def dl(means, ses):
    """DerSimonian–Laird written out once more, with numpy, for the tests."""
    y, v = np.asarray(means), np.asarray(ses) ** 2
    w = 1 / v
    q = float(np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2))
    tau2 = max(0.0, (q - (len(y) - 1)) / (np.sum(w) - np.sum(w ** 2) / np.sum(w)))
    ws = 1 / (v + tau2)
    return float(np.sum(ws * y) / np.sum(ws)), float(np.sqrt(1 / np.sum(ws))), tau2


# --- the pooled ratio, τ and the prediction interval ---------------------------------------


def test_three_or_more_studies_give_higgins_prediction_interval():
    ratios, ses = [1.04, 0.99, 1.08, 1.01, 0.95], [0.01, 0.015, 0.012, 0.02, 0.01]
    for k in (3, 5):
        p = replicate.predict([verdict(r, s) for r, s in zip(ratios[:k], ses[:k])], margin=0.04)
        mu, se, tau2 = dl([math.log(r) for r in ratios[:k]], ses[:k])
        assert p.k == k and p.df == k - 2 and p.rule == ""
        assert p.ratio == pytest.approx(math.exp(mu))
        assert (p.ci_low, p.ci_high) == pytest.approx((math.exp(mu - Z * se), math.exp(mu + Z * se)))
        assert p.tau == pytest.approx(math.sqrt(tau2)) and p.tau > 0.02  # they differ more than their noise says
        half = sps.t.ppf(0.975, k - 2) * math.sqrt(tau2 + se ** 2)
        assert (p.pi_low, p.pi_high) == pytest.approx((math.exp(mu - half), math.exp(mu + half)))
        assert p.pi_low < p.ci_low and p.pi_high > p.ci_high
        assert p.outcome == replicate.NOT_KNOWN  # the machines scatter around 1 by more than the margin


def test_two_studies_say_the_interval_is_wide_and_by_which_rule():
    p = replicate.predict([verdict(1.00, 0.01), verdict(1.045, 0.012)], margin=0.04)
    mu, se, tau2 = dl([0.0, math.log(1.045)], [0.01, 0.012])
    assert p.k == 2 and p.df == 1 and p.rule == replicate.RULE_K2 and "wide because 2 machines" in p.rule
    half = sps.t.ppf(0.975, 1) * math.sqrt(tau2 + se ** 2)
    assert (p.pi_low, p.pi_high) == pytest.approx((math.exp(mu - half), math.exp(mu + half)))
    assert p.pi_high / p.pi_low > 1.2 and p.outcome == replicate.NOT_KNOWN
    # a study without an interval is left out; with fewer than 2 there is nothing to pool
    assert replicate.predict([verdict(1.0, 0.01), None]) is None
    assert replicate.predict([verdict(1.0, 0.01), replace(verdict(1.0, 0.01), se_log=None)]) is None


def test_identical_machines_give_tau_zero_and_the_pooled_interval():
    """τ = 0: the prediction interval is the pooled interval but for t(k − 2) in place of z, and
    so close to it once there are many machines."""
    p3 = replicate.predict([verdict(1.20, 0.01)] * 3, margin=0.02)
    assert p3.tau == 0 and p3.ratio == pytest.approx(1.20)
    ratio_of_widths = math.log(p3.pi_high / p3.pi_low) / math.log(p3.ci_high / p3.ci_low)
    assert ratio_of_widths == pytest.approx(sps.t.ppf(0.975, 1) / Z)
    assert p3.outcome == "faster"
    many = replicate.predict([verdict(1.05, 0.01)] * 30, margin=0.02)
    assert many.tau == 0
    assert many.pi_low == pytest.approx(many.ci_low, rel=0.002) and many.pi_high == pytest.approx(many.ci_high,
                                                                                                    rel=0.002)
    # machines that differ by less than their own noise: τ is 0 too
    close = replicate.predict([verdict(r, 0.02) for r in (1.0, 1.01, 0.995, 1.005)], margin=0.05)
    assert close.tau == 0 and close.outcome == "equivalent"


def test_verdict_words_follow_the_metric():
    up = replicate.predict([verdict(1.5, 0.01, "peak_rss")] * 4)
    assert up.outcome == "higher"
    down = replicate.predict([verdict(0.8, 0.01)] * 4)
    assert down.outcome == "slower"


def test_a_share_given_back_replicates_and_predicts_in_points_at_its_own_margin():
    """Given back is a difference in points (its "ratio" is exp(difference)): 60 and 62 points more
    than glibc replicate within its ±5 points (as a ratio at the study's ±2 % they would not), and
    over four machines the prediction is "higher", never "faster"."""
    a, b = verdict(math.exp(0.60), 0.01, "given_back"), verdict(math.exp(0.62), 0.01, "given_back")
    rr = replicate.ratio_of_ratios(a, b, margin=0.02)
    assert rr.outcome == "replicates" and metrics.delta("given_back", rr.ratio) == pytest.approx(2.0)
    assert replicate.ratio_of_ratios(verdict(1.60, 0.01), verdict(1.60 * math.exp(0.02), 0.01), 0.02).outcome \
        != "replicates"
    assert replicate.predict([a, b] * 2).outcome == "higher"
    same = replicate.predict([verdict(math.exp(0.01), 0.005, "given_back")] * 4)
    assert same.outcome == "equivalent"  # within ±5 points, though exp(0.01 ± ...) is not within ±2 %


def test_new_machine_pools_each_comparison_the_studies_share():
    a = [verdict(1.0, 0.01), verdict(0.9, 0.01, variant="tcmalloc")]
    b = [verdict(1.04, 0.01), verdict(0.91, 0.01, variant="tcmalloc")]
    c = [verdict(1.02, 0.01)]
    preds = replicate.new_machine([a, b, c])
    assert [(p.key[-1], p.k) for p in preds] == [("jemalloc", 3), ("tcmalloc", 2)]


# --- the real folders from two machines of one kind ----------------------------------------


@pytest.fixture
def real(tmp_path):
    out = {}
    for name in ("machine-a", "machine-b"):
        shutil.copytree(REAL / name, tmp_path / name)
        out[name] = tmp_path / name
    return out


def _third(src: Path, dst: Path, kernel: str) -> Path:
    shutil.copytree(src, dst)
    m = json.loads((dst / "machine.json").read_text())
    (dst / "machine.json").write_text(json.dumps({**m, "kernel": kernel}))
    return dst


def test_two_real_folders_without_runs_folders(real):
    assert not (real["machine-a"] / "runs").exists()  # runs.csv, rounds.json, machine.json, plan.json only
    studies = [analyse.load(real["machine-a"]), analyse.load(real["machine-b"])]
    lines, t = compare.new_machine_of(studies)
    assert lines[0].startswith("What to expect, throughput (95 % prediction interval; verdict within ±4 %)")
    assert len(lines) == 4 and all(x.startswith("- on a new machine of this kind: ") for x in lines[1:])
    assert all("(2 machines, τ " in x and "wide with few machines" in x for x in lines[1:])
    assert len(t.rows) == 9 and {r[8] for r in t.raw} == {2}  # 3 allocators x 3 metrics, k = 2 each
    assert replicate.RULE_K2 in t.note
    raw = {(r[0], r[7]): r for r in t.raw}
    va = {(v.metric, v.variant): v for v in studies[0].verdicts()}
    vb = {(v.metric, v.variant): v for v in studies[1].verdicts()}
    for k, r in raw.items():
        mu, se, tau2 = dl([va[k].mean_log, vb[k].mean_log], [va[k].se_log, vb[k].se_log])
        assert r[9] == pytest.approx(math.exp(mu)) and r[12] == pytest.approx(math.sqrt(tau2))
        assert r[13] <= min(va[k].ratio, vb[k].ratio) and r[14] >= max(va[k].ratio, vb[k].ratio)
    # jemalloc: equivalent on one machine, faster on the other: not known on a new one
    jem = raw[("throughput", "jemalloc")]
    assert jem[12] > 0.01 and jem[-1] == replicate.NOT_KNOWN and jem[13] < 1 < jem[14]
    # peak RSS of tcmalloc is about +90 % on both: higher on a new machine too, even at k = 2
    assert raw[("peak_rss", "tcmalloc")][-1] == "higher"


def test_three_real_folders(real, tmp_path):
    c = _third(real["machine-a"], tmp_path / "machine-c", "6.18.44-fc-v999")
    studies = [analyse.load(p) for p in (real["machine-a"], real["machine-b"], c)]
    _lines, t = compare.new_machine_of(studies)
    assert {r[8] for r in t.raw} == {3} and {r[15] for r in t.raw} == {1}  # t with k - 2 = 1 df
    assert replicate.RULE_K2 not in t.note and "(Higgins et al. 2009)" in t.note


def test_the_same_folder_three_times_has_tau_zero(real, tmp_path):
    copies = [_third(real["machine-a"], tmp_path / f"copy{i}", "6.18.44-fc-v782") for i in range(2)]
    studies = [analyse.load(p) for p in (real["machine-a"], *copies)]
    lines, t = compare.new_machine_of(studies)
    assert "in another study on this machine" in lines[1] and "comparisons of 3 studies" in lines[-1]
    for r in t.raw:
        assert r[12] == 0  # τ
        ci, pi = math.log(r[11] / r[10]), math.log(r[14] / r[13])
        assert pi / ci == pytest.approx(sps.t.ppf(0.975, 1) / Z)  # the pooled interval, t(1) in place of z


def test_compare_of_the_real_folders_prints_a_prediction_per_comparison(real, capsys):
    rc = cli.main(["compare", str(real["machine-a"]), str(real["machine-b"])])
    out = capsys.readouterr().out
    assert rc == 0
    # the machines' differences, the values in the order of the names
    assert "- machine-a vs machine-b: machine kernel: '6.18.44-fc-v782' vs '6.18.44-fc-v657'" in out
    assert "## What to expect on a new machine of this kind: machine-a, machine-b" in out
    assert out.count("- on a new machine of this kind: ") == 3
    assert "(t, 1 df: k = 2)" in out and "before (" not in out
    rc = cli.main(["replicate", str(real["machine-a"]), str(real["machine-b"])])
    assert rc == 0 and "## What to expect on a new machine" in capsys.readouterr().out


def test_agreement_counts_how_the_folders_verdicts_agree_per_metric(real, tmp_path):
    a, b = analyse.load(real["machine-a"]), analyse.load(real["machine-b"])
    lines = compare.agreement([a, b])
    by = {m: next(x for x in lines if x.startswith(f"Verdicts on {metrics.words(m)} in "))
          for m in ("throughput", "p99_latency", "peak_rss")}
    assert len(lines) == 3
    for m, x in by.items():
        va = {v.variant: v.verdict for v in a.verdicts() if v.metric == m}
        vb = {v.variant: v.verdict for v in b.verdicts() if v.metric == m}
        same = sum(va[k] == vb[k] != "undecided" for k in va)
        assert x.startswith(f"Verdicts on {metrics.words(m)} in machine-a and machine-b: {same} of 3 the same and "
                            "decided, "), x
    # jemalloc's throughput: equivalent on one, faster on the other: decided in both, not the same, not opposite
    # (and not "decided in some only")
    va = {v.variant: v.verdict for v in a.verdicts() if v.metric == "throughput"}
    vb = {v.variant: v.verdict for v in b.verdicts() if v.metric == "throughput"}
    assert {va["jemalloc"], vb["jemalloc"]} == {"equivalent", "faster"}
    some = sum(len({va[k], vb[k]}) == 2 and "undecided" in {va[k], vb[k]} for k in va)
    apart = sum(len({va[k], vb[k]}) == 2 and "undecided" not in {va[k], vb[k]} for k in va)
    assert apart >= 1 and (f"{some} decided in some only" in by["throughput"] and f"0 opposite, {apart} decided in "
                           "all but a direction in some and equivalent in others" in by["throughput"]), by["throughput"]
    copy = _third(real["machine-a"], tmp_path / "copy", "6.18.44-fc-v782")
    same = next(x for x in compare.agreement([a, analyse.load(copy)]) if x.startswith("Verdicts on throughput"))
    decided = sum(v.verdict != "undecided" for v in a.verdicts() if v.metric == "throughput")
    assert same.startswith(f"Verdicts on throughput in machine-a and copy: {decided} of 3 the same and decided, "
                              f"0 decided in some only, {3 - decided} undecided in all, 0 opposite, 0 decided in all "
                              "but a direction in some and equivalent in others; 0 ratio(s)")


def test_machine_differences_follow_the_order_of_the_names(real):
    a, b = analyse.load(real["machine-a"]), analyse.load(real["machine-b"])
    assert a.machine["kernel"].endswith("v782") and b.machine["kernel"].endswith("v657")
    d = compare.machine_differences([a, b])
    assert "machine-a vs machine-b: machine kernel: '6.18.44-fc-v782' vs '6.18.44-fc-v657'" in d
    d = compare.machine_differences([b, a])
    assert "machine-b vs machine-a: machine kernel: '6.18.44-fc-v657' vs '6.18.44-fc-v782'" in d


# --- before/after: decide's rule -----------------------------------------------------------


def test_there_is_one_comparison_rule():
    assert not hasattr(stats, "compare")


def test_before_after_is_decides_rule_on_runs_that_do_not_pair(real, tmp_path):
    import csv
    import io
    after = tmp_path / "after"
    shutil.copytree(real["machine-a"], after)
    rows = list(csv.DictReader(io.StringIO((after / "runs.csv").read_text())))
    for r in rows:  # every jemalloc run 10 % faster
        if r["allocator"] == "jemalloc":
            r["ops_per_s"] = repr(float(r["ops_per_s"]) * 1.1)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (after / "runs.csv").write_text(buf.getvalue())
    a, b = analyse.load(real["machine-a"]), analyse.load(after)
    thr = compare.before_after(a, b)[0]
    raw = {r[3]: r for r in thr.raw}
    assert raw["glibc"][6] == pytest.approx(1.0) and raw["jemalloc"][6] == pytest.approx(1.1)
    assert raw["glibc"][9] in ("equivalent", "undecided")
    # the same numbers as decide's rule on the two folders' runs, none of them paired, at 95 %
    ga = analyse.by_cell_rounds(a.valid(), "ops_per_s")
    gb = analyse.by_cell_rounds(b.valid(), "ops_per_s")
    cell = next(iter(ga))
    iv = stats.ratio_interval({("a", k): v for k, v in ga[cell]["jemalloc"].items()},
                              {("b", k): v for k, v in gb[cell]["jemalloc"].items()})
    assert not iv.paired and iv.confidence == 0.95
    assert (raw["jemalloc"][7], raw["jemalloc"][8]) == pytest.approx((iv.ci_low, iv.ci_high))
    assert raw["jemalloc"][9] == stats.verdict_word(iv.ci_low, iv.ci_high, True, a.design.margin)
    assert "share no round" in thr.note
    # the machines differ: refused unless forced
    with pytest.raises(Exception, match="differ in machine"):
        compare.before_after(a, analyse.load(real["machine-b"]))


def test_between_folders_never_pairs_rounds():
    before = {(1, ""): 100.0, (2, ""): 200.0, (3, ""): 300.0}
    after = {(1, ""): 110.0, (2, ""): 220.0, (3, ""): 330.0}  # paired, these would say exactly +10 %
    iv, word = replicate.between_folders(before, after, True, Design(margin=0.02))
    assert not iv.paired and iv.n_pairs == 0 and iv.ci_low < 1 < iv.ci_high and word == "undecided"


# --- verify of a folder that is not a results folder ---------------------------------------


def test_verify_refuses_a_folder_that_is_not_a_results_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["verify", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'empty'} is not a results folder" in err and "MANIFEST.sha256" in err
    assert "problem(s)" not in err and "Traceback" not in err
    assert cli.main(["verify", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_verify_still_names_the_problems_of_a_results_folder(tmp_path, capsys):
    shutil.copytree(V1, tmp_path / "v1")
    assert cli.main(["verify", str(tmp_path / "v1")]) == 0
    (tmp_path / "v1" / "MANIFEST.sha256").unlink()
    assert cli.main(["verify", str(tmp_path / "v1")]) == 1
    assert "1 problem(s) against MANIFEST.sha256" in capsys.readouterr().err


# --- three machines or more: τ shared by a metric's comparisons, calibrated by leaving one out --


def test_the_three_machines_predict_with_a_shared_tau_and_say_its_calibration():
    """machine-a, -b and -c of the replication store: each comparison alone has t with 1 degree of
    freedom (12.7) and a range of ±45 %; τ shared by the three throughput comparisons has 5 (2.57),
    and each machine left out in turn falls inside the other two's intervals."""
    studies = [analyse.load(REAL.parent.parent.parent / "bench" / "data" / "replication" / m)
               for m in ("machine-a", "machine-b", "machine-c")]
    sh = replicate.shared([s.verdicts() for s in studies], "throughput", 0.04)
    assert sh.df == 5 and len(sh.preds) == 3 and sh.usable and sh.loo_total == 9
    assert 0.01 < sh.tau < 0.04 and sh.loo_inside >= 8
    alone = {p.key: p for p in replicate.new_machine([s.verdicts() for s in studies]) if p.key[0] == "throughput"}
    for p in sh.preds:  # narrower than each comparison alone, around the same pooled ratio
        assert p.pi_high / p.pi_low < alone[p.key].pi_high / alone[p.key].pi_low
        assert math.log(p.pi_high / p.ratio) <= math.log(1.08)
    lines, _t = compare.new_machine_of(studies)
    assert len(lines) == 5 and lines[-1].startswith("- (τ ") and "t with 5 degrees of freedom" in lines[-1]
    assert f"fell inside the others' intervals {sh.loo_inside} times of 9" in lines[-1]


def test_machines_that_differ_widely_get_the_reason_and_the_machines_it_would_take():
    """Three machines whose ratios spread by about 6 % give no usable interval at ±4 %: one line
    says so, with τ and how many machines a usable one would take; a spread of 40 % takes none."""
    def machines(spread):
        return [[verdict(r * math.exp(spread * d), 0.01, variant=v) for r, v in ((1.0, "jemalloc"), (0.95, "tcmalloc"))]
                for d in (-1, 0, 1)]
    sh = replicate.shared(machines(0.03), "throughput", 0.04)
    assert not sh.usable and sh.needed and sh.needed > 3
    (line,) = replicate.shared_sentences(sh)
    assert line.startswith("on a new machine of this kind: no usable interval from 3 machines (τ ")
    assert f"about {sh.needed} machines would make it ±8 %" in line and "calibration: " in line
    # the half-width it gives, to a tenth: one just over the limit must not read as the limit itself
    gives = float(line.split("gives ±")[1].split(" %")[0])
    assert gives > 8.0 and f"{gives:.1f}" == line.split("gives ±")[1].split(" %")[0], line
    wide = replicate.shared(machines(0.2), "throughput", 0.04)
    assert wide.needed is None and "no number of machines would" in replicate.shared_sentences(wide)[0]


def test_a_sitting_after_alloclab_changed_is_named_by_its_machine_and_alloclab():
    """A study resumed after alloclab changed runs on the same machine under another fingerprint
    (host.machine.fingerprint holds the commit): the report names each sitting's machine and the
    alloclab it ran, where it said only "2 machines that differ (27855c287650; 431848e8307c)"; the
    first sitting of a study from before sittings recorded theirs is the study's machine.json."""
    from alloclab.answers.analyse import Study
    from alloclab.host.machine import fingerprint
    first = {"cpu_model": "AMD EPYC", "cores": 2, "kernel": "6.18.44", "memory_bytes": 24 << 30, "os": "Debian 12",
             "alloclab_commit": "5ffc0bf81c67b558"}
    later = {**first, "alloclab_commit": "b3bc95d0aa11"}
    fp1, fp2 = fingerprint(first), fingerprint(later)
    assert fp1 != fp2
    s = Study(Path("."), [], {}, first, {"sittings": [{"started_at": "a", "budget_s": 3600},
                                                      {"started_at": "b", "budget_s": 4440,
                                                       "machine_fingerprint": fp2, "machine": later}]})
    assert s.machine_words(fp1) == f"AMD EPYC, 2 cores, kernel 6.18.44, alloclab 5ffc0bf ({fp1})"
    assert s.machine_words(fp2) == f"AMD EPYC, 2 cores, kernel 6.18.44, alloclab b3bc95d ({fp2})"
    assert s.machine_words("0123456789ab") == "0123456789ab"  # nothing known of it
