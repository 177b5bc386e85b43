"""How the eval conversations talk: request phrasings and the helpers scenarios share."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from . import oracle
from .builders import Case, Group, page, telemetry

PHRASES = {
    "csv": ["a csv", "a CSV file", "CSV"],
    "json": ["a JSON file", "json", "JSON"],
    "xml": ["an XML file", "XML", "xml"],
    "xlsx": ["an Excel file", "a spreadsheet", "an xlsx"],
}
ASKS = [
    "create {p}",
    "Can you export this as {p}?",
    "please give me {p}",
    "I'd like {p} of that",
    "export it to {p}",
    "could you make {p} of the results?",
    "download it as {p}",
    "Put it in {p}, thanks",
]
DONE = [
    "Done, the file is attached.",
    "Here is your export.",
    "I've prepared the file for you.",
    "The export is ready.",
]


def ask(rng: random.Random, fmt: str) -> str:
    return rng.choice(ASKS).format(p=rng.choice(PHRASES[fmt]))


def history_call(parameter: str, rows: list[dict[str, Any]], number: int, size: int) -> Any:
    arguments = {"instance_id": rows[0]["instance_id"], "parameter": parameter, "page": number}
    return ("list_parameter_history", arguments, page(rows, number, size, parameter=parameter))


Made = dict[tuple[str, str], Group]


def call(case: Case, made: Made, *calls: tuple[str, dict[str, Any], Any], **opts: Any) -> None:
    """Make parallel calls and remember every (turn, action) group's artifacts and rows."""
    for group in case.tools(*calls, **opts):
        if opts.get("success", True):
            held = made.setdefault((case.turn_id, group.action), Group(group.action))
            held.artifacts += group.artifacts
            held.rows += group.rows


def history(
    case: Case,
    made: Made,
    parameter: str,
    n: int,
    *,
    action: str = "list_parameter_history",
    size: int = 450,
    instance: str = "sat-07",
    **opts: Any,
) -> None:
    """A parameter's samples fetched in pages of `size` (parallel calls in one message)."""
    rows = telemetry(parameter, n, instance=instance, seed=len(case.messages))
    calls = [
        (
            action,
            {"instance_id": instance, "parameter": parameter, "page": k},
            page(rows, k, size, parameter=parameter),
        )
        for k in range(1, math.ceil(n / size) + 1)
    ]
    call(case, made, *calls, **opts)


def turn_with(case: Case, text: str, reply: str, fetch: Callable[[], None]) -> None:
    case.user(text)
    fetch()
    case.reply(reply)


def finish(
    case: Case,
    made: Made,
    text: str,
    fmt: str,
    want: tuple[str, str],
    rule: str,
    history_limit: int = 40,
    window_turns: set[str] | None = None,
) -> None:
    """The final turn: a request with no rows of its own; label the group the case means."""
    earlier = {m["turn_id"] for m in case.messages}
    case.user(text)
    case.reply(final_reply(text))
    case.event(history_limit)
    found = oracle.groups(case.messages, window_turns or earlier)
    oracle_rule, best = oracle.winner(text, found)
    assert (oracle_rule, (best.turn_id, best.action)) == (rule, want), (
        f"case {case.name} is ambiguous: the contract picks {oracle_rule} {best.action}"
    )
    group = made[want]
    case.expect("published", fmt, source="prior_turn", rule=rule, rows=group.rows, groups=[group])


def final_reply(text: str) -> str:
    return "Here is the file." if len(text) % 2 else "Done: the export is attached."
