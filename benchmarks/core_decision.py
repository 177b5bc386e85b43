"""CPU cost of the pure decision core: the turn story, the history window and call pairing.

The history is 40 messages (10 earlier turns, each a request, one assistant message with 3
parallel calls, one tool message answering them, a reply) before the current turn, with a
history limit of 40 so the window covers all of it. Everything is in memory: this measures
the decision alone, no I/O. Best of several `timeit` repeats, in microseconds per call.

    .venv/bin/python benchmarks/core_decision.py
    .venv/bin/python benchmarks/core_decision.py --quick
    .venv/bin/python benchmarks/core_decision.py --headline-json   # what run_all.py's case d reads

`--headline-json` prints one JSON line: the headline case alone, in milliseconds a turn.
Case d sets it beside the bare turn: the decision's pure work that the bare turn lacks,
measured with its code and its data warm (the same turn again and again), so a lower bound
of what it costs inside a real turn.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from handlers import phases
from handlers import turn as story
from handlers.compaction import build_citation
from handlers.dataset import RowCollector
from handlers.passthrough import is_derived_request
from handlers.reach_back import Candidate, GroupNames
from handlers.selection import ResultRef, Selection
from handlers.window import history_window, pair, paired_calls
from schemas.documents import Conversation, Message, parse_message
from schemas.events import parse_turn_completed

HEADER = "| case | messages | µs per call | calls/s |"
CID = "conv_core"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FIXTURE = Path(__file__).resolve().parents[1] / "tests/fixtures/public/headline.fixture.json"
PARALLEL = ("list_instances", "list_parameters", "list_parameter_history")


def telemetry(rows: int) -> dict[str, Any]:
    """A tool result of `rows` telemetry samples."""
    items = [
        {
            "timestamp": f"2026-11-19T00:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "parameter": "BatteryVoltage1",
            "value": 12.0 + i % 50 / 100,
            "unit": "V",
        }
        for i in range(rows)
    ]
    return {"page": 1, "total": rows, "items": items}


class History:
    """Stored message documents, as the chat service writes them."""

    def __init__(self) -> None:
        self.documents: list[dict[str, Any]] = []
        self.turn = 0

    def add(self, role: str, **fields: Any) -> str:
        seq = len(self.documents) + 1
        self.documents.append(
            {
                "id": f"m{seq}",
                "conversation_id": CID,
                "turn_id": f"t{self.turn}",
                "seq": seq,
                "role": role,
                "created_at": "2026-11-20T09:00:00Z",
                "deleted": False,
                **fields,
            }
        )
        return f"m{seq}"

    def turn_with_parallel_calls(self, request: str, reply: str, rows: int) -> tuple[str, str]:
        """User, assistant with 3 parallel calls, one tool message, reply: 4 messages."""
        self.turn += 1
        user = self.add("user", content=request)
        calls, results = [], []
        for k, name in enumerate(PARALLEL):
            call_id = f"call_{self.turn}_{k}"
            result = telemetry(rows if name == "list_parameter_history" else 1)
            calls.append({"id": call_id, "name": name, "arguments": {"page": 1}})
            results.append(
                {
                    "call_id": call_id,
                    "name": name,
                    "success": True,
                    "citation": build_citation(result),
                    "artifact": f"artifacts/{CID}/t{self.turn}/{call_id}.json",
                }
            )
        self.add("assistant", content="", tool_calls=calls)
        self.add("tool", results=results)
        return user, self.add("assistant", content=reply, tool_calls=[])

    def plain_turn(self, request: str, reply: str) -> tuple[str, str]:
        """A request answered without tool calls: user and reply."""
        self.turn += 1
        return self.add("user", content=request), self.add("assistant", content=reply)

    def messages(self) -> list[Message]:
        return [parse_message(document) for document in self.documents]


def turn_input(history: History, user: str, reply: str) -> story.TurnInput:
    """The TurnInput the shell would build for the turn (user, reply)."""
    event = {
        "type": "turn.completed",
        "version": 1,
        "event_id": "evt_core",
        "occurred_at": "2026-11-20T09:01:00Z",
        "conversation_id": CID,
        "user_id": "user_core",
        "turn_id": f"t{history.turn}",
        "user_message_id": user,
        "reply_message_id": reply,
        "history_limit": 40,
    }
    return story.TurnInput(
        event=parse_turn_completed(json.dumps(event)),
        conversation=Conversation.model_validate({"id": CID, "user_id": "user_core"}),
        messages=history.messages(),
        history_limit=40,
        artifacts_container="artifacts",
        exports_container="exports",
        now=NOW,
    )


def earlier_turns(history: History) -> None:
    """10 turns of 4 messages each: 40 messages of history with parallel calls."""
    for n in range(10):
        history.turn_with_parallel_calls(
            f"Show the BatteryVoltage1 history of day {n + 1}",
            f"Day {n + 1} averaged 12.4 V with no alarms.",
            rows=450,
        )


def current_turn_input() -> story.TurnInput:
    """40 messages of history, then a turn with 3 parallel calls asking for a csv."""
    history = History()
    earlier_turns(history)
    user, reply = history.turn_with_parallel_calls(
        "Retrieve the BatteryVoltage1 history for sat-07 and create a csv",
        "I retrieved 450 samples; here they are.",
        rows=450,
    )
    return turn_input(history, user, reply)


def reach_back_input() -> story.TurnInput:
    """40 messages of history, then 'now create a csv of that' with no tool calls."""
    history = History()
    earlier_turns(history)
    user, reply = history.plain_turn("Now create a csv of that data", "Creating the csv now.")
    return turn_input(history, user, reply)


def decide_and_select(inp: story.TurnInput) -> phases.Phase:
    """start, then after_fetch with nothing fed: reach-back phase 1 decides from citations."""
    phase = story.start(inp)
    assert isinstance(phase, phases.FetchCurrentTurn)
    return story.after_fetch(inp, phase, story.collector_for(phase, None))


def headline_input() -> tuple[story.TurnInput, dict[str, Any]]:
    """The public headline fixture (7 messages, 900 rows in two pages) and its artifacts."""
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    event = fixture["events"][0]
    inp = story.TurnInput(
        event=parse_turn_completed(json.dumps(event)),
        conversation=Conversation.model_validate(fixture["conversations"][0]),
        messages=[parse_message(m) for m in fixture["messages"]],
        history_limit=10,
        artifacts_container="artifacts",
        exports_container="exports",
        now=NOW,
    )
    return inp, fixture["artifacts"]


def long_request_input(
    chars: int, filler: str = "report.csv data.json notes.xml and not the old ones "
) -> tuple[story.TurnInput, dict[str, Any]]:
    """The headline turn whose request is CHARS characters of FILLER (by default a pasted
    listing naming formats ~CHARS/17 times): a message's cost should grow with its length,
    not with its length times its mentions."""
    inp, artifacts = headline_input()
    text = (filler * (chars // len(filler) + 1))[: chars - 14] + " create a csv"
    messages = [
        msgspec.structs.replace(m, content=text) if m.id == inp.event.user_message_id else m
        for m in inp.messages
    ]
    return msgspec.structs.replace(inp, messages=messages), artifacts


def shared_id_history(calls: int) -> list[Message]:
    """One assistant message of CALLS parallel calls that all reuse one id, and their results."""
    history = History()
    history.turn = 1
    history.add("assistant", content="", tool_calls=[
        {"id": "call_same", "name": "get_page", "arguments": {"page": k}} for k in range(calls)
    ])  # fmt: skip
    history.add("tool", results=[
        {"call_id": "call_same", "name": "get_page", "success": True} for _ in range(calls)
    ])  # fmt: skip
    return history.messages()


def feed_pages(pages: int) -> Selection:
    """PAGES one-row pages of one action fed to a collector, then the selection."""
    collector = RowCollector()
    refs = [
        ResultRef("t1", "get_page", f"call_{k}", f"artifacts/{CID}/t1/call_{k}.json", None, k)
        for k in range(pages)
    ]
    collector.expect(refs)
    for k, ref in enumerate(refs):
        collector.feed(ref, {"items": [{"page": k, "value": 1.5}]})
    return collector.select()


def request_naming_data(cues: int) -> tuple[str, GroupNames]:
    """A request with CUES "average" cues, each naming the data: the group's one call has a
    200 KB argument holding the word, so every cue asks whether it names the group."""
    notes = " ".join(f"sample{k}" for k in range(20_000)) + " average"
    ref = ResultRef("t1", "get_page", "call_0", None, None, 0, {"notes": notes})
    return "show the average " * cues, GroupNames([Candidate("t1", "get_page", (ref,), None, 0)])


def many_actions_input(actions: int) -> tuple[story.TurnInput, dict[str, Any]]:
    """A turn of ACTIONS parallel calls of distinct actions, 12 rows each: one combined export."""
    history = History()
    history.turn = 1
    user = history.add("user", content="Fetch every instance's readings and create a csv")
    calls, results, artifacts = [], [], {}
    for k in range(actions):
        result = {"items": [{"instance": k, "value": 1.5}] * 12}
        artifact = f"artifacts/{CID}/t1/call_{k}.json"
        artifacts[artifact] = {"result": result}
        calls.append({"id": f"call_{k}", "name": f"read_instance_{k}", "arguments": {"id": k}})
        results.append({
            "call_id": f"call_{k}", "name": f"read_instance_{k}", "success": True,
            "citation": build_citation(result), "artifact": artifact,
        })  # fmt: skip
    history.add("assistant", content="", tool_calls=calls)
    history.add("tool", results=results)
    return turn_input(history, user, history.add("assistant", content="Here it is.")), artifacts


def whole_story(inp: story.TurnInput, artifacts: dict[str, Any]) -> phases.Phase:
    """start, feed each round's artifacts' rows (in memory), after_fetch: the ExportPlan."""
    phase = story.start(inp)
    collector = None
    while isinstance(phase, phases.FetchCurrentTurn | phases.FetchDeferredGroups):
        collector = story.collector_for(phase, collector)
        for ref in phase.fetch:
            assert ref.artifact is not None
            for _ in collector.feed(ref, artifacts[ref.artifact]["result"]):
                pass
        phase = story.after_fetch(inp, phase, collector)
    assert isinstance(phase, phases.ExportPlan), phase
    return phase


def per_call_us(work: Callable[[], object], repeats: int, quick: bool) -> float:
    """Best of `repeats` timeit runs, in microseconds per call."""
    timer = timeit.Timer(work)
    number = 20 if quick else timer.autorange()[0]
    return min(timer.repeat(repeat=repeats, number=number)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timeit repeats (best is kept)")
    parser.add_argument("--quick", action="store_true", help="few repeats, for a CI smoke run")
    parser.add_argument(
        "--headline-json", action="store_true", help="only the headline case, as one JSON line"
    )
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    if args.headline_json:
        headline, artifacts = headline_input()
        number = 20 if args.quick else 100
        timer = timeit.Timer(lambda: whole_story(headline, artifacts))
        timer.timeit(number)  # the first calls load and compile what a turn needs
        best = min(timer.repeat(repeat=repeats, number=number)) / number
        print(json.dumps({"ms": round(best * 1000, 3), "number": number, "repeats": repeats}))
        return 0

    current = current_turn_input()
    reach = reach_back_input()
    headline, artifacts = headline_input()
    history = list(current.messages)[:40]
    first = story.start(current)
    assert isinstance(first, phases.FetchCurrentTurn) and len(first.fetch) == 1, first
    plan = decide_and_select(reach)
    assert isinstance(plan, phases.FetchReachBack), plan
    assert len(pair(history)) == 40 and len(history_window(history, 40)) == 40

    cases: list[tuple[str, int, Callable[[], object]]] = [
        ("start (current turn: 3 parallel calls, 40 earlier)", 44, lambda: story.start(current)),
        ("start + after_fetch (reach-back, from citations)", 42, lambda: decide_and_select(reach)),
        ("history_window(limit 40)", 40, lambda: history_window(history, 40)),
        ("pair", 40, lambda: pair(history)),
        ("paired_calls", 40, lambda: paired_calls(history)),
        (
            "headline: start + 900 rows fed + after_fetch",
            7,
            lambda: whole_story(headline, artifacts),
        ),
    ]
    for chars in (10_000, 100_000):
        long_turn, long_artifacts = long_request_input(chars)
        cases.append(
            (
                f"headline, its request {chars:,} characters naming formats ~{chars // 17:,} times",
                7,
                lambda t=long_turn, a=long_artifacts: whole_story(t, a),  # type: ignore[misc]
            )
        )
    # mentions with no space, digit or punctuation between them: no word boundary to stop at
    joined, joined_artifacts = long_request_input(40_000, "csv'")
    cases.append(
        (
            'headline, its request 40,000 characters of "csv\'" (10,000 joined mentions)',
            7,
            lambda: whole_story(joined, joined_artifacts),
        )
    )
    # mentions joined by arrows: every one a conversion target inside one piece of text
    arrows, arrows_artifacts = long_request_input(40_000, "csv->")
    cases.append(
        (
            'headline, its request 40,000 characters of "csv->" (8,000 joined targets)',
            7,
            lambda: whole_story(arrows, arrows_artifacts),
        )
    )
    # mentions glued to a script written without spaces: each one a mention of its own
    glued, glued_artifacts = long_request_input(40_000, "CSV\u3067")
    cases.append(
        (
            'headline, its request 40,000 characters of "CSV\u3067" (10,000 glued mentions)',
            7,
            lambda: whole_story(glued, glued_artifacts),
        )
    )
    shared = shared_id_history(8_000)
    assert len(pair(shared)) == 2 and len(feed_pages(8_000).source_artifacts) == 8_000
    request, names = request_naming_data(5_000)
    assert not is_derived_request(request, names)
    wide, wide_artifacts = many_actions_input(4_000)
    assert whole_story(wide, wide_artifacts).selection.row_count == 48_000
    cases += [
        (
            "a turn of 4,000 parallel calls of distinct actions, 12 rows each: whole story",
            4_003,
            lambda: whole_story(wide, wide_artifacts),
        ),
        ("pair: 8,000 parallel calls sharing one id", 2, lambda: pair(shared)),
        ("8,000 one-row pages of one action fed, then selected", 0, lambda: feed_pages(8_000)),
        (
            "is_derived_request: 5,000 cues naming the data, a 200 KB call argument",
            0,
            lambda: is_derived_request(request, names),
        ),
    ]
    print(
        f"# core decision, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
        f"{datetime.now(UTC):%Y-%m-%d}, best of {repeats}"
    )
    print(HEADER)
    print("|---|---|---|---|")
    for name, count, work in cases:
        us = per_call_us(work, repeats, args.quick)
        print(f"| {name} | {count} | {us:,.0f} | {1e6 / us:,.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
