"""How close the row path gets to the bare pipeline, and which of its steps the bare one skips.

In one process, over the same pages of telemetry rows (PAGES artifacts of ROWS rows, as JSON
bytes in memory; no start-up, no file I/O), from artifact bytes to csv bytes:

- bare: orjson.loads each page, `csv.writer.writerows` of its rows (the limit of run_all.py);
- the worker's row path, with its own functions, in the order `worker/handler.py` calls
  them: parse (`parse_artifact_json`), clean (`RowCleaner`), digest (`row_digests`),
  de-duplicate across pages (a group past a few thousand rows logs its digests to a file,
  `DigestLog`, and finds the repeats after its last page), spool (`RowSpool`,
  written and read back a batch at a time; for a csv export a full batch, or a page that
  starts the unwritten tail, is written as its records, so the csv step after it mostly
  copies them), cells (`batch_cells`) and csv (`csv_chunks`).

The two csv outputs must be byte-identical (checked). Each step of the row path is timed
alone on the previous step's output, so the table says which steps the bare pipeline also
does (parse, csv) and which it skips (clean, digest, de-dup, spool, cells): the latter are
the price of the contract (secrets dropped, exact cross-page de-duplication, counts known
before the first byte is written), the floor of the ratio in pure Python.

    .venv/bin/python benchmarks/floor.py                       # 10 x 100,000 and 100 x 10,000
    .venv/bin/python benchmarks/floor.py --quick
"""

from __future__ import annotations

import argparse
import csv
import gc
import io
import sys
import time
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workloads import telemetry_page

from handlers.dataset import RowCollector, table_room
from handlers.digest_log import DigestLog
from handlers.digest_set import DigestSet
from handlers.file_layout import batch_cells, dataset_cells, layout
from handlers.row_digest import row_digests
from handlers.rows import RowCleaner, locate_rows
from handlers.selection import ResultRef
from handlers.serialisers.csv_file import csv_chunks, plain_text
from worker.artifact_json import parse_artifact_json
from worker.digest_file import DigestFile
from worker.spool import Batch, RowSpool

ACTION = "h"


def pages_bytes(pages: int, rows: int) -> list[bytes]:
    """The artifacts as stored: JSON bytes of one telemetry page each."""
    return [
        orjson.dumps(
            {
                "call_id": f"c{p}",
                "name": ACTION,
                "arguments": {},
                "result": telemetry_page(p, rows, pages * rows),
            }
        )
        for p in range(pages)
    ]


# --------------------------------------------------------------------------------------
def bare(data: list[bytes]) -> bytes:
    """orjson + csv.writer: the limit."""
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    out.write("\ufeff")
    header = None
    for raw in data:
        items = orjson.loads(raw)["result"]["items"]
        if header is None:
            header = list(items[0])
            writer.writerow(header)
        writer.writerows(map(itemgetter(*header), items))
        del items
    return out.getvalue().encode("utf-8")


def row_path(data: list[bytes]) -> bytes:
    """The worker's row path end to end, as the handler runs it."""
    refs = [
        ResultRef("t", ACTION, f"c{order}", f"a{order}", None, order) for order in range(len(data))
    ]
    with RowSpool() as spool, DigestFile() as store:
        collector = RowCollector(None, store)  # a large group's digests go to the file
        collector.expect(refs)  # as story.collector_for tells it a round's pages
        spool.write_as(plain_text)  # a csv export: batches spooled as the file's records
        for ref, raw in zip(refs, data, strict=True):
            spool.extend(ACTION, collector.feed(ref, parse_artifact_json(raw)["result"]))
        selection = collector.select()
        spool.skip(ACTION, collector.skipped(ACTION))
        shape = layout("csv", None, selection)
        cells = dataset_cells(spool.batches(ACTION), ACTION, selection, shape)
        return b"".join(csv_chunks(shape.header, cells))


# --------------------------------------------------------------------------------------
def steps(data: list[bytes], repeat: int) -> list[tuple[str, float]]:
    """Seconds of each step of the row path, each run alone on the previous one's output."""
    timed: list[tuple[str, float]] = []

    def step(name: str, work: Callable[[], Any]) -> Any:
        seconds, out = best(work, repeat)
        timed.append((name, seconds))
        return out

    results = step("parse (msgspec)", lambda: [parse_artifact_json(raw)["result"] for raw in data])
    pages = step(
        "clean (RowCleaner)",
        lambda: (lambda c: [c.page(locate_rows(r))[0] for r in results])(RowCleaner()),
    )
    digests = step("digest (row_digests)", lambda: [row_digests(rows) for rows in pages])

    def dedup() -> None:
        # As RowCollector._page for a group past `SMALL` digests: each page logged to the
        # turn's digest file, the repeats found after the last (`select`).
        with DigestFile() as store:
            log = DigestLog(store)
            for page in digests:
                log.add(page)
            log.repeats()

    def dedup_in_memory() -> None:
        # As RowCollector._page without a digest file: the first page goes in when the
        # second comes, the table sized for the pages projected, each later page checked
        # and added in one probe.
        earlier = DigestSet()
        held = 0
        for number, page in enumerate(digests):
            held += len(page)
            if number:
                earlier.reserve(table_room(held, number + 1, len(digests)))
            if number == 1:
                earlier.add_all(digests[0])
            if number:
                earlier.add_absent(page)

    step("de-dup (DigestLog)", dedup)
    step("  (in memory instead: DigestSet)", dedup_in_memory)

    def spool_round_trip() -> list[Batch]:
        with RowSpool() as spool:
            spool.write_as(plain_text)
            for rows in pages:
                spool.extend(ACTION, rows)
            return list(spool.batches(ACTION))

    batches = step("spool (write + read back)", spool_round_trip)
    collector = RowCollector(None)
    for order, result in enumerate(results):
        collector.feed(ResultRef("t", ACTION, f"c{order}", f"a{order}", None, order), result)
    selection = collector.select()
    shape = layout("csv", None, selection)
    cells = step("cells (batch_cells)", lambda: list(batch_cells(batches, shape.keys)))
    step("csv (csv_chunks)", lambda: b"".join(csv_chunks(shape.header, cells)))
    return timed


def bare_steps(data: list[bytes], repeat: int) -> list[tuple[str, float]]:
    """The bare pipeline's two steps, timed the same way."""
    timed: list[tuple[str, float]] = []
    seconds, pages = best(lambda: [orjson.loads(raw)["result"]["items"] for raw in data], repeat)
    timed.append(("parse (orjson)", seconds))
    header = list(pages[0][0])

    def write() -> bytes:
        out = io.StringIO(newline="")
        writer = csv.writer(out)
        writer.writerow(header)
        for items in pages:
            writer.writerows(map(itemgetter(*header), items))
        return out.getvalue().encode("utf-8")

    timed.append(("csv (csv.writer)", best(write, repeat)[0]))
    return timed


def best(work: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The fastest of `repeat` runs, the cyclic garbage collector off: the steps keep every
    page's output alive at once, which the collector would walk again and again (the row
    path itself holds one page at a time; its figure moves by a few % either way)."""
    times, out = [], None
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            out = work()
            times.append(time.perf_counter() - started)
        finally:
            gc.enable()
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="10x100000,100x10000", help="PAGESxROWS,...")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.repeat = "10x2000", 1
    print("| pages × rows | pipeline or step | µs/row | ratio to bare | same bytes as bare |")
    print("|---|---|---|---|---|")
    for text in args.shapes.split(","):
        pages, rows = (int(x) for x in text.split("x"))
        data = pages_bytes(pages, rows)
        total = pages * rows
        label = f"{pages} × {rows:,}"
        t_bare, reference = best(lambda data=data: bare(data), args.repeat)
        t_path, out = best(lambda data=data: row_path(data), args.repeat)
        print(f"| {label} | bare (orjson + csv.writer) | {t_bare * 1e6 / total:.2f} | 1.0x | — |")
        for name, seconds in bare_steps(data, args.repeat):
            print(f"| {label} | bare: {name} | {seconds * 1e6 / total:.2f} | | |")
        print(
            f"| {label} | **the row path** | {t_path * 1e6 / total:.2f} | "
            f"**{t_path / t_bare:.1f}x** | {out == reference} |"
        )
        for name, seconds in steps(data, args.repeat):
            print(f"| {label} | row path: {name} | {seconds * 1e6 / total:.2f} | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
