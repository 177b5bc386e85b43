"""Generated conversations of any tool data, for tests that hold the worker to an oracle.

Tool results are any JSON (nested lists and dicts, keys of any text, the keys the row
extraction looks for, numbers of any size, null markers, ellipses, links); calls fail or
store no artifact now and then; replies answer, ask a clarifying question, or paste a table
(Markdown pipes, CSV fenced or not, TSV) whose cells are often values of the results; some
calls and results are soft-deleted. `tests/reliability/test_wild_conversations.py` holds the
local worker to the pure core over them, `tests/emulated/test_wild_emulated.py` the Azure
backend to the local one.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from hypothesis import strategies as st

from tests.chat import CID, Chat

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
def conversations(draw: st.DrawFn, cid: str = CID) -> Chat:
    """A conversation of one to three turns under `cid` (see the module docstring)."""
    chat = Chat(cid)
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
    for message in chat.messages:
        calls_or_results = message["role"] == "tool" or bool(message.get("tool_calls"))
        message["deleted"] = calls_or_results and draw(deletions)
    return chat


def fixture(*batch: tuple[Chat, list[int | None]]) -> dict[str, Any]:
    """`dev seed`'s document: each conversation, its artifacts and one event a turn, with the
    turn's `history_limit` from its list (as many as the conversation has turns)."""
    given: dict[str, Any] = {"conversations": [], "messages": [], "artifacts": {}, "events": []}
    for chat, limits in batch:
        given["conversations"].append(
            {"id": chat.cid, "user_id": "u1", "participants": [], "deleted": False}
        )
        given["messages"] += chat.messages
        given["artifacts"].update(chat.artifacts)
        given["events"] += [
            chat.event(history_limit=limit, turn_number=number).model_dump()
            for number, limit in enumerate(limits[: chat.turn], start=1)
        ]
    return given


# A turn's `history_limit`: None (the worker's default), 0 (no history), a few, the cap.
history_limits = st.lists(st.sampled_from([None, 0, 1, 5, 10, 40]), min_size=3, max_size=3)
