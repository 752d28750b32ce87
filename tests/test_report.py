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
from alloclab.answers import analyse
from alloclab.core.errors import AlloclabError
from alloclab.report import compare
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
                   "Nothing is decided yet on throughput", "run it again without --runs",
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
        compare.compare(a, b)
    tables = compare.compare(a, b, force=True)
    thr = tables[0]
    assert len(thr.rows) == 12
    # identical data: every ratio is exactly 1
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
