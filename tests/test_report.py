"""`nodice report RUN`: a self-contained page that renders in headless Chromium with no console message."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib import image as mpimg

from nodice.evolution.engine import EvolveSummary
from nodice.evolution.journal import Attempt
from nodice.evolution.lineage import Lineage
from nodice.evolution.session import RunSession, files_digest
from nodice.evolution.start import EvolveOptions, prepare_run
from nodice.report import load_run, write_report
from tests.conftest import EXAMPLES, run_cli
from tests.evolution_helpers import builtin_run, throughput_scores


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, EvolveSummary, str]:
    return builtin_run(tmp_path_factory)


BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def _browser() -> str:
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("headless Chromium is needed for the report test: apt-get install -y chromium")
    pytest.skip("no Chromium on this machine (apt-get install -y chromium)")


def _render(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM Chromium built from ``page`` and the console messages it logged."""
    proc = subprocess.run(
        [
            _browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return proc.stdout, console


def test_console_capture_sees_errors(tmp_path: Path) -> None:
    """Control: the harness does report a page that logs an error."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><link rel='icon' href='data:,'></head>"
        "<body><script>console.error('broken page'); missing();</script></body></html>"
    )
    _, console = _render(page, tmp_path)
    assert any("broken page" in ln for ln in console) and any(
        "missing is not defined" in ln for ln in console
    )


def test_report_renders_without_console_errors(
    built: tuple[Path, EvolveSummary, str], tmp_path: Path
) -> None:
    root, summary, _ = built
    result = run_cli("report", str(root))
    assert result.returncode == 0, result.stderr
    page = root / "report.html"
    assert result.stdout.strip().splitlines()[-1] == f"report: {page}"
    for png in ("trajectory.png", "workloads.png", "rejections.png"):
        assert (root / png).stat().st_size > 5000

    html = page.read_text()
    # Self-contained: every image is an embedded PNG that decodes, nothing is fetched.
    sources = re.findall(r'src="([^"]+)"', html)
    assert len(sources) == 3 and all(s.startswith("data:image/png;base64,") for s in sources)
    for s in sources:
        pixels = mpimg.imread(io.BytesIO(base64.b64decode(s.split(",", 1)[1])), format="png")
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400
    assert not re.search(r'(href|src)="(https?:|//)', html)

    dom, console = _render(page, tmp_path)
    assert console == [], console
    versions = Lineage(root).versions()
    assert "Running best against the baselines" in dom and "Supervisor interventions" in dom
    for v in versions:
        assert f"v{v.version} — geomean {v.geomean:.4g}" in dom
    assert "small_batch_eager_path" in dom and "bi_violation" in dom  # the rejection and its reason
    assert "<th>geomean (GB/s)</th>" in dom and f"{summary.best_geomean:.4g} GB/s" in dom
    # Each baseline the run measured has its own row: name, throughput and BI verdict when audited.
    levels = load_run(root).baseline_levels()
    assert levels and all(f"baseline: {b.name}" in dom for b in levels)


def _judged(
    files: dict[str, str], outcome: str, scores: list[dict[str, object]], geomean: float, best: float
) -> Attempt:
    return Attempt(
        id=0,
        created=0.0,
        agent="builtin",
        label=f"edit {len(files['kernel.py'])}",
        description="",
        files_sha=files_digest(files),
        files=files,
        bench=True,
        verdict="bi_violation" if outcome == "bi_violation" else "pass",
        reason="batch-dependent tile" if outcome == "bi_violation" else "",
        geomean=geomean,
        scores=scores,
        stages={},
        feedback="",
        outcome=outcome,
        best_before=best,
    )


def test_throughput_report_shows_units_ratios_and_baseline_levels(tmp_path: Path) -> None:
    """A run committed through the real commit rule, with scores as the evaluation service writes them."""
    run, config, _ = prepare_run(EvolveOptions(task="rmsnorm", run_dir=tmp_path / "run", device="cpu"))
    assert config.unit == "GB/s"
    seed = (EXAMPLES / "rmsnorm" / "seed.py").read_text()
    baselines = {"torch F.rms_norm": 3000.0, "eager": 1000.0}
    steps = [
        ("eligible", {"cpu-small": 2500.0, "cpu-wide": 2700.0}),
        ("bi_violation", {}),
        ("eligible", {"cpu-small": 2800.0, "cpu-wide": 2900.0}),
        ("slower", {"cpu-small": 2000.0, "cpu-wide": 2100.0}),
    ]
    session = RunSession(run, config)
    try:
        for i, (outcome, values) in enumerate(steps):
            scores = throughput_scores(values, baselines) if values else []
            geomean = (values["cpu-small"] * values["cpu-wide"]) ** 0.5 if values else 0.0
            best = session.best()
            files = {"kernel.py": seed + "\n#" * i}
            attempt = _judged(files, outcome, scores, geomean, best.geomean if best else 0.0)
            session.journal.add_attempt(attempt)
            if outcome == "eligible":
                assert session.commit_attempt(attempt).committed
        versions = session.versions()
    finally:
        session.close()
    assert [v.unit for v in versions] == ["GB/s", "GB/s"]

    data = load_run(run.root)
    assert not data.legacy and [(b.name, round(b.value), b.bi) for b in data.baseline_levels()] == [
        ("torch F.rms_norm", 3000, "pass"),
        ("eager", 1000, "pass"),
    ]
    html = write_report(run.root).read_text()
    assert "<th>geomean (GB/s)</th><th>× fastest baseline</th><th>of limit</th>" in html
    assert (
        "Best: v1 at <b>2850 GB/s</b> geomean, 0.95× the fastest baseline, "
        "71% of copy bandwidth (measured on the device)." in html
    )
    assert "v1 — geomean 2850 GB/s (0.95× best baseline)" in html
    assert "2800<br><span class='sub'>0.93× torch F.rms_norm · 70% of limit · 1.000 ms</span>" in html
    assert "baseline: torch F.rms_norm (BI: pass)</td><td class='num'>3000</td>" in html
    assert "geomean 2049 GB/s below the best 2850 GB/s" in html
    assert "speedup" not in html
    for png in ("trajectory.png", "workloads.png", "rejections.png"):
        assert (run.root / png).stat().st_size > 5000
    dom, console = _render(run.root / "report.html", tmp_path)
    assert console == [] and "against the fastest baseline" in dom
