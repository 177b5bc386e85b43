"""The reliability suites share the CLI driver (tests/e2e) and the chaos turn generator."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for folder in (ROOT / "tests" / "e2e", ROOT / "benchmarks" / "chaos"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
