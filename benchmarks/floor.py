"""How close pure Python can get to the bare pipeline on the row path: the floor, measured.

In one process, over the same pages of telemetry rows (PAGES artifacts of ROWS rows, as JSON
bytes in memory), three pipelines from artifact bytes to csv bytes:

- bare: orjson.loads each page, `csv.writer.writerows` of its rows (the limit of run_all.py
  without start-up and file I/O);
- per row: today's row path with every per-row prototype of prototypes.py (msgspec parse,
  flat-row clean, msgspec digest, filtered de-dup search, pickled spool, fast csv cells):
  one Python call chain per row, as the collector and the serialiser are shaped today;
- per page: the same rules applied a page at a time with C-level primitives where a whole
  page allows it (every row a flat dict of text and numbers with the same known keys in the
  same order, no text cell a spreadsheet would run or that needs quoting beyond `,` and
  `"`): keys, types and secrets checked once per page, digests by `map(hash, map(encode,
  rows))`, the page's value tuples spooled in one `marshal.dumps` (exact for JSON values,
  read back by this process only), the csv by `csv.writer.writerows`. A page that fails a
  check takes the per-row path, so the output is the same whatever the input.

The three csv outputs must be byte-identical (checked). µs per row and the ratio to bare
give the floor of the row path; start-up and file I/O are measured by run_all.py.

    .venv/bin/python benchmarks/floor.py                       # 10 x 100,000 and 100 x 10,000
    .venv/bin/python benchmarks/floor.py --quick
"""

from __future__ import annotations

import argparse
import csv
import io
import marshal
import math
import sys
import time
from array import array
from collections.abc import Callable
from functools import partial
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prototypes
from workloads import telemetry_page

from handlers.dataset import RowCollector
from handlers.file_layout import action_cells, layout
from handlers.rows import is_secret_key
from handlers.selection import ResultRef, Selection
from handlers.serialisers.csv_file import _record, csv_chunks
from worker.spool import RowSpool

_IS_STR = partial(type.__instancecheck__, str)
_IS_FLOAT = partial(type.__instancecheck__, float)
_PLAIN = frozenset({str, int, float})
_FORMULA_AFTER_SEPARATOR = tuple(f"\x1f{c}" for c in "=+-@\t ")
_MASK = (1 << 64) - 1


def pages_bytes(pages: int, rows: int) -> list[bytes]:
    """The artifacts as stored: JSON bytes of one telemetry page each."""
    return [
        orjson.dumps(
            {
                "call_id": f"c{p}",
                "name": "h",
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


def per_row(data: list[bytes], patched: bool) -> bytes:
    """The collector, spool and serialiser as shaped today; with or without the prototypes."""
    from handlers import dataset

    saved = (dataset.clean_row, dataset._digest, dataset.RowCollector._page)
    if patched:
        prototypes.apply(["clean", "digest", "seen"])
    try:
        return _per_row(data, patched)
    finally:
        dataset.clean_row, dataset._digest, dataset.RowCollector._page = saved  # type: ignore[method-assign]


def _per_row(data: list[bytes], patched: bool) -> bytes:
    loads = prototypes.loads if patched else __import__("json").loads
    spool_type: Any = prototypes.PickleSpool if patched else RowSpool
    collector = RowCollector(None)
    with spool_type() as spool:
        for order, raw in enumerate(data):
            ref = ResultRef("t", "h", f"c{order}", f"a{order}", None, order)
            for row in collector.feed(ref, loads(raw)["result"]):
                spool.append("h", row)
        selection = collector.select()
        shape = layout("csv", None, selection)
        cells = (
            (prototypes.action_cells if patched else action_cells)(row, "h", selection, shape)
            for row in spool.rows("h")
        )
        chunks = (prototypes.csv_chunks if patched else csv_chunks)(shape.header, cells)
        return b"".join(chunks)


# --------------------------------------------------------------------------------------
def flat_keys(rows: list[dict[str, Any]]) -> tuple[str, ...] | None:
    """The keys of a page every row of which has the same known non-secret keys, in the same
    order, and only text or numbers as values; None when a row does not."""
    if not rows:
        return None
    keys = tuple(rows[0])
    if any(not isinstance(k, str) or is_secret_key(k) for k in keys):
        return None
    if not all(map(keys.__eq__, map(tuple, rows))):
        return None
    if not _PLAIN.issuperset(map(type, chain.from_iterable(map(dict.values, rows)))):
        return None
    return keys


def csv_ready(rows: list[tuple[Any, ...]]) -> bool:
    """Whether csv.writer writes these rows of cells as the worker's rules do: finite
    floats, and text cells without line breaks, surrogates or a formula start (quotes and
    commas are quoted the same way by both)."""
    values = list(chain.from_iterable(rows))
    if not all(map(math.isfinite, filter(_IS_FLOAT, values))):
        return False
    text = "\x1f" + "\x1f".join(filter(_IS_STR, values))
    if "\r" in text or "\n" in text or any(map(text.__contains__, _FORMULA_AFTER_SEPARATOR)):
        return False
    return text.isascii() or not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def per_page(data: list[bytes]) -> bytes:
    """The page-at-a-time path (a page that does not qualify is not handled here: the
    benchmark's pages all do, and the per-row path above is what they would take)."""
    earlier = prototypes.DigestTable()
    spool = io.BytesIO()
    columns: dict[str, None] = {}
    for raw in data:
        rows = prototypes.loads(raw)["result"]["items"]
        keys = flat_keys(rows)
        if keys is None:
            raise NotImplementedError("a page the bulk path does not take")
        texts = list(map(prototypes._SORTED_JSON, rows))
        if b"null" in b"".join(texts):  # a non-finite float: the canonical text decides
            digests = [prototypes.digest(row) for row in rows]
        else:
            digests = [d & _MASK for d in map(hash, texts)]
        del texts
        values = list(map(tuple, map(dict.values, rows)))  # cells in `keys` order
        if earlier.count or earlier.zero:
            kept_at = [i for i, d in enumerate(digests) if d not in earlier]
            if len(kept_at) < len(values):
                values = [values[i] for i in kept_at]
                digests = [digests[i] for i in kept_at]
        columns.update(dict.fromkeys(keys))
        blob = marshal.dumps((keys, values))  # exact for JSON values; this process only
        spool.write(len(blob).to_bytes(8, "little") + blob)
        earlier.add_page(array("Q", digests))
        del rows, digests, values
    header = tuple(columns)
    selection = _selection(header)
    shape = layout("csv", None, selection)
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    out.write("\ufeff" + _record(shape.header))
    spool.seek(0)
    while size := int.from_bytes(spool.read(8), "little"):
        keys, values = marshal.loads(spool.read(size))
        if keys == header and csv_ready(values):
            writer.writerows(values)
        else:
            for cells in values:
                row = dict(zip(keys, cells, strict=True))
                line = prototypes.csv_line(action_cells(row, "h", selection, shape), len(header))
                out.write(line + "\r\n")
    return out.getvalue().encode("utf-8")


def _selection(columns: tuple[str, ...]) -> Selection:
    return Selection(("h",), False, None, columns, 0, (), False)


# --------------------------------------------------------------------------------------
def best(work: Callable[[], bytes], repeat: int) -> tuple[float, bytes]:
    times, out = [], b""
    for _ in range(repeat):
        started = time.perf_counter()
        out = work()
        times.append(time.perf_counter() - started)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="10x100000,100x10000", help="PAGESxROWS,...")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--today", action="store_true", help="also time today's per-row path")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.repeat = "10x2000", 1
    print("| pages × rows | pipeline | µs/row | ratio to bare | same bytes as bare |")
    print("|---|---|---|---|---|")
    for shape in args.shapes.split(","):
        pages, rows = (int(x) for x in shape.split("x"))
        data = pages_bytes(pages, rows)
        total = pages * rows
        t_bare, reference = best(lambda data=data: bare(data), args.repeat)
        runs: list[tuple[str, Callable[[], bytes]]] = [
            ("per page (prototype)", lambda data=data: per_page(data)),
            ("per row, every prototype", lambda data=data: per_row(data, True)),
        ]
        if args.today:
            runs.append(("per row, today", lambda data=data: per_row(data, False)))
        print(
            f"| {pages} × {rows:,} | bare (orjson + csv.writer) | {t_bare * 1e6 / total:.2f} "
            "| 1.0x | — |",
            flush=True,
        )
        for name, work in runs:
            seconds, out = best(work, args.repeat)
            print(
                f"| {pages} × {rows:,} | {name} | {seconds * 1e6 / total:.2f} | "
                f"{seconds / t_bare:.1f}x | {out == reference} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
