"""Reports rebuilt from stored files: snapshot of tables from a folder checked in from an earlier
version, the self-contained HTML in a real headless Chromium, compare and bundle."""

import hashlib
import json
import math
import shutil
import zipfile
from pathlib import Path

import pytest

from alloclab import report
from alloclab.answers import analyse, compare
from alloclab.core.errors import AlloclabError
from alloclab.results.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
V1 = FIXTURES / "study-v1"


@pytest.fixture
def v1(tmp_path):
    dst = tmp_path / "study-v1"
    shutil.copytree(V1, dst)
    return dst


def test_fixture_folder_still_verifies(v1):
    assert Store(v1).verify() == []


def test_old_folder_keeps_producing_the_same_tables(v1):
    md = report.build(v1)
    snap = FIXTURES / "study-v1.tables"
    names = sorted(p.name for p in snap.iterdir())
    assert names == sorted(p.name for p in (md.parent / "tables").iterdir())
    for name in names:
        assert same_table((md.parent / "tables" / name).read_text(), (snap / name).read_text()), name


def same_table(got: str, want: str) -> bool:
    """The same cells; numbers equal to 1e-9 relative (a new scipy or numpy moves the last
    digits of an interval, never a figure anyone reads)."""
    a, b = got.splitlines(), want.splitlines()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        cx, cy = x.split(","), y.split(",")
        if len(cx) != len(cy):
            return False
        for u, v in zip(cx, cy):
            if u == v:
                continue
            try:
                if not math.isclose(float(u), float(v), rel_tol=1e-9, abs_tol=1e-12):
                    return False
            except ValueError:
                return False
    return True


def test_report_holds_the_study_shapes_and_blocks(v1):
    text = report.build(v1).read_text()
    assert text.splitlines()[2] == "## Answers"  # answers first
    assert text.index("## Answers") < text.index("charts/verdicts_throughput.png") < text.index("## Verdicts") < \
        text.index("## Charts") < text.index("## Environment")
    for needle in ("## Environment", "## Warnings", "proved in 18/18 runs", "[95% CI]", "undecided",
                   "None of 6 decided yet on throughput", "run it again without --runs",
                   "charts/verdicts_throughput.png", "## Why: each answer in full",
                   "y axis starts at 0",
                   "Thread scaling", "Engine ratios", "Best-to-worst", "charts/rss_timeline.png",
                   "PUT throughput vs threads"):
        assert needle in text, needle
    charts = v1 / "report" / "charts"
    for stem in ("put_throughput_vs_threads", "peak_rss_vs_threads", "large_value_p99", "rss_timeline"):
        assert (charts / f"{stem}.png").stat().st_size > 5000
        assert (charts / f"{stem}.svg").read_text().lstrip().startswith("<?xml")


def test_html_is_self_contained(v1):
    report.build(v1)
    page = (v1 / "report" / "report.html").read_text()
    assert "<script" not in page
    for bad in ("http://", "https://", "src=", "@import", "url("):
        # SVG namespaces and same-document references (url(#clip)) fetch nothing
        assert bad not in page.replace("http://www.w3.org/", "").replace("url(#", ""), bad


def test_html_opens_in_headless_chromium_without_errors(v1, tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.fail("chromium and chromedriver are needed: ./setup.sh test installs them")
    report.build(v1)
    url = (v1 / "report" / "report.html").resolve().as_uri()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1000"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    from selenium.webdriver.chrome.service import Service
    drv = webdriver.Chrome(service=Service(chromedriver), options=opts)
    try:
        drv.get("about:blank")
        # the first screen is a 1400 x 1000 viewport (the window's own bars not counted)
        drv.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        drv.get_log("performance")  # reading a log empties it: start clean at our page
        drv.get_log("browser")
        drv.get(url)
        assert "alloclab report" in drv.title
        # the first screen (1400 x 1000) holds the answer: the headline and the whole forest plot
        from selenium.webdriver.common.by import By
        height = drv.execute_script("return window.innerHeight")
        answer, forest = drv.find_element(By.ID, "answer").rect, drv.find_element(By.ID, "forest").rect
        assert height == 1000 and answer["y"] < forest["y"], (height, answer, forest)
        assert forest["height"] > 150 and forest["y"] + forest["height"] <= height, (forest, height)
        assert drv.find_element(By.CSS_SELECTOR, "#forest svg").rect["width"] > 600
        assert "ratio variant ÷ baseline" in drv.find_element(By.CSS_SELECTOR, "#forest figcaption").text
        shot = tmp_path / "report.png"
        drv.save_screenshot(str(shot))
        console = [e for e in drv.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        perf = [json.loads(e["message"])["message"] for e in drv.get_log("performance")]
    finally:
        drv.quit()
    assert console == [], console
    requests = [m["params"]["request"]["url"] for m in perf if m["method"] == "Network.requestWillBeSent"]
    failed = [m["params"] for m in perf if m["method"] == "Network.loadingFailed"]
    assert requests == [url], requests
    assert failed == [], failed
    # the screenshot is not blank: many distinct colours
    from PIL import Image
    img = Image.open(shot).convert("RGB")
    assert img.size[0] >= 1000
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50


def test_compare_refuses_other_machines_unless_forced(v1, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(v1, other)
    m = json.loads((other / "machine.json").read_text())
    m["cpu_model"] = "Some Other CPU"
    (other / "machine.json").write_text(json.dumps(m))
    a, b = analyse.load(v1), analyse.load(other)
    with pytest.raises(AlloclabError, match="cpu_model"):
        compare.before_after(a, b)
    tables = compare.before_after(a, b, force=True)
    thr = tables[0]
    assert len(thr.rows) == 12
    # identical data: every ratio is exactly 1 (decide's rule; runs of two folders do not pair)
    assert all(abs(r[6] - 1.0) < 1e-12 for r in thr.raw)
    assert {r[9] for r in thr.raw} <= {"undecided", "equivalent"}


def test_bundle_zips_the_folder_with_its_sha256(v1, tmp_path):
    z, digest = Store(v1).bundle(tmp_path / "b.zip")
    assert hashlib.sha256(z.read_bytes()).hexdigest() == digest
    assert (tmp_path / "b.zip.sha256").read_text() == f"{digest}  b.zip\n"
    names = zipfile.ZipFile(z).namelist()
    assert "study-v1/runs.csv" in names and "study-v1/MANIFEST.sha256" in names
    (v1 / "runs.csv").write_text("tampered\n")
    with pytest.raises(AlloclabError, match="manifest"):
        Store(v1).bundle(tmp_path / "c.zip")


def test_a_damaged_run_file_is_named_in_the_warnings(v1):
    victim = next(p for p in sorted((v1 / "runs").iterdir()))
    (victim / "run.json").write_text("{not json")
    text = report.build(v1).read_text()
    assert f"runs/{victim.name}/run.json cannot be read" in text


def test_the_answer_names_the_machine_it_holds_on(v1):
    """The headline, the forest plot's caption and verdicts.csv say where the answer holds: the
    machine in a few words and how the runs were measured; the versions are a click away."""
    import csv
    import json
    report.build(v1)
    where = "AMD EPYC, 2 cores, kernel 6.18.44-fc-v657, runs one after another"
    answers = json.loads((v1 / "report" / "verdicts.json").read_text())
    assert answers["headline"].endswith(f"; on {where}.")
    page = (v1 / "report" / "report.html").read_text()
    first = page[page.index("id='answer'"):page.index("</figure>")]  # the first screen: headline and forest plot
    assert first.count(where) == 2 and "<a href='#environment'>versions under Environment</a>" in first
    assert "<h2 id='environment'>Environment</h2>" in page and "glibc 2.36" in page[page.index("id='environment'"):]
    with open(v1 / "report" / "verdicts.csv") as f:
        fps = {r["machine_fingerprint"] for r in csv.DictReader(f)}
    assert len(fps) == 1 and len(fps.pop()) == 12
    # a study in rounds says so in its Environment (it read "None repeat(s)")
    plan = json.loads((v1 / "plan.json").read_text())
    (v1 / "plan.json").write_text(json.dumps({**plan, "runs": None, "max_rounds": 30}))
    report.build(v1)
    env = (v1 / "report" / "report.md").read_text().split("## Environment")[1]
    assert "rounds until decided (3 run, at most 30)" in env and "None repeat" not in env


def _planted(v1: Path, dst: Path, factor: float, noise: float, cpu: str | None = None) -> Path:
    """A copy of the v1 folder whose throughputs are planted: every cell's glibc runs at 1000
    ops/s, jemalloc at `factor` times that, each round moved by a small `noise` that falls on both
    allocators of the round alike but for a 0.1 % wobble; on a machine named `cpu`."""
    import csv
    import io
    shutil.copytree(v1, dst)
    text = (dst / "runs.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    for r in rows:
        rnd = int(r["repeat"])
        wobble = 1 + (0.001 * (rnd % 2) if r["allocator"] == "jemalloc" else 0)
        r["ops_per_s"] = repr(1000.0 * (1 + noise * rnd) * (factor if r["allocator"] == "jemalloc" else 1) * wobble)
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (dst / "runs.csv").write_text(out.getvalue())
    if cpu:
        m = json.loads((dst / "machine.json").read_text())
        (dst / "machine.json").write_text(json.dumps({**m, "cpu_model": cpu}))
    return dst


def test_replication_says_replicates_differs_or_not_known_per_comparison(v1, tmp_path):
    from alloclab.answers.replicate import DIFFERS, NOT_KNOWN, REPLICATES
    a = _planted(v1, tmp_path / "a", 1.10, 0.05)
    same = _planted(v1, tmp_path / "same", 1.10, -0.03, cpu="Another CPU")  # the same effect on another machine
    other = _planted(v1, tmp_path / "other", 1.30, 0.02, cpu="Another CPU")  # a different effect
    studies = {n: analyse.load(p) for n, p in (("a", a), ("same", same), ("other", other), ("v1", v1))}
    thr = lambda t: [r for r in t.raw if r[0] == "throughput" and r[1] == "allocators"]  # noqa: E731
    rows = thr(compare.replication([studies["a"], studies["same"]]))
    assert len(rows) == 6 and {r[-4] for r in rows} == {REPLICATES}
    assert all(abs(r[10] - 1) < 0.01 and 0.98 <= r[11] and r[12] <= 1.02 for r in rows)  # ratio of ratios ~1
    rows = thr(compare.replication([studies["a"], studies["other"]]))
    assert {r[-4] for r in rows} == {DIFFERS} and all(abs(r[10] - 1.3 / 1.1) < 0.01 for r in rows)
    rows = thr(compare.replication([studies["v1"], studies["a"]]))  # v1's own runs are too noisy to tell
    assert NOT_KNOWN in {r[-4] for r in rows}
    # three folders: each against the first, and the heterogeneity over all of them
    t = compare.replication([studies["a"], studies["same"], studies["other"]])
    rows = thr(t)
    assert {r[-4] for r in rows} == {DIFFERS} and all(r[-2] < 0.05 and r[-1] > 0.9 for r in rows)  # p, I²
    assert "other ÷ a [95% CI]" in t.headers


def test_compare_two_folders_from_different_machines_lists_the_differences_and_replicates(v1, tmp_path):
    import subprocess
    import sys
    a = _planted(v1, tmp_path / "a", 1.10, 0.05)
    b = _planted(v1, tmp_path / "b", 1.10, -0.03, cpu="Another CPU")
    p = subprocess.run([sys.executable, "-m", "alloclab", "compare", str(a), str(b)], capture_output=True, text=True,
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert "machine cpu_model: 'AMD EPYC' vs 'Another CPU'" in p.stdout
    assert "## Replication: a, b" in p.stdout and "replicates" in p.stdout
    assert "before (" not in p.stdout  # no before/after of medians across machines unless --force
    q = subprocess.run([sys.executable, "-m", "alloclab", "compare", str(a)], capture_output=True, text=True,
                       env={"PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "PATH": "/usr/bin:/bin"})
    assert q.returncode == 2 and "two results folders or more" in q.stderr


def _two_machines(v1: Path, dst: Path, differing_part: str) -> Path:
    """Rounds 1-3 of the planted v1 folder on one machine (node n1), the same runs again as rounds
    4-6 on another (node n2, another fingerprint): jemalloc 10 % faster on both, but in the
    `differing_part` cells 30 % faster on the second."""
    import csv
    import io
    _planted(v1, dst, 1.10, 0.02)
    rows = list(csv.DictReader(io.StringIO((dst / "runs.csv").read_text())))
    more = []
    for r in rows:
        r.update(node="n1", machine_fingerprint="aaaaaaaaaaaa")
        s = dict(r, node="n2", machine_fingerprint="bbbbbbbbbbbb", repeat=str(int(r["repeat"]) + 3),
                 run_id=r["run_id"] + "-n2", index=str(int(r["index"]) + 1000))
        if s["part"] == differing_part and s["allocator"] == "jemalloc":
            s["ops_per_s"] = repr(float(s["ops_per_s"]) * 1.3 / 1.1)
        more.append(s)
    fields = list(rows[0]) + [k for k in ("node", "machine_fingerprint") if k not in rows[0]]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows + more)
    (dst / "runs.csv").write_text(out.getvalue())
    m = json.loads((dst / "machine.json").read_text())
    nodes = [{"node": "n1", "machine_fingerprint": "aaaaaaaaaaaa", "machine": m},
             {"node": "n2", "machine_fingerprint": "bbbbbbbbbbbb", "machine": {**m, "cpu_model": "Another CPU"}}]
    (dst / "machine.json").write_text(json.dumps({**m, "executor": "ray", "nodes": nodes}))
    return dst


def test_a_study_over_machines_that_differ_answers_per_machine_and_pools_only_what_agrees(v1, tmp_path):
    out = _two_machines(v1, tmp_path / "two", "large_4kb")
    s = analyse.load(out)
    assert s.fingerprints() == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    thr = [v for v in s.verdicts() if v.metric == "throughput" and v.comparison == "allocators"]
    split = [v for v in thr if v.machine]
    pooled = [v for v in thr if not v.machine]
    # the large_4kb cells (2 engines) differ between the machines: answered on each, never pooled
    assert {(v.engine, v.workload) for v in split} == {("tidesdb", "large_4kb"), ("rocksdb", "large_4kb")}
    assert len(split) == 4 and {v.machine_fingerprint for v in split} == {"aaaaaaaaaaaa", "bbbbbbbbbbbb"}
    assert all(abs(v.ratio - (1.3 if v.machine_fingerprint == "bbbbbbbbbbbb" else 1.1)) < 0.01 for v in split)
    # the others agree, and are pooled over both machines (pairs within a node)
    assert len(pooled) == 4 and all(v.machine_fingerprint == "aaaaaaaaaaaa+bbbbbbbbbbbb" for v in pooled)
    assert all(v.n_pairs == 6 and abs(v.ratio - 1.1) < 0.01 for v in pooled)
    report.build(out)
    md = (out / "report" / "report.md").read_text()
    assert "differs between the machines" in md and "answered per machine, not pooled" in md
    assert "2 of 6 throughput comparison(s) differ between them" in md
    # what to expect on one more machine of this kind, as alloclab compare says it over folders
    assert "On a new machine of this kind: jemalloc vs glibc (tidesdb large_4kb t2) between " in md
    head = md.split("## Answers")[1].split("\n\n")[1]
    assert "; on 2 machines (AMD EPYC, 2 cores, kernel 6.18.44-fc-v657; Another CPU, 2 cores" in head
    assert "Measured on 2 machines (AMD EPYC, 2 cores, kernel 6.18.44-fc-v657; Another CPU, 2 cores" in md
    # the forest plot: every comparison on each machine first, then the pooled ones
    svg = next((out / "report" / "charts").glob("verdicts_throughput.svg")).read_text()
    assert svg.count("on AMD EPYC") >= 6 and svg.count("on Another CPU") >= 6


def test_numbers_are_never_shown_as_minus_zero():
    from alloclab.answers.table import fmt_num
    assert [fmt_num(x, f, u) for x, f, u in [(-0.3, ".0f", " %"), (-0.04, "+.1f", ""), (-1.2, "+.1f", ""),
                                               (15.3, ".0f", " %"), (None, ".0f", " %"), (1234.5, ",.0f", "")]] == \
        ["0 %", "0.0", "-1.2", "15 %", "–", "1,234"]
