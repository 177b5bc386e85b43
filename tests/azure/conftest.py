"""Lets the Azure tests reuse the contract suites' Azure factories (tests/contracts)."""

from __future__ import annotations

import sys
from pathlib import Path

CONTRACTS = str(Path(__file__).resolve().parent.parent / "contracts")
if CONTRACTS not in sys.path:
    sys.path.insert(0, CONTRACTS)
