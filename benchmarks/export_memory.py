"""Peak memory and speed of one large export: rows stream, so peak RSS should follow the
largest single artifact (one page is parsed whole), not the size of the export.

Each measurement seeds a fresh local home with one conversation whose current turn made
PAGES parallel calls of `list_parameter_history`, each result an artifact of ROWS rows of 4
short columns, and queues its `turn.completed`. A fresh child process then handles that one
event with the real handler (`TurnHandler.handle` after receiving it from the local queue,
default) or with the real CLI (`export-worker run --drain`, `--via cli`), and its own peak
RSS is read (`ru_maxrss`; of that child alone through `os.wait4` in CLI mode). The baseline
is the child's peak just before the handler runs (interpreter, imports, open backend).

    .venv/bin/python benchmarks/export_memory.py            # 10 x 100,000 rows, ~5 minutes
    .venv/bin/python benchmarks/export_memory.py --quick    # CI smoke size, seconds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HEADER = (
    "| sweep | format | pages | rows/page | rows | largest page MB | file MB "
    "| baseline MB | peak MB | peak - baseline MB | seconds | rows/s |"
)
FORMATS = ("csv", "json", "xml", "xlsx")


@dataclass(frozen=True)
class Case:
    """One measurement: a sweep label, a format and the shape of the paged result."""

    sweep: str
    fmt: str
    pages: int
    rows_per_page: int

    @property
    def rows(self) -> int:
        return self.pages * self.rows_per_page


# --------------------------------------------------------------------------------------
# Seeding (a child process of its own: the parent never imports the worker)
# --------------------------------------------------------------------------------------
async def seed(home: Path, case: Case) -> int:
    """The rows case of `workloads.py` (4 messages, PAGES artifacts, the event) in HOME;
    the largest page's bytes."""
    from workloads import seed_rows

    from worker.local.backend import open_local_backend

    backend = open_local_backend(home)
    try:
        seeded = await seed_rows(backend, home, case.pages, case.rows_per_page, case.fmt)
    finally:
        await backend.close()
    return int(seeded["largest_bytes"])


async def exported(home: Path) -> dict[str, Any]:
    """What the run left: the turn record's decision, rows and bytes."""
    from workloads import ROWS_CONVERSATION

    from worker.local.backend import open_local_backend

    backend = open_local_backend(home)
    try:
        turns = await backend.ledger.list_turns(ROWS_CONVERSATION)
        records = [r.model_dump() for r in turns]
    finally:
        await backend.close()
    if len(records) != 1:
        raise SystemExit(f"expected one turn record, got {len(records)}")
    entry = records[0]["export"] or {}
    return {
        "decision": records[0]["decision"],
        "row_count": entry.get("row_count"),
        "bytes": entry.get("bytes", 0),
    }


# --------------------------------------------------------------------------------------
# The measured child. The parent never imports the worker nor builds rows: a child's peak
# RSS (Linux keeps it across fork and exec) then starts from a small parent's.
# --------------------------------------------------------------------------------------
def peak_mb() -> float:
    """This process's peak RSS so far in MB (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def handle_one(home: Path) -> dict[str, Any]:
    """Receive the one queued event, handle it with the real handler, settle it."""
    from worker import logs
    from worker.handler import TurnHandler
    from worker.local.backend import open_local_backend
    from worker.settings import Settings

    logs.configure(level="warning", stream=sys.stderr)
    settings = Settings(backend="local", home=home)
    backend = open_local_backend(home)
    try:
        baseline = peak_mb()
        session = await backend.queue.accept_session(5.0)
        assert session is not None, "nothing queued"
        message = await session.receive(5.0)
        assert message is not None, "nothing queued"
        started = time.perf_counter()
        await TurnHandler(backend, settings).handle(message)
        seconds = time.perf_counter() - started
        peak = peak_mb()
        await session.complete(message)
        await session.close()
    finally:
        await backend.close()
    return {"baseline_mb": baseline, "peak_mb": peak, "seconds": seconds, **await exported(home)}


def _child_json(*args: str) -> dict[str, Any]:
    """Run this script in a fresh interpreter (a child mode) and read its JSON answer."""
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args],
        capture_output=True,
        text=True,
        env=_env(Path(args[1])),
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {args[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return answer


def run_child(home: Path) -> dict[str, Any]:
    """Handle the event with `TurnHandler` in a fresh interpreter."""
    return _child_json("--handle", str(home))


def run_cli(home: Path) -> dict[str, Any]:
    """`export-worker run --drain` as a subprocess; its own peak RSS from os.wait4."""
    script = Path(sys.executable).with_name("export-worker")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "worker.cli"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*command, "run", "--drain", "--concurrency", "1"],
        cwd=home,
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"export-worker failed: {stderr[-2000:].decode(errors='replace')}")
    # No hook inside the CLI: no baseline, and the time includes start-up and the drain.
    return {
        "baseline_mb": float("nan"),
        "peak_mb": usage.ru_maxrss / 1024,
        "seconds": seconds,
        **_child_json("--record", str(home)),
    }


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
    env.update(
        EXPORT_WORKER_HOME=str(home),
        EXPORT_WORKER_BACKEND="local",
        EXPORT_WORKER_SESSION_IDLE_SECONDS="0.05",
    )
    return env


def child(mode: str, home: Path, rest: list[str]) -> dict[str, Any]:
    """The child modes: seed a home, handle its event, or read its turn record."""
    if mode == "--seed":
        fmt, pages, rows_per_page = rest
        case = Case("seed", fmt, int(pages), int(rows_per_page))
        return {"bytes": asyncio.run(seed(home, case))}
    if mode == "--handle":
        return asyncio.run(handle_one(home))
    return asyncio.run(exported(home))


# --------------------------------------------------------------------------------------
def measure(case: Case, via: str, scratch: Path) -> list[str]:
    """Seed, run, check, and return the table cells of one case."""
    home = Path(
        tempfile.mkdtemp(prefix=f"{case.fmt}-{case.pages}x{case.rows_per_page}-", dir=scratch)
    )
    largest = _child_json("--seed", str(home), case.fmt, str(case.pages), str(case.rows_per_page))
    result = run_child(home) if via == "handler" else run_cli(home)
    shutil.rmtree(home)  # a full-size case leaves ~150 MB behind
    if result["decision"] != "published" or result["row_count"] != case.rows:
        raise SystemExit(f"{case}: {result['decision']}, {result['row_count']} rows exported")
    growth = result["peak_mb"] - result["baseline_mb"]
    return [
        case.sweep,
        case.fmt,
        str(case.pages),
        f"{case.rows_per_page:,}",
        f"{case.rows:,}",
        f"{largest['bytes'] / 1e6:.1f}",
        f"{result['bytes'] / 1e6:.1f}",
        f"{result['baseline_mb']:.0f}",
        f"{result['peak_mb']:.0f}",
        f"{growth:.0f}",
        f"{result['seconds']:.1f}",
        f"{case.rows / result['seconds']:,.0f}",
    ]


def cases(args: argparse.Namespace) -> list[Case]:
    """Formats at the full size, then pages at a fixed page size, then page sizes."""
    out = []
    for fmt in args.formats:
        rows = args.xlsx_rows_per_page if fmt == "xlsx" and args.xlsx_rows_per_page else None
        out.append(Case("formats", fmt, args.pages, rows or args.rows_per_page))
    out += [Case("pages", "csv", pages, args.rows_per_page) for pages in args.sweep_pages]
    out += [Case("page size", "csv", args.size_pages, size) for size in args.page_sizes]
    return out


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=10, help="pages of the format sweep")
    parser.add_argument("--rows-per-page", type=int, default=100_000)
    parser.add_argument(
        "--xlsx-rows-per-page",
        type=int,
        default=None,
        help="a smaller page for xlsx (default: same as the others)",
    )
    parser.add_argument("--formats", type=lambda s: s.split(","), default=list(FORMATS))
    parser.add_argument(
        "--sweep-pages",
        type=_ints,
        default=[2, 5, 10],
        help="pages of the pages sweep (csv, --rows-per-page rows each)",
    )
    parser.add_argument(
        "--page-sizes",
        type=_ints,
        default=[50_000, 200_000],
        help="page sizes of the page-size sweep (csv)",
    )
    parser.add_argument("--size-pages", type=int, default=2, help="pages of the page-size sweep")
    parser.add_argument("--via", choices=("handler", "cli"), default="handler")
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a CI smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.pages, args.rows_per_page, args.sweep_pages = 2, 2_000, [1]
        args.page_sizes, args.xlsx_rows_per_page = [], None
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], Path(argv[2]), argv[3:])))
        return 0
    args = parse_args(argv)
    print(
        f"# export memory, via {args.via}, python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cpus, {datetime.now(UTC):%Y-%m-%d}"
    )
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    done: dict[tuple[str, int, int], list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="export-memory-") as scratch:
        for case in cases(args):
            key = (case.fmt, case.pages, case.rows_per_page)
            cells = done.get(key) or measure(case, args.via, Path(scratch))
            done[key] = cells
            print("| " + " | ".join([case.sweep, *cells[1:]]) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
