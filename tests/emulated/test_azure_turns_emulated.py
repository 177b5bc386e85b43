"""Case az of the benchmarks on the stand-ins scripts/test-emulated starts: the measuring
process runs the real `run --drain` on two headline turns, checks their outcome, and
counts what each turn asked of Service Bus, Blob Storage and Cosmos DB."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.processes import alive, draining_in, left_in, wait_until
from tests.benchmarks.script_runs import BENCHMARKS, benchmark_module, run_script
from tests.emulated.azure_environment import emulators_missing

pytestmark = pytest.mark.emulated

REUSE_ENV = benchmark_module("azure_turns").REUSE_ENV


def test_az_case_publishes_every_turn_and_counts_each_turns_operations(tmp_path: Path) -> None:
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)
    proc = run_script("azure_turns.py", "--turns", "2", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(proc.stdout.splitlines()[-1])
    assert run["skipped"] is None
    ops = run["operations"]
    each = {
        ("Service Bus", "accept session (next available)"): 1,
        ("Service Bus", "deliver turn-completed"): 1,
        ("Service Bus", "settle complete"): 1,
        ("Service Bus", "send export-published"): 1,
        ("Blob", "read blob"): 2,  # exactly the two winning artifacts
        ("Blob", "put blob (one call)"): 1,  # a 41 KB export fits one block
        ("Cosmos", "point read turns → 404"): 1,  # the handler's; `put` reads no more
        ("Cosmos", "point read conversations"): 1,
        ("Cosmos", "point read messages"): 1,
        ("Cosmos", "query messages"): 1,
        ("Cosmos", "create turns"): 1,
        ("Cosmos", "replace turns"): 1,
    }
    for (service, operation), count in each.items():
        assert ops[service][operation]["count"] == count, (service, operation, ops)
    assert not {"stage block", "commit block list"} & set(ops["Blob"]), ops["Blob"]
    assert "point read turns" not in ops["Cosmos"], ops["Cosmos"]
    assert any("sha256 matches their record" in note for note in run["notes"]), run["notes"]


def test_the_soak_serves_every_turn_on_the_stand_ins_and_samples_the_worker(
    tmp_path: Path,
) -> None:
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)
    proc = run_script(
        "soak.py", "--backend", "azure", "--turns", "3", "--wave", "2", "--interval", "0.05",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])["azure"]
    assert (figures["turns"], figures["published"]) == (3, 3)
    assert figures["samples"] and all(s["rss_kb"] > 0 for s in figures["samples"])
    # The turns' outcome was checked as case az checks it: blobs, events, an empty queue; the
    # worker served two waves (its first wave's messages deleted between them) and stopped on
    # SIGTERM with exit code 0.
    assert "sha256 matches their record" in proc.stdout, proc.stdout[-2000:]
    assert "seeded 2 at a time" in proc.stdout and "exit code 0" in proc.stdout


def test_an_az_run_stopped_with_sigterm_stops_the_stand_ins_it_started(tmp_path: Path) -> None:
    # They run in sessions of their own: before, a SIGTERM left both servers running.
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)
    env = {k: v for k, v in os.environ.items() if k not in REUSE_ENV}  # so it starts its own
    scratch = tmp_path / "scratch"
    proc = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "azure_turns.py"), "--turns", "50",
         "--scratch", str(scratch)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    pids_file = scratch / "emulators" / "pids.json"
    servers: list[int] = []
    try:
        wait_until(lambda: draining_in(tmp_path), 180, "the measured worker")
        servers = list(json.loads(pids_file.read_text(encoding="utf-8")).values())
        assert len(servers) == 2 and all(alive(pid) for pid in servers)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
        left = [pid for pid in servers if alive(pid)]
    finally:
        proc.kill()
        for pid in servers:  # a failing run does not leave them to the next test
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert left == [], err[-3000:]
    assert left_in(tmp_path) == [], err[-3000:]
