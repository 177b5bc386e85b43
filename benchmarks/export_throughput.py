"""Turns per second for small turns: the headline fixture repeated over many conversations,
drained by `export-worker run --drain --concurrency N` (P processes) on one local home.

Every conversation is a copy of `tests/fixtures/public/headline.fixture.json` under new ids
(7 messages, 4 artifacts, 900 exported rows, one csv); each has one `turn.completed`, so
every turn is its own session. Each run seeds a fresh home, starts P worker processes,
and times them from start to exit; a drain of an empty home gives the fixed cost of
start-up and of noticing the queue is empty, reported apart. The runs are repeated with
the shipped `SESSION_IDLE_SECONDS` (1.0: a worker holds a session that long waiting for a
next message before it takes another) and with the value(s) of `--session-idle`.

    .venv/bin/python benchmarks/export_throughput.py            # 100 turns, ~4 minutes
    .venv/bin/python benchmarks/export_throughput.py --quick    # CI smoke size, seconds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worker.local.backend import open_local_backend

HEADER = (
    "| session idle s | processes x concurrency | turns | seconds | turns/s "
    "| start-up + drain s | turns/s net of it |"
)
FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/public/headline.fixture.json"
SHIPPED = "shipped"


def copies(count: int) -> list[dict[str, Any]]:
    """`count` copies of the headline fixture, each under its own conversation, turn, ids."""
    text = FIXTURE.read_text(encoding="utf-8")
    fixture = json.loads(text)
    (event,) = fixture["events"]
    out = []
    for n in range(count):
        renamed = (
            text.replace(event["conversation_id"], f"conv_tp_{n:05d}")
            .replace(event["turn_id"], f"turn_tp_{n:05d}")
            .replace(event["event_id"], f"evt_tp_{n:05d}")
            .replace("msg_headline_a_", f"msg_tp_{n:05d}_")
        )
        out.append(json.loads(renamed))
    return out


async def seed(home: Path, fixtures: list[dict[str, Any]]) -> None:
    """Load every copy into the home's stores and queue its event (as `dev seed` does)."""
    backend = open_local_backend(home)
    try:
        for fixture in fixtures:
            for conversation in fixture["conversations"]:
                await backend.store.put_conversation(conversation)
            for message in fixture["messages"]:
                await backend.store.put_message(message)
            for path, value in fixture["artifacts"].items():
                await backend.blobs.put(path, json.dumps(value).encode())
            for event in fixture["events"]:
                body = json.dumps(event).encode()
                await backend.queue.send(
                    body, event["conversation_id"], message_id=event["event_id"]
                )
    finally:
        await backend.close()


async def outcome(home: Path) -> tuple[int, int]:
    """(published exports, dead letters) the run left."""
    backend = open_local_backend(home)
    try:
        return len(await backend.ledger.list_exports()), len(await backend.queue.dead_letters())
    finally:
        await backend.close()


def drain(home: Path, processes: int, concurrency: int, idle: str) -> float:
    """Start `processes` workers on the home, wait for all to exit; wall seconds."""
    script = Path(sys.executable).with_name("export-worker")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "worker.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
    env.update(EXPORT_WORKER_HOME=str(home), EXPORT_WORKER_BACKEND="local")
    if idle != SHIPPED:
        env["EXPORT_WORKER_SESSION_IDLE_SECONDS"] = idle
    started = time.perf_counter()
    workers = [
        subprocess.Popen(
            [*command, "run", "--drain", "--concurrency", str(concurrency)],
            cwd=home,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(processes)
    ]
    failures = []
    for worker in workers:
        _, stderr = worker.communicate()
        if worker.returncode != 0:
            failures.append(stderr.decode(errors="replace")[-1000:])
    seconds = time.perf_counter() - started
    if failures:
        raise SystemExit(f"export-worker failed: {failures[0]}")
    return seconds


def run(fixtures: list[dict[str, Any]], processes: int, concurrency: int, idle: str) -> list[str]:
    """One row of the table: seed a fresh home, drain it, check every turn published."""
    with tempfile.TemporaryDirectory(prefix="export-throughput-") as scratch:
        empty = drain(Path(scratch), processes, concurrency, idle)
    with tempfile.TemporaryDirectory(prefix="export-throughput-") as scratch:
        home = Path(scratch)
        asyncio.run(seed(home, fixtures))
        seconds = drain(home, processes, concurrency, idle)
        published, dead = asyncio.run(outcome(home))
    turns = len(fixtures)
    if published != turns or dead:
        raise SystemExit(f"{published} of {turns} turns published, {dead} dead-lettered")
    net = seconds - empty
    return [
        "1.0 (shipped)" if idle == SHIPPED else idle,
        f"{processes} x {concurrency}",
        str(turns),
        f"{seconds:.1f}",
        f"{turns / seconds:.1f}",
        f"{empty:.1f}",
        f"{turns / net:.1f}" if net > 0 else "n/a",
    ]


def _runs(text: str) -> list[tuple[int, int]]:
    """'1x1,1x2,2x2' -> [(1, 1), (1, 2), (2, 2)] (processes x concurrency)."""
    pairs = []
    for part in text.split(","):
        processes, concurrency = part.lower().split("x")
        pairs.append((int(processes), int(concurrency)))
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="conversations, one turn each")
    parser.add_argument(
        "--runs",
        type=_runs,
        default=_runs("1x1,1x2,1x4,2x2"),
        help="processes x concurrency per run, comma-separated",
    )
    parser.add_argument(
        "--session-idle",
        type=lambda s: [p for p in s.split(",") if p],
        default=[SHIPPED, "0.05"],
        help=f"EXPORT_WORKER_SESSION_IDLE_SECONDS values ('{SHIPPED}': leave unset)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.turns, args.runs, args.session_idle = 4, [(1, 1), (1, 2)], ["0.05"]

    fixtures = copies(args.turns)
    print(
        f"# export throughput, headline fixture x {args.turns}, python "
        f"{sys.version.split()[0]}, {os.cpu_count()} cpus, {datetime.now(UTC):%Y-%m-%d}"
    )
    print(HEADER)
    print("|---|---|---|---|---|---|---|")
    for idle in args.session_idle:
        for processes, concurrency in args.runs:
            cells = run(fixtures, processes, concurrency, idle)
            print("| " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
