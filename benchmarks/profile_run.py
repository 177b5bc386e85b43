"""Where the real `export-worker run --drain` process spends its time: py-spy, summarised.

Seeds a home as `run_all.py` does (a separate process), then samples the worker with
`py-spy record --format raw` (the real console script, default settings) and prints, for
the main thread, the share of samples per function: inclusive (the function or anything it
called was running) and self (it was the innermost frame). `--idle` keeps the samples where
the thread waited (sleeping, polling, blocked in a thread hand-off), which is where waits
show up. Worker threads (asyncio.to_thread: SQLite, file reads and writes) are reported
apart, as their own total.

    .venv/bin/python benchmarks/profile_run.py rows --pages 10 --rows 100000
    .venv/bin/python benchmarks/profile_run.py rows --pages 100 --rows 10000
    .venv/bin/python benchmarks/profile_run.py headline --turns 100 --idle
    .venv/bin/python benchmarks/profile_run.py empty --idle
    .venv/bin/python benchmarks/profile_run.py summarise RAW_FILE   # an earlier recording

Needs py-spy (`pip install -e '.[bench]'`). The raw file (collapsed stacks, which
flamegraph tools read) is kept in --out (default: a temporary folder, printed).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from run_all import WORKER, worker_env, workload  # noqa: E402

_PROJECT = re.compile(r"\((worker|handlers|schemas)/")
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^():]+)(?::\d+)?\)$")
_MAIN_ROOTS = ("<module> (export-worker", "<module> (<string>")


def frame_key(frame: str) -> str:
    """`function (path/file.py:line)` → `function (path/file.py)`: lines merged (py-spy
    already names files from their package: `handlers/dataset.py`, `json/decoder.py`)."""
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    return f"{match['function']} ({match['file']})"


def read_raw(path: Path) -> list[tuple[list[str], int]]:
    """The stacks of a py-spy raw file (root first) with their sample counts."""
    stacks = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        if not head or not count.isdigit():
            continue
        stacks.append((head.split(";"), int(count)))
    return stacks


def stage(frames: list[str]) -> str:
    """The stage a sample belongs to: imports, or the innermost function of this project
    (with whatever library code it called), or `outside the project` (event loop, CLI)."""
    if any("_find_and_load" in frame for frame in frames):
        return "start-up: imports"
    for frame in reversed(frames):
        if _PROJECT.search(frame):
            return frame_key(frame)
    return "outside the project (event loop, click, asyncio)"


# The steps of a turn, by the innermost project function a sample is in (first match wins).
GROUPS: dict[str, tuple[str, ...]] = {
    "row path: spool": ("RowSpool.",),
    "row path: digest": ("row_digest",),
    "row path: de-dup": ("DigestSet.",),
    "row path: clean / extract": (
        "RowCleaner.",
        "_clean",
        "clean_row",
        "is_secret_key",
        "extract_rows",
        "_row_key",
        "locate_rows",
        "normalize_key",
    ),
    "row path: collector loop": ("RowCollector._page", "RowCollector.feed", "TurnHandler._fetch"),
    "row path: cells": ("action_cells", "batch_cells", "_cells", "finish_row"),
    "row path: csv serialiser": ("csv_file.py", "serialisers/__init__.py", "export_file.py"),
    "xlsx serialiser": ("xlsx_file.py",),
    "artifact read + parse": ("TurnHandler._artifact", "LocalBlobs.read", "parse_artifact_json"),
    "start-up: imports": ("start-up",),
    "event loop (select, callbacks), CLI": ("outside the project", "_with_backend", "Runtime."),
}


def group(stage_name: str) -> str:
    """The step a stage belongs to (GROUPS), else the stage itself."""
    for name, keys in GROUPS.items():
        if any(key in stage_name for key in keys):
            return name
    return stage_name


def summarise(path: Path, top: int = 30) -> str:
    """Markdown: main-thread total, then its samples by stage, inclusive and self."""
    stacks = read_raw(path)
    main = [(s, n) for s, n in stacks if s and s[0].startswith(_MAIN_ROOTS)]
    threads = sum(n for s, n in stacks if not (s and s[0].startswith(_MAIN_ROOTS)))
    total = sum(n for _, n in main) or 1
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    steps: Counter[str] = Counter()
    for frames, count in main:
        keys = [frame_key(f) for f in frames]
        for key in set(keys):
            inclusive[key] += count
        own[keys[-1]] += count
        stages[stage(frames)] += count
        steps[group(stage(frames))] += count
    lines = [
        f"main thread: {total} samples; other threads (to_thread workers): {threads} samples",
        "",
        "| % | step |",
        "|---|---|",
        *(f"| {n * 100 / total:.1f} | {k} |" for k, n in steps.most_common(top)),
        "",
        "| % | innermost project function (with the library code it called) |",
        "|---|---|",
        *(f"| {n * 100 / total:.1f} | `{k}` |" for k, n in stages.most_common(top)),
        "",
        "| inclusive % | function (main thread) |",
        "|---|---|",
        *(f"| {n * 100 / total:.1f} | `{k}` |" for k, n in inclusive.most_common(top)),
        "",
        "| self % | function (main thread) |",
        "|---|---|",
        *(f"| {n * 100 / total:.1f} | `{k}` |" for k, n in own.most_common(top)),
    ]
    return "\n".join(lines)


def record(args: argparse.Namespace, out: Path) -> Path:
    """Seed a home for the case, sample `export-worker run --drain` on it; the raw file."""
    home = out / "home"
    home.mkdir()
    if args.case == "rows":
        extra = ["--pages", str(args.pages), "--rows", str(args.rows), "--format", args.format]
        workload("seed-rows", home, *extra)
    elif args.case == "headline":
        workload("seed-headline", home, "--turns", str(args.turns))
    else:
        workload("seed-empty", home)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    raw = out / f"{args.case}.txt"
    options = ["--rate", str(args.rate), "--nonblocking"]
    if args.idle:
        options.append("--idle")
    command = [spy, "record", *options, "--format", "raw", "-o", str(raw), "--", WORKER]
    subprocess.run(
        [*command, "run", "--drain"],
        cwd=home,
        env=worker_env(home),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    shutil.rmtree(home)
    return raw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=("rows", "headline", "empty", "summarise"))
    parser.add_argument("raw", nargs="?", type=Path, help="summarise: a py-spy raw file")
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--format", default="csv")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--rate", type=int, default=200, help="samples per second")
    parser.add_argument("--idle", action="store_true", help="keep samples of waiting threads")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.case == "summarise":
        print(summarise(args.raw, args.top))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="export-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    raw = record(args, out)
    print(f"# py-spy raw: {raw}")
    print(summarise(raw, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
