"""The limit: the irreducible work of an export, with nothing of this project in it.

Two modes, each over the artifact files a worker home already holds (named in a JSON
manifest written by `run_all.py`), each run as its own small process:

- `rows OUT MANIFEST`: read each artifact file in turn, parse it whole with orjson, write
  its rows with `csv.writer` to OUT (UTF-8 with a BOM, CRLF: the bytes the worker writes
  for these rows), flush and fsync. One artifact's parsed rows are alive at a time.
- `turns HOME MANIFEST`: per turn, read and parse its winning artifacts, write the csv to a
  staged file, fsync it and rename it into place, then two SQLite commits (WAL,
  synchronous=FULL) of a small turn record: what one turn cannot do without.

It prints one JSON object: rows written and the seconds of the work loop.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import sys
import tempfile
import time
from operator import itemgetter
from pathlib import Path
from typing import Any

import orjson


def _items(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        document = orjson.loads(handle.read())
    items: list[dict[str, Any]] = document["result"]["items"]
    return items


def write_rows(writer: Any, paths: list[str], header: list[str] | None) -> tuple[list[str], int]:
    """Parse each artifact and write its rows; the header is the first row's keys."""
    count = 0
    for path in paths:
        items = _items(path)
        if header is None:
            header = list(items[0])
            writer.writerow(header)
        # Cells in header order, picked in C: the rows of these workloads share one shape.
        writer.writerows(map(itemgetter(*header), items))
        count += len(items)
        del items  # one artifact's rows alive at a time, as a streaming worker would
    return header or [], count


def rows(out: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Mode `rows`: every artifact of the manifest into one csv file."""
    started = time.perf_counter()
    with open(out, "w", encoding="utf-8-sig", newline="") as handle:
        _, count = write_rows(csv.writer(handle), manifest["artifacts"], None)
        handle.flush()
        os.fsync(handle.fileno())
    return {"rows": count, "seconds": time.perf_counter() - started}


def turns(home: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Mode `turns`: per turn, its csv (staged, fsync, rename) and two durable commits."""
    # A fresh database and folder for every run, and nothing deleted: on a filesystem
    # without a journal, every inode made in the minutes after a deletion costs more
    # (PROFILE.md, twenty-second round), so a run must not follow its own deletions.
    out = Path(tempfile.mkdtemp(prefix="bare-", dir=home))
    staging = out / ".staging"
    staging.mkdir(parents=True, exist_ok=True)
    database = sqlite3.connect(out / "bare.db", isolation_level=None)
    database.execute("PRAGMA journal_mode = WAL")
    database.execute("PRAGMA synchronous = FULL")
    database.execute("CREATE TABLE IF NOT EXISTS turns (id TEXT PRIMARY KEY, doc TEXT NOT NULL)")
    started = time.perf_counter()
    count = 0
    for turn in manifest["turns"]:
        final = out / turn["conversation_id"] / f"{turn['turn_id']}.csv"
        final.parent.mkdir(exist_ok=True)
        staged = staging / f"{turn['turn_id']}.part"
        with open(staged, "w", encoding="utf-8-sig", newline="") as handle:
            _, written = write_rows(csv.writer(handle), turn["artifacts"], None)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staged, final)
        count += written
        record = {
            "id": turn["turn_id"],
            "conversation_id": turn["conversation_id"],
            "decision": "published",
            "row_count": written,
            "event_sent": False,
        }
        _commit(database, "INSERT INTO turns (id, doc) VALUES (?, ?)", record["id"], record)
        record["event_sent"] = True
        _commit(database, "UPDATE turns SET doc = ? WHERE id = ?", None, record)
    seconds = time.perf_counter() - started
    database.close()
    return {"rows": count, "turns": len(manifest["turns"]), "seconds": seconds}


def _commit(
    database: sqlite3.Connection, sql: str, key: str | None, record: dict[str, Any]
) -> None:
    doc = orjson.dumps(record).decode()
    database.execute("BEGIN IMMEDIATE")
    database.execute(sql, (key, doc) if key is not None else (doc, record["id"]))
    database.execute("COMMIT")


def main(argv: list[str]) -> int:
    mode, target, manifest_path = argv
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    answer = rows(Path(target), manifest) if mode == "rows" else turns(Path(target), manifest)
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
