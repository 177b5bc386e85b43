"""Running a benchmark script the way a user does: its own interpreter, in a scratch folder."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(
    script: str, *args: str, cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """`python benchmarks/SCRIPT ARGS...` in `cwd`, its temporary folder too (`script_env`);
    its exit code is the caller's to check."""
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=cwd,
        env=script_env(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def script_env(folder: Path) -> dict[str, str]:
    """The environment of a benchmark script run by a test: its temporary folder is FOLDER.
    The scratch homes a script makes, and the mark `run_all.py` leaves once it deletes them,
    stay in the test's folder. In the machine's temporary folder, the mark would tell the
    next timed run that it starts too soon after a deletion."""
    return {**os.environ, "TMPDIR": str(folder)}


def benchmark_module(name: str) -> ModuleType:
    """A benchmark script imported as the scripts import each other (from benchmarks/)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)
