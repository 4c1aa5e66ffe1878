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
from nodice.evolution.lineage import Lineage
from tests.conftest import run_cli
from tests.evolution_helpers import builtin_run


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
    assert "baseline: torch F.rms_norm" in dom  # the task's baseline, measured in the run
    assert f"{summary.best_geomean:.4g}" in dom
