"""Properties of the whole decision (decision.md), over generated conversations.

Each example is a conversation of one to three turns built the way the chat service stores
it: requests that name a format or none; calls of a few actions, those that stored an
artifact made in parallel, the others (failed, or without an artifact) one by one, some
pages repeating rows of another; and replies that answer, ask a clarifying question, paste
a composed table or paste an excerpt of a page. `tests.chat.drive` plays the shell.
"""

from __future__ import annotations

from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handlers import phases
from schemas.vocabulary import Decision
from tests.chat import Chat, decision_of, drive, samples

REQUESTS = (
    "create a csv",
    "export the samples as json",
    "give me an xml of the history",
    "put it in an excel file please",
    "show me the battery history",
    "thanks",
    "export the history as a pdf",
    "calculate the hourly average and create a csv",
    "all of them",
    "",
)
NAMES_A_FORMAT = ("csv", "json", "xml", "excel", "pdf")
ANSWERS = ("Here it is.", "Done, the file has every sample.", "The call failed.")
CLARIFICATIONS = ("Which columns do you want?", "Should each row be one sample?")
TABLE = "| hour | avg |\n|---|---|\n| 00 | 12.01 |\n| 01 | 12.02 |"
ACTIONS = ("get_battery", "get_samples", "list_devices")
ENDINGS_THAT_READ_NOTHING = {
    "no_request",
    "unsupported_format",
    "clarification",
    "clarification_limit",
    "derived_output_without_table",
}

calls = st.lists(
    st.tuples(
        st.sampled_from(ACTIONS),
        st.integers(min_value=0, max_value=25),  # rows on the page
        st.sampled_from((0, 0, 10)),  # first sample: a page may repeat another's rows
        st.booleans(),  # success
        st.booleans(),  # has an artifact
    ),
    max_size=3,
)
turns = st.lists(
    st.tuples(
        st.sampled_from(REQUESTS),
        calls,
        st.sampled_from(("answer", "answer", "clarification", "clarification", "table", "excerpt")),
        st.sampled_from(ANSWERS + CLARIFICATIONS),
    ),
    min_size=1,
    max_size=3,
)


def build(spec: list[tuple[Any, ...]]) -> tuple[Chat, list[str]]:
    """The conversation, and each turn's reply kind."""
    chat = Chat()
    kinds = []
    for request, turn_calls, kind, text in spec:
        chat.user(request)
        # Calls that succeeded with an artifact are made in parallel, in one message; each
        # other call is a message of its own.
        stored = [
            (a, samples(start + n, start)) for a, n, start, ok, art in turn_calls if ok and art
        ]
        if stored:
            chat.tools(*stored)
        for action, n, start, success, artifact in turn_calls:
            if not (success and artifact):
                chat.tools((action, samples(start + n, start)), success=success, artifact=artifact)
        if kind == "clarification":
            chat.reply(text if text in CLARIFICATIONS else CLARIFICATIONS[0], clarification=True)
        elif kind == "table":
            chat.reply(TABLE)
        elif kind == "excerpt" and (pasted := excerpt(turn_calls)):
            chat.reply(f"Here are the first samples:\n\n{pasted}\n\nThe file has them all.")
        else:
            chat.reply(text if text in ANSWERS else ANSWERS[0], clarification=False)
            kind = "answer"
        kinds.append(kind)
    return chat, kinds


def excerpt(turn_calls: list[tuple[Any, ...]]) -> str | None:
    """A markdown table of the first rows of the turn's first stored page of 2 rows or more,
    fewer rows than that page holds: what a model pastes beside the data it fetched."""
    for _action, n, start, success, artifact in turn_calls:
        if success and artifact and n >= 2:
            items = samples(start + n, start)["items"][: min(3, n - 1)]
            lines = [f"| {i['timestamp']} | {i['value']} |" for i in items]
            return "\n".join(["| timestamp | value |", "|---|---|", *lines])
    return None


def artifact_rows(chat: Chat, paths: list[str], combined: bool) -> set[tuple[Any, ...]]:
    """The rows the artifacts at `paths` hold; with their action when groups are combined."""
    return {
        (chat.artifacts[path]["name"] if combined else None, item["timestamp"], item["value"])
        for path in paths
        for item in chat.artifacts[path]["result"]["items"]
    }


def decide(
    chat: Chat, history_limit: int = 10, turn_number: int | None = None
) -> tuple[phases.Ending, list[str], list[dict[str, Any]]]:
    """The core's decision on the latest turn of `chat` (or on turn `turn_number`)."""
    return drive(chat.messages, chat.artifacts, chat.event(history_limit, turn_number=turn_number))


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(turns, st.integers(min_value=0, max_value=40))
def test_decision_ends_in_a_documented_decision_and_is_deterministic(
    spec: list[tuple[Any, ...]], history_limit: int
) -> None:
    chat, _ = build(spec)
    event = chat.event(history_limit=history_limit)
    first = drive(chat.messages, chat.artifacts, event)
    again = drive(chat.messages, chat.artifacts, event)
    assert decision_of(first[0]) in get_args(Decision)
    assert decision_of(first[0]) == decision_of(again[0])
    assert first[1:] == again[1:]
    if isinstance(first[0], phases.ExportPlan):
        assert isinstance(again[0], phases.ExportPlan)
        assert (first[0].export_id, first[0].blob) == (again[0].export_id, again[0].blob)


@SETTINGS
@given(turns, st.integers(min_value=0, max_value=40))
def test_only_artifacts_of_the_conversation_are_read_each_once(
    spec: list[tuple[Any, ...]], history_limit: int
) -> None:
    chat, _ = build(spec)
    outcome, read, _ = decide(chat, history_limit)
    assert set(read) <= set(chat.artifacts)
    assert len(read) == len(set(read))
    if decision_of(outcome) in ENDINGS_THAT_READ_NOTHING:
        assert read == []


@SETTINGS
@given(turns, st.integers(min_value=0, max_value=40))
def test_published_rows_are_rows_the_read_artifacts_hold(
    spec: list[tuple[Any, ...]], history_limit: int
) -> None:
    chat, _ = build(spec)
    outcome, read, rows = decide(chat, history_limit)
    if not isinstance(outcome, phases.ExportPlan) or outcome.selection is None:
        return
    selection = outcome.selection
    # The file's sources were read (a page that added no row is read but is no source), and
    # the file holds the rows those reads held, each once.
    assert set(selection.source_artifacts) <= set(read)
    assert 0 < len(rows) == selection.row_count
    source = selection.source_column
    held = artifact_rows(chat, read, combined=source is not None)
    exported = [
        (row.get(source) if source else None, row["timestamp"], row["value"]) for row in rows
    ]
    assert set(exported) <= held
    assert len(exported) == len(set(exported)) == len(held)


@SETTINGS
@given(turns)
def test_a_pasted_excerpt_loses_to_the_action_rows_it_was_taken_from(
    spec: list[tuple[Any, ...]],
) -> None:
    chat, kinds = build(spec)
    outcome, _, _ = decide(chat)
    raw_rows_allowed = not any("calculate" in m.get("content", "") for m in chat.messages)
    if kinds[-1] == "excerpt" and raw_rows_allowed and isinstance(outcome, phases.ExportPlan):
        assert outcome.row_source != "assistant_table"


@SETTINGS
@given(turns)
def test_clarification_reply_publishes_nothing_and_only_it_leaves_a_format_pending(
    spec: list[tuple[Any, ...]],
) -> None:
    chat, kinds = build(spec)
    outcome, _, _ = decide(chat)
    after = outcome.facts.state_after
    if kinds[-1] == "clarification":
        assert not isinstance(outcome, phases.ExportPlan)
    else:
        assert after.state == "idle" and after.format is None
    if decision_of(outcome) == "clarification":
        assert (after.state, after.format) == ("awaiting", outcome.facts.format)


@SETTINGS
@given(turns)
def test_pending_format_carries_to_exactly_the_next_user_turn(
    spec: list[tuple[Any, ...]],
) -> None:
    chat, _ = build(spec)
    outcome, _, _ = decide(chat)
    if not outcome.facts.carried:
        return
    # Carried only from the turn just before, and only when that turn awaited an answer.
    assert chat.turn >= 2
    before, _, _ = decide(chat, turn_number=chat.turn - 1)
    assert before.facts.state_after.state == "awaiting"
    assert outcome.facts.format == before.facts.state_after.format


@SETTINGS
@given(turns)
def test_no_format_named_anywhere_is_no_request(spec: list[tuple[Any, ...]]) -> None:
    chat, _ = build(spec)
    named = any(
        word in m["content"].lower()
        for m in chat.messages
        if m["role"] == "user"
        for word in NAMES_A_FORMAT
    )
    outcome, read, _ = decide(chat)
    if not named:
        assert decision_of(outcome) == "no_request" and read == []
