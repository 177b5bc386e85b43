"""The crash harness at CI size on the whole Azure backend over the stand-ins: workers
killed at random and at each publishing step, every port call failing transiently at a
rate, retries that wait (so delayed abandons park sessions), and nothing lost or doubled."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.emulated.azure_environment import emulators_missing

pytestmark = pytest.mark.emulated

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "benchmarks" / "chaos" / "crash_harness.py"
FIGURES = re.compile(
    r"^chaos: turns=(\d+) kills=(\d+) lost=(\d+) duplicates=(\d+) "
    r"dead_letters=(\d+) \(planted (\d+)\) replayed=(\d+)$"
)


def test_killed_and_faulted_workers_on_azure_lose_nothing_and_double_nothing() -> None:
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)
    # A worker process on Azure takes seconds to start: kills come every 6-10 s (the crash
    # points kill mid-turn in between); locks last 3 s so a dead worker's session returns.
    args = ["--backend", "azure", "--turns", "40", "--conversations", "8", "--kills", "8"]
    # Two tries per call: some deliveries fail, and their retries park sessions for 0.1 s+.
    args += ["--fault-rate", "0.1", "--call-attempts", "2", "--backoff-base", "0.1"]
    args += ["--seed", "11"]
    args += ["--lock-seconds", "3", "--kill-every", "6,10", "--timeout", "400"]
    proc = subprocess.run(
        [sys.executable, str(HARNESS), *args], capture_output=True, timeout=480, cwd=ROOT
    )
    lines = proc.stdout.decode().strip().splitlines()
    assert lines, proc.stderr.decode()[-2000:]
    match = FIGURES.match(lines[-1])
    assert match, lines[-10:]
    turns, kills, lost, duplicates, dead, planted, replayed = (int(g) for g in match.groups())
    print("\n".join(lines[-8:]))
    assert (turns, lost, duplicates) == (40, 0, 0), lines[-25:]
    assert kills >= 4 and dead == planted >= 4, lines[-25:]
    # Fewer than ten deaths exhaust no delivery count. A turn can spend its five attempts
    # on kills and injected faults; such a dead letter is replayed (and its turn checked).
    assert not [line for line in lines if "for their delivery count" in line], lines[-25:]
    assert replayed == sum(
        int(line.rpartition(" ")[2]) for line in lines if "injected faults' last" in line
    ), lines[-25:]
    assert proc.returncode == 0, lines[-25:]
