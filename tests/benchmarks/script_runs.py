"""Running a benchmark script the way a user does: its own interpreter, in a scratch folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(
    script: str, *args: str, cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`python benchmarks/SCRIPT ARGS...` in `cwd`; its exit code is the caller's to check."""
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
