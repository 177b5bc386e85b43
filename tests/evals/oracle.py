"""The relevance rule of docs/contract/decision.md step 7 as its text reads, to check each
relevance case's design.

The generator names the group a case means; this oracle, written from the contract alone (only
its minimal stop-word list), confirms that group is the one the contract's rule picks, so a
case whose design is ambiguous fails at generation instead of becoming a wrong label.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# docs/contract/decision.md step 7: format words and synonyms, the words of asking for a file
# or for data, and
# (a short list of) English function words.
STOP = frozenset(
    [
        "csv",
        "json",
        "xml",
        "xlsx",
        "xls",
        "excel",
        "spreadsheet",
        "pdf",
        "docx",
        "doc",
        "word",
        "md",
        "markdown",
        "create",
        "make",
        "export",
        "generate",
        "give",
        "get",
        "pull",
        "fetch",
        "retrieve",
        "show",
        "put",
        "turn",
        "send",
        "download",
        "convert",
        "save",
        "produce",
        "attach",
        "file",
        "data",
        "dataset",
        "table",
        "row",
        "rows",
        "record",
        "records",
        "value",
        "values",
        "result",
        "results",
        "sample",
        "samples",
        "list",
        "all",
        "every",
        "the",
        "a",
        "an",
        "of",
        "for",
        "to",
        "in",
        "on",
        "at",
        "by",
        "as",
        "and",
        "or",
        "with",
        "from",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "me",
        "my",
        "you",
        "your",
        "our",
        "we",
        "us",
        "please",
        "can",
        "could",
        "would",
        "will",
        "into",
        "is",
        "are",
        "be",
        "can't",
        "here",
        "there",
        "them",
        "i",
        "what",
        "which",
    ]
)


def words(text: str) -> Iterator[str]:
    for piece in re.findall(r"[^\W_]+", text):
        for part in re.split(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])|(?<=[a-z])(?=[A-Z])", piece):
            if part:
                yield part.lower()


def subject(text: str) -> set[str]:
    return {w for w in words(text) if len(w) >= 3 and not w.isdigit() and w not in STOP}


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if not re.fullmatch(r"<(dict|list) with \d+ (keys|items)>", value):
            yield re.sub(r"…\[truncated \d+ chars\]$", "", value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


@dataclass
class OracleGroup:
    turn_id: str
    action: str
    first: int
    last: int
    estimate: int
    words: set[str]


def groups(messages: list[dict[str, Any]], turns: set[str]) -> list[OracleGroup]:
    """(turn, action) groups of the successful results in the given turns, in call order."""
    calls = {
        c["id"]: (m["turn_id"], c)
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls") or []
    }
    found: dict[tuple[str, str], OracleGroup] = {}
    order = 0
    for message in messages:
        if message["role"] != "tool" or message["turn_id"] not in turns:
            continue
        for result in message["results"]:
            turn_id, call = calls[result["call_id"]]
            if not result["success"]:
                continue
            key = (turn_id, result["name"])
            group = found.setdefault(
                key, OracleGroup(turn_id, result["name"], order, order, 0, set())
            )
            group.last = order
            order += 1
            citation = result["citation"]
            group.estimate += citation.get("row_count") or _marker_estimate(citation["result"])
            group.words |= set(words(result["name"]))
            group.words |= {w for s in strings(call["arguments"]) for w in words(s)}
            group.words |= {w for c in citation["columns"] for w in words(c)}
            group.words |= {w for s in strings(citation["result"]) for w in words(s)}
    return list(found.values())


def _marker_estimate(result: Any) -> int:
    items = result.get("items") if isinstance(result, dict) else result
    if not isinstance(items, list):
        return 1
    last = items[-1] if items else None
    if isinstance(last, dict) and list(last) == ["remaining_items"]:
        return len(items) - 1 + int(last["remaining_items"])
    return len(items)


def winner(request: str, found: list[OracleGroup]) -> tuple[str, OracleGroup]:
    """The rule and the group docs/contract/decision.md step 7's reach-back picks."""
    words_asked = subject(request)
    newest = {g.turn_id: max(h.last for h in found if h.turn_id == g.turn_id) for g in found}
    datasets = [g for g in found if g.estimate >= 10]
    named = [g for g in datasets if len(words_asked & g.words) > 0]
    if named:
        best = max(
            named,
            key=lambda g: (len(words_asked & g.words), newest[g.turn_id], g.estimate, -g.first),
        )
        return "reach_back_named", best
    if datasets:
        turn = max(newest[g.turn_id] for g in datasets)
        best = max(
            (g for g in datasets if newest[g.turn_id] == turn), key=lambda g: (g.estimate, -g.first)
        )
        return "reach_back_newest", best
    with_rows = [g for g in found if g.estimate > 0]
    return "reach_back_any", max(with_rows, key=lambda g: g.last)
