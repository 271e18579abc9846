"""dlbn-analyze --html in a real browser: Debian's Chromium, headless,
loads the page of a real DataLoader run (workload.py under the preload)
with --what-if figures and measured sweep points, logs nothing on its
console, and the rendered DOM holds the verdict and every point of the
what-if curve (their values equal the JSON report's); a screenshot is kept
in build/test-artifacts/html-report.png.

A control page with a console.error proves the console check can fail.
Skipped, with the reason, only when no chromium binary is installed
(scripts/install-deps installs it).
"""

import json
import re
import shutil
import struct
import subprocess

import pytest

from e2e_common import BUILD, analyze, require_binaries

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
ARTIFACTS = BUILD / "test-artifacts"
BROWSER_TIMEOUT_S = 90

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary (apt-get install chromium; "
                             "scripts/install-deps installs it)")

SWEEP = [
    {"setting": "num_workers", "value": 1, "measured_step_ms": 21.5},
    {"setting": "num_workers", "value": 2, "measured_step_ms": 11.0},
    {"setting": "num_workers", "value": 4, "measured_step_ms": None,
     "error": "worker killed (out of memory?)"},
]


def chromium(rundir, *args):
    """Run headless Chromium; returns (stdout, the console lines it logged)."""
    cmd = [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox",
           "--no-first-run", "--user-data-dir=%s" % (rundir / "chromium-profile"),
           "--enable-logging=stderr", "--v=0", "--hide-scrollbars"] + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_S)
    console = [line for line in proc.stderr.splitlines()
               if ":CONSOLE" in line or "Failed to load resource" in line]
    return proc, console


@pytest.fixture(scope="module")
def report(rundir, runs):
    require_binaries(lib=True, analyzer=True)
    run = runs("html", ["--workers", "1", "--sample-ms", "5", "--batch-size", "4",
                        "--steps-per-epoch", "40", "--step-ms", "8"])
    sweep = rundir / "sweep.json"
    sweep.write_text(json.dumps(SWEEP))
    page = rundir / "report.html"
    proc = analyze(run.trace, "--what-if", "--format", "json", "--html", str(page),
                   "--sweep-results", str(sweep))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), page


def test_page_is_self_contained(report):
    result, page = report
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html.lower()
    # the only URL is the SVG namespace name; nothing is fetched
    urls = set(re.findall(r"https?://[^\s\"')]+", html))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"""(src|href)=["'](?!data:|#)""", html), "an external reference"
    assert result["what_if"], "the JSON report has what-if rows"


def test_console_check_catches_errors(rundir):
    """Control: a page that logs an error and throws is caught."""
    bad = rundir / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head>'
                   '<body><script>console.error("dlbn-control"); notDefined();</script>'
                   '</body></html>')
    proc, console = chromium(rundir, "--dump-dom", bad.as_uri())
    assert any("dlbn-control" in line for line in console), proc.stderr[-2000:]
    assert any("notDefined" in line for line in console), proc.stderr[-2000:]


def test_rendered_page(report, rundir):
    result, page = report
    proc, console = chromium(rundir, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console == [], "console output while loading the page: %s" % console
    dom = proc.stdout
    verdict = re.search(r'<span id="verdict"[^>]*>([A-Z_]+)</span>', dom)
    assert verdict and verdict.group(1) == result["verdict"], verdict
    # every num_workers row of the JSON is a point of the curve, same value
    rows = {r["value"]: r["predicted_step_ms"] for r in result["what_if"]
            if r["setting"] == "num_workers"}
    points = {int(v): float(ms) for v, ms in re.findall(
        r'<circle class="whatif-point[^"]*"[^>]*data-value="(\d+)" data-step-ms="([\d.]+)"',
        dom)}
    assert set(points) == set(rows) and len(rows) >= 4, (points, rows)
    for value, ms in rows.items():
        assert abs(points[value] - ms) < 1e-3 * max(1.0, ms), (value, points[value], ms)
    current = [r for r in result["what_if"] if r["current"] and r["setting"] == "num_workers"]
    assert len(current) == 1 and current[0]["value"] == 1
    assert 'class="measured-point"' in dom
    # the sweep's measured points, and its failed run named
    sweep = re.findall(r'<path class="sweep-point" d="[^"]*" data-value="([\d.]+)" '
                       r'data-measured-ms="([\d.]+)"', dom)
    assert sorted((float(v), float(ms)) for v, ms in sweep) == [(1.0, 21.5), (2.0, 11.0)]
    assert "worker killed (out of memory?)" in dom
    # the batch size x workers grid: one point per grid entry of the JSON,
    # one line per batch size, the best marked once, the run measured
    grid = result["what_if_grid"]
    cells = re.findall(r'<circle class="grid-point bs-\d"[^>]*data-batch-size="(\d+)" '
                       r'data-units="(\d+)" data-samples-per-s="([\d.]+)"', dom)
    assert sorted((int(b), int(u)) for b, u, _ in cells) == sorted(
        (c["batch_size"], c["num_workers"]) for c in grid), cells
    for b, u, rate in cells:
        cell = [c for c in grid if (c["batch_size"], c["num_workers"]) == (int(b), int(u))][0]
        assert abs(float(rate) - cell["predicted_samples_per_s"]) < 0.1 + 1e-3 * float(rate)
    assert len(re.findall(r'<polyline class="grid-line bs-\d"', dom)) == len(
        {c["batch_size"] for c in grid})
    assert len(re.findall(r'<circle class="grid-best"[^>]*data-batch-size', dom)) == 1
    assert re.search(r'<path class="grid-measured bs-\d"', dom)
    assert 'id="grid-best"' in dom
    # the other sections are there
    for section in ("timeline", "wait-hist", "worker-util", "whatif-curve", "whatif-table",
                    "grid-chart"):
        assert 'id="%s"' % section in dom, section
    assert "Workers' time" in dom or "Workers&#39; time" in dom


def test_screenshot(report, rundir):
    result, page = report
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "html-report.png"
    if shot.exists():
        shot.unlink()
    proc, console = chromium(rundir, "--window-size=1280,2300", "--screenshot=%s" % shot,
                             page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console == [], console
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2300)
    assert len(data) > 20000, "a blank page compresses to almost nothing"


def test_standalone_plot_renders(report, rundir):
    """--plot writes the grid chart as an SVG file a browser shows alone."""
    result, page = report
    svg = rundir / "grid.svg"
    proc = analyze(result["trace"]["path"], "--plot", str(svg))
    assert proc.returncode == 0, proc.stderr
    text = svg.read_text()
    assert text.startswith("<?xml") and "<style>" in text and "<script" not in text
    proc, console = chromium(rundir, "--dump-dom", svg.as_uri())
    assert proc.returncode == 0 and console == [], (proc.stderr[-2000:], console)
    assert 'id="grid-chart"' in proc.stdout and "grid-point" in proc.stdout
