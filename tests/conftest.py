from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

# Without a GPU every verdict runs Triton under its interpreter; set it before any candidate is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "nodice" / "examples"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the installed ``nodice`` entry point as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "nodice", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
