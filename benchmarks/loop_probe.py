"""Is case d's event loop waiting or working? Headline turns drained with a probe inside.

Seeds a home with TURNS headline turns (one conversation each, as case d does), then runs
`export-worker run --drain` in this process at default settings, with three probes:

- the time the loop's `select` blocked (a wait with a timeout: nothing was ready to run);
- the loop thread's own CPU time, beside the process's (worker threads included);
- the SQLite calls that went to a worker thread (the connection was taken or the file
  locked) and the log checkpoints, with the time each took.

It prints one JSON line: how many turns were published (all of them, or the figures mean
nothing) and figures a turn (start-up included: case e measures it alone).

    .venv/bin/python benchmarks/loop_probe.py --turns 300
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loop-probe-") as folder:
        home = Path(folder) / "home"
        seed = [sys.executable, str(BENCH / "workloads.py"), "seed-headline", str(home)]
        subprocess.run(
            [*seed, "--turns", str(args.turns)],
            check=True,
            capture_output=True,
        )
        figures = probe(home)
        seen = subprocess.run(
            [sys.executable, str(BENCH / "workloads.py"), "outcome", str(home)],
            check=True,
            capture_output=True,
            text=True,
        )
        outcome = json.loads(seen.stdout.strip().splitlines()[-1])
    turns = args.turns
    print(
        json.dumps(
            {
                "turns": turns,
                "published": len(outcome["exports"]),
                "dead_lettered": len(outcome["dead_letters"]),
                "wall_ms_a_turn": round(figures["wall"] * 1000 / turns, 2),
                "process_cpu_ms_a_turn": round(figures["cpu"] * 1000 / turns, 2),
                "loop_thread_cpu_ms_a_turn": round(figures["loop_cpu"] * 1000 / turns, 2),
                "loop_blocked_in_select_ms_a_turn": round(figures["idle"] * 1000 / turns, 2),
                "sqlite_reads_in_a_thread_a_turn": round(figures["threaded"]["BEGIN"] / turns, 3),
                "sqlite_writes_in_a_thread_a_turn": round(
                    figures["threaded"]["BEGIN IMMEDIATE"] / turns, 3
                ),
                "checkpoints_a_turn": round(len(figures["checkpoints"]) / turns, 3),
                "checkpoint_ms": sorted(round(d * 1000, 1) for d in figures["checkpoints"]),
            }
        )
    )
    return 0


def probe(home: Path) -> dict[str, Any]:
    """Drain HOME in this process with the probes in place; what they saw."""
    os.environ.update(EXPORT_WORKER_HOME=str(home), EXPORT_WORKER_BACKEND="local")
    idle = [0.0]
    real_select = selectors.EpollSelector.select

    def select(self: selectors.EpollSelector, timeout: float | None = None) -> Any:
        started = time.perf_counter()
        try:
            return real_select(self, timeout)
        finally:
            if timeout is None or timeout > 0:
                idle[0] += time.perf_counter() - started

    from worker.local import database

    threaded: Counter[str] = Counter()
    checkpoints: list[float] = []
    real_run, real_checkpoint = database.Database._run, database.Database._checkpoint

    def run(self: database.Database, work: Any, begin: str) -> Any:
        threaded[begin] += 1
        return real_run(self, work, begin)

    def checkpoint(self: database.Database) -> None:
        started = time.perf_counter()
        real_checkpoint(self)
        checkpoints.append(time.perf_counter() - started)

    from worker.cli import main as cli

    selectors.EpollSelector.select = select  # type: ignore[method-assign]
    database.Database._run = run  # type: ignore[method-assign]
    database.Database._checkpoint = checkpoint  # type: ignore[method-assign]
    wall, cpu, loop_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    try:
        cli(["run", "--drain"])
    except SystemExit as exit_:
        if exit_.code:
            raise
    finally:
        selectors.EpollSelector.select = real_select  # type: ignore[method-assign]
        database.Database._run = real_run  # type: ignore[method-assign]
        database.Database._checkpoint = real_checkpoint  # type: ignore[method-assign]
    return {
        "wall": time.perf_counter() - wall,
        "cpu": time.process_time() - cpu,
        "loop_cpu": time.thread_time() - loop_cpu,
        "idle": idle[0],
        "threaded": threaded,
        "checkpoints": checkpoints,
    }


if __name__ == "__main__":
    raise SystemExit(main())
