"""The shell writes what the core decides, whatever the tool data and the reply hold.

Generated conversations carry any JSON as tool results (nested lists and dicts, keys of any
text, the keys the row extraction looks for, numbers of any size, null markers, ellipses,
links) and replies that answer, ask, or paste a table (Markdown pipes, CSV fenced or not,
TSV) whose cells are often values of the results; some of their calls and results are
soft-deleted. Each one goes through the real worker: the CLI's click group in this process
(`tests.evals.runner.Cli`), local backend, `dev seed` then one `run --drain`. The oracle is
the pure core played by `tests.chat.drive` over the same documents:

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
from hypothesis import strategies as st

from handlers import phases
from tests.chat import CID, Chat, decision_of, drive
from tests.evals.runner import Cli

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["", "-", "n/a", "\u2026", "...", "| x |", "[a](b)", "=1", "12.5", "1,234"]),
)
keys = st.one_of(
    st.text(max_size=6),
    st.sampled_from(
        ["items", "value", "rows", "columns", "data", "tables", "timestamp", "total",
         "next_link", "truncated", "resultTruncated", "id", "name", "api_token"]
    ),
)  # fmt: skip
results = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=30,
)
requests = st.one_of(
    st.sampled_from(
        ["create a csv", "export as json", "json please", "xml please", "excel", "all of them",
         "csv of the temperature", "as a pdf", "the average as csv", "yes"]
    ),
    st.text(max_size=10),
)  # fmt: skip
mostly = st.sampled_from([True, True, True, False])
deletions = st.sampled_from([False, False, False, False, True])


def leaves(value: Any) -> list[str]:
    """Every key and scalar of a result, as text: what a pasted table's cells often show."""
    if isinstance(value, dict):
        return [text for k, v in value.items() for text in (str(k), *leaves(v))]
    if isinstance(value, list):
        return [text for item in value for text in leaves(item)]
    return [str(value)]


@st.composite
def pasted_table(draw: st.DrawFn, seen: list[str]) -> str:
    """A table as models paste one: a Markdown pipe table, a fenced or unfenced CSV block or
    TSV lines, of some columns and rows, its cells drawn from `seen` or made up."""
    cell = st.one_of(st.text(max_size=8), st.sampled_from(seen or ["x"]))
    width = draw(st.integers(min_value=1, max_value=4))
    lines = [[draw(cell) for _ in range(width)]]
    for _ in range(draw(st.integers(min_value=0, max_value=5))):
        lines.append(
            [draw(cell) for _ in range(draw(st.integers(min_value=1, max_value=width + 1)))]
        )
    shape = draw(st.sampled_from(["pipe", "pipe", "csv", "fenced csv", "tsv"]))
    if shape == "pipe":
        flat = [[" ".join(text.split()).replace("|", "/") for text in line] for line in lines]
        rendered = ["| " + " | ".join(line) + " |" for line in flat]
        text = "\n".join([rendered[0], "|---" * width + "|", *rendered[1:]])
    elif shape == "tsv":
        text = "\n".join("\t".join(" ".join(t.split()) for t in line) for line in lines)
    else:
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(lines)
        text = out.getvalue().rstrip("\n")
        if shape == "fenced csv":
            text = f"```csv\n{text}\n```"
    before = draw(st.sampled_from(["", "Here are the rows:\n\n"]))
    return before + text + draw(st.sampled_from(["", "\n\n...", "\n\nAnything else?"]))


@st.composite
def conversations(draw: st.DrawFn) -> Chat:
    chat = Chat()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        chat.user(draw(requests))
        for _ in range(draw(st.integers(min_value=0, max_value=2))):
            calls = [
                (draw(st.sampled_from(["get_samples", "list_devices", "q"])), draw(results))
                for _ in range(draw(st.integers(min_value=1, max_value=3)))
            ]
            chat.tools(*calls, success=draw(mostly), artifact=draw(mostly))
        reply = draw(st.sampled_from(["answer", "table", "clarification"]))
        if reply == "table":
            seen = [text for a in chat.artifacts.values() for text in leaves(a["result"])]
            chat.reply(draw(pasted_table(seen)))
        elif reply == "clarification":
            chat.reply(draw(st.text(max_size=20)) + "?", clarification=True)
        else:
            chat.reply(draw(st.text(max_size=40)))
    # Soft-deleted calls and results. A deleted user message or reply makes its turn not
    # visible (turn_not_found after retries: docs/contract/stored-data.md), so those stay.
    kept = {m["id"] for m in chat.messages if m["role"] == "user"} | {
        [m for m in chat.messages if m["turn_id"] == turn and m["role"] == "assistant"][-1]["id"]
        for turn in {m["turn_id"] for m in chat.messages}
    }
    for message in chat.messages:
        message["deleted"] = message["id"] not in kept and draw(deletions)
    return chat


def fixture(chat: Chat, limits: list[int | None]) -> dict[str, Any]:
    """`dev seed`'s document: the conversation, its artifacts and one event a turn."""
    events = [
        chat.event(history_limit=limit, turn_number=number).model_dump()
        for number, limit in enumerate(limits, start=1)
    ]
    conversation = {"id": CID, "user_id": "u1", "participants": [], "deleted": False}
    return {
        "conversations": [conversation],
        "messages": chat.messages,
        "artifacts": chat.artifacts,
        "events": events,
    }


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
@given(conversations(), st.lists(st.sampled_from([None, 0, 1, 5, 10, 40]), min_size=3))
def test_the_worker_records_and_writes_what_the_core_decides(
    chat: Chat, limits: list[int | None]
) -> None:
    limits = limits[: chat.turn]
    home = Path(tempfile.mkdtemp(prefix="export-worker-wild-"))
    try:
        cli = Cli(home, None)
        path = home / "conversation.json"
        path.write_text(json.dumps(fixture(chat, limits)), encoding="utf-8")
        cli.run("dev", "seed", str(path))
        cli.run("run", "--drain")
        assert json.loads(cli.run("dlq", "list", "--json")) == []
        records = json.loads(cli.run("turns", "list", "--conversation", CID, "--json"))
        assert [r["turn_id"] for r in records] == [f"t{n}" for n in range(1, chat.turn + 1)]
        for number, (limit, record) in enumerate(zip(limits, records, strict=True), start=1):
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
