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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HEADER = (
    "| sweep | format | pages | rows/page | rows | largest page MB | file MB "
    "| baseline MB | peak MB | peak - baseline MB | seconds | rows/s |"
)
FORMATS = ("csv", "json", "xml", "xlsx")
REQUEST = {
    "csv": "create a csv",
    "json": "export it as json",
    "xml": "create an xml file",
    "xlsx": "create an xlsx file",
}
START = datetime(2026, 1, 1, tzinfo=UTC)


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
# Seeding (parent process: its memory is never measured)
# --------------------------------------------------------------------------------------
def page_result(page: int, rows_per_page: int, total: int) -> dict[str, Any]:
    """One page of telemetry as the tool returned it; rows are unique across pages."""
    first = page * rows_per_page
    items = []
    for k in range(first, first + rows_per_page):
        at = START + timedelta(seconds=k)
        items.append(
            {
                "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "parameter": "BatteryVoltage1",
                "value": round(12.0 + (k % 997) / 1000, 3),
                "unit": "V",
            }
        )
    return {
        "instance_id": "sat-07",
        "page": page + 1,
        "page_size": rows_per_page,
        "total": total,
        "items": items,
    }


async def seed(home: Path, case: Case) -> int:
    """Write the conversation, its 4 messages, PAGES artifacts and the event; largest page bytes."""
    from handlers.compaction import build_citation
    from worker.local.backend import open_local_backend

    cid, tid = "conv_mem", "turn_mem_1"
    backend = open_local_backend(home)
    try:
        store = backend.store
        await store.put_conversation(
            {"id": cid, "user_id": "user_bench", "participants": [], "deleted": False}
        )
        base = {
            "conversation_id": cid,
            "turn_id": tid,
            "deleted": False,
            "created_at": "2026-11-20T09:00:00Z",
        }
        calls, results, largest = [], [], 0
        for page in range(case.pages):
            call_id = f"call_{page:04d}"
            arguments = {
                "instance_id": "sat-07",
                "parameter": "BatteryVoltage1",
                "page": page + 1,
                "page_size": case.rows_per_page,
            }
            result = page_result(page, case.rows_per_page, case.rows)
            path = f"artifacts/{cid}/{tid}/{call_id}.json"
            data = json.dumps(
                {
                    "call_id": call_id,
                    "name": "list_parameter_history",
                    "arguments": arguments,
                    "result": result,
                },
                separators=(",", ":"),
            ).encode()
            largest = max(largest, len(data))
            await backend.blobs.put(path, data)
            calls.append({"id": call_id, "name": "list_parameter_history", "arguments": arguments})
            results.append(
                {
                    "call_id": call_id,
                    "name": "list_parameter_history",
                    "success": True,
                    "citation": build_citation(result),
                    "artifact": path,
                }
            )
            del result, data
        user_text = f"Retrieve the BatteryVoltage1 history for sat-07 and {REQUEST[case.fmt]}"
        await store.put_message(
            {**base, "id": "m1", "seq": 1, "role": "user", "content": user_text}
        )
        await store.put_message(
            {**base, "id": "m2", "seq": 2, "role": "assistant", "content": "", "tool_calls": calls}
        )
        await store.put_message({**base, "id": "m3", "seq": 3, "role": "tool", "results": results})
        reply = f"I retrieved {case.rows} BatteryVoltage1 samples in {case.pages} pages."
        await store.put_message(
            {**base, "id": "m4", "seq": 4, "role": "assistant", "content": reply, "tool_calls": []}
        )
        event = {
            "type": "turn.completed",
            "version": 1,
            "event_id": "evt_mem_1",
            "occurred_at": "2026-11-20T09:01:00Z",
            "conversation_id": cid,
            "user_id": "user_bench",
            "turn_id": tid,
            "user_message_id": "m1",
            "reply_message_id": "m4",
            "history_limit": 10,
        }
        await backend.queue.send(json.dumps(event).encode(), cid, message_id="evt_mem_1")
    finally:
        await backend.close()
    return largest


async def exported(home: Path) -> dict[str, Any]:
    """What the run left: the turn record's decision, rows and bytes."""
    from worker.local.backend import open_local_backend

    backend = open_local_backend(home)
    try:
        records = [r.model_dump(mode="json") for r in await backend.ledger.list_turns("conv_mem")]
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
