"""Per-row cost of each step of the row path, today's code beside its prototype (prototypes.py).

In one process, on one page of telemetry rows shaped like the benchmark's (4 columns), each
step is timed alone (best of --repeat) in microseconds per row, today's function and the
prototype, and their outputs are compared: parsed values, cleaned rows, duplicate
decisions, spooled rows and file bytes must be identical. The de-duplication step runs
over --pages pages, where the cost of searching earlier pages shows.

    .venv/bin/python benchmarks/row_costs.py                 # 100,000 rows; pages 10 and 100
    .venv/bin/python benchmarks/row_costs.py --quick
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prototypes
from workloads import telemetry_page

from handlers import dataset
from handlers.file_layout import action_cells
from handlers.rows import clean_row, extract_rows
from handlers.serialisers.csv_file import csv_chunks
from schemas.documents import Artifact
from worker.spool import RowSpool

HEADER = "| step | today µs/row | prototype µs/row | saved µs/row (= s per 1M rows) | identical |"


def best(work: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall seconds of `repeat` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return min(times), result


def page_bytes(rows: int, page: int = 0) -> bytes:
    """One artifact as the benchmark stores it."""
    artifact = {
        "call_id": "c",
        "name": "list_parameter_history",
        "arguments": {"page": 1},
        "result": telemetry_page(page, rows, rows),
    }
    return orjson.dumps(artifact)


def spool_round_trip(spool_type: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append every row, read them back."""
    with spool_type() as spool:
        for row in rows:
            spool.append("a", row)
        return list(spool.rows("a"))


def dedup_pass(pages: list[list[int]]) -> int:
    """Today: each page's digests searched in every earlier page's sorted array."""
    earlier: list[array[int]] = []
    kept = 0
    for digests in pages:
        page = array("Q")
        for value in digests:
            if earlier and dataset._seen(earlier, value):
                continue
            page.append(value)
            kept += 1
        if page:
            earlier.append(array("Q", sorted(page)))
    return kept


def dedup_structure(pages: list[list[int]], kind: Any) -> int:
    """The same with one of the prototypes' structures for the earlier pages."""
    earlier = kind()
    kept = 0
    for digests in pages:
        page = array("Q")
        for value in digests:
            if value in earlier:
                continue
            page.append(value)
            kept += 1
        if page:
            earlier.add_page(page)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the page")
    parser.add_argument(
        "--pages",
        type=lambda s: [int(p) for p in s.split(",")],
        default=[10, 100],
        help="page counts of the de-duplication step",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.pages, args.repeat = 2_000, [10], 1
    n = args.rows
    data = page_bytes(n)
    lines = [
        f"# row costs, one page of {n:,} rows, python {sys.version.split()[0]}, "
        f"best of {args.repeat}",
        HEADER,
        "|---|---|---|---|---|",
    ]

    def row(step: str, today: float, proto: float, same: bool | str, per: int = n) -> None:
        t, p = today * 1e6 / per, proto * 1e6 / per
        lines.append(f"| {step} | {t:.2f} | {p:.2f} | {t - p:.2f} | {same} |")

    # parse and validate a whole artifact
    t, doc = best(lambda: json.loads(data), args.repeat)
    p, doc2 = best(lambda: prototypes.loads(data), args.repeat)
    row(
        "parse the artifact: json.loads → msgspec (json.loads for what it refuses)",
        t,
        p,
        doc == doc2,
    )
    o, _ = best(lambda: orjson.loads(data), args.repeat)
    row("(reference) orjson.loads: not identical, integers past 64 bits become floats", t, o, "no")
    v, _ = best(lambda: Artifact.model_validate(doc), args.repeat)
    row("Artifact.model_validate of the parsed artifact (today) → nothing", v, 0.0, "n/a")
    result = doc["result"]

    # extract + clean
    t, cleaned = best(lambda: [clean_row(r) for r in extract_rows(result)], args.repeat)
    p, cleaned2 = best(lambda: [prototypes.clean_row(r) for r in extract_rows(result)], args.repeat)
    row("extract_rows + clean_row → flat-row fast path", t, p, cleaned == cleaned2)
    e, _ = best(lambda: list(extract_rows(result)), args.repeat)
    row("(of which) extract_rows alone: a dict copy per row", e, 0.0, "n/a")

    # digest
    t, d1 = best(lambda: [dataset._digest(r) for r in cleaned], args.repeat)
    p, d2 = best(lambda: [prototypes.digest(r) for r in cleaned], args.repeat)
    row(
        "_digest: json.dumps + blake2b → one encoder + str hash", t, p, len(set(d1)) == len(set(d2))
    )

    # de-dup across pages: P pages of n/P rows each (same total), repeats included; the
    # digests are computed once beforehand, so this times the searches alone
    digests = d1
    for pages_count in args.pages:
        per_page = n // pages_count
        pages = [digests[k * per_page : (k + 1) * per_page] for k in range(pages_count)]
        pages[-1] = pages[0][:10] + pages[-1][10:]  # repeats of page 1
        t, k1 = best(lambda pages=pages: dedup_pass(pages), args.repeat)
        for kind in (prototypes.MergedRuns, prototypes.FilteredPages, prototypes.DigestTable):
            p, k2 = best(lambda pages=pages, kind=kind: dedup_structure(pages, kind), args.repeat)
            row(
                f"de-dup search over {pages_count} pages of {per_page:,} (digests given): one "
                f"search per earlier page → {kind.__name__}",
                t,
                p,
                k1 == k2,
            )

    # spool
    t, back = best(lambda: spool_round_trip(RowSpool, cleaned), args.repeat)
    p, back2 = best(lambda: spool_round_trip(prototypes.PickleSpool, cleaned), args.repeat)
    row(
        "spool append + read back: json per row → pickle per 1,024 rows",
        t,
        p,
        back == back2 == cleaned,
    )

    # cells
    from handlers.file_layout import layout
    from handlers.selection import Selection

    columns = tuple(cleaned[0])
    selection = Selection(("a",), False, None, columns, n, (), False)
    shape = layout("csv", None, selection)
    t, c1 = best(lambda: [action_cells(r, "a", selection, shape) for r in back], args.repeat)
    p, c2 = best(
        lambda: [prototypes.action_cells(r, "a", selection, shape) for r in back], args.repeat
    )
    row("action_cells: list comprehension → map", t, p, c1 == c2)

    # csv
    t, b1 = best(lambda: b"".join(csv_chunks(shape.header, c1)), args.repeat)
    p, b2 = best(lambda: b"".join(prototypes.csv_chunks(shape.header, c1)), args.repeat)
    row("csv serialiser: per-cell rules → fast path for plain cells", t, p, b1 == b2)

    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
