"""The shell writes what the core decides, whatever the tool data and the reply hold.

Each conversation `tests/wild.py` generates (any JSON as tool results, pasted tables of
every shape, clarifications, soft-deleted calls and results) goes through the real worker:
the CLI's click group in this process (`tests.evals.runner.Cli`), local backend, `dev seed`
then one `run --drain`. The oracle is the pure core played by `tests.chat.drive` over the
same documents:

- every event ends in exactly one turn record and nothing is dead-lettered (the inputs are
  all valid; bad input has its own corpus in `test_poison.py`);
- each record has the core's decision, and a published one its row source, selection rule
  and row count;
- a json export of action rows holds the core's rows, in order; every other export parses
  in its format.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import openpyxl
from defusedxml import ElementTree
from hypothesis import HealthCheck, event, given, settings

from handlers import phases
from tests.chat import CID, Chat, decision_of, drive
from tests.evals.runner import Cli
from tests.wild import conversations, fixture, history_limits


def expected(chat: Chat, limit: int | None, number: int) -> dict[str, Any]:
    """What the core decides for turn `number`: the record's fields, and the rows."""
    ending, _, rows = drive(
        chat.messages, chat.artifacts, chat.event(history_limit=limit, turn_number=number)
    )
    if not isinstance(ending, phases.ExportPlan):
        return {"decision": decision_of(ending)}
    table = ending.table if ending.row_source == "assistant_table" else None
    return {
        "decision": "published",
        "row_source": ending.row_source,
        "rule": ending.why.rule,
        "row_count": len(rows) if table is None else len(table.rows),
        "rows": rows if table is None else None,
    }


def parses(body: bytes, file_format: str) -> int:
    """The data rows an export holds, read back with its format's own reader; for xlsx, the
    last sheet row holding a cell (a row of nothing but missing cells has none: files.md)."""
    if file_format == "csv":
        return len(list(csv.reader(io.StringIO(body.decode("utf-8-sig"), newline="")))) - 1
    if file_format == "json":
        return len(json.loads(body))
    if file_format == "xml":
        return len(ElementTree.fromstring(body))
    openpyxl.load_workbook(io.BytesIO(body), read_only=True).close()  # a workbook openpyxl reads
    with zipfile.ZipFile(io.BytesIO(body)) as book:
        sheet = book.read("xl/worksheets/sheet1.xml").decode()
    return max(map(int, re.findall(r'<row r="(\d+)"', sheet)), default=1) - 1


def shown(record: dict[str, Any], rows: list[dict[str, Any]] | None) -> int:
    """The data rows the export should show: every row, but for xlsx up to the last row that
    holds a value (a trailing row of nothing but nulls leaves no cell in a sheet)."""
    if record["export"]["format"] != "xlsx" or rows is None:
        return int(record["export"]["row_count"])
    holding = [n for n, row in enumerate(rows, start=1) if any(v is not None for v in row.values())]
    return holding[-1] if holding else 0


def without_nulls(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Each row's values but null, as sorted JSON: a json export writes every column of every
    row (null where the row has none), under headers made unique and printable."""
    return [
        sorted(json.dumps(v, sort_keys=True) for v in r.values() if v is not None) for r in rows
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), history_limits)
def test_the_worker_records_and_writes_what_the_core_decides(
    chat: Chat, limits: list[int | None]
) -> None:
    home = Path(tempfile.mkdtemp(prefix="export-worker-wild-"))
    try:
        cli = Cli(home, None)
        path = home / "conversation.json"
        path.write_text(json.dumps(fixture((chat, limits))), encoding="utf-8")
        cli.run("dev", "seed", str(path))
        cli.run("run", "--drain")
        assert json.loads(cli.run("dlq", "list", "--json")) == []
        records = json.loads(cli.run("turns", "list", "--conversation", CID, "--json"))
        assert [r["turn_id"] for r in records] == [f"t{n}" for n in range(1, chat.turn + 1)]
        for number, (limit, record) in enumerate(zip(limits[: chat.turn], records, strict=True), 1):
            check_record(cli, record, expected(chat, limit, number))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def check_record(cli: Cli, record: dict[str, Any], want: dict[str, Any]) -> None:
    """The record says what the core decided; its export holds those rows."""
    assert record["decision"] == want["decision"]
    event(f"{want['decision']} {want.get('row_source', '')}".strip())
    if want["decision"] != "published":
        return
    export = record["export"]
    got = (export["row_source"], export["selection"]["rule"], export["row_count"])
    assert got == (want["row_source"], want["rule"], want["row_count"])
    body = cli.run("exports", "get", export["export_id"])
    assert parses(body, export["format"]) == shown(record, want["rows"])
    if export["format"] == "json" and want["rows"] is not None:
        assert without_nulls(json.loads(body)) == without_nulls(want["rows"])
