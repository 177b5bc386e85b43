"""Property tests for the window invariant over generated histories (docs/contract/window.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.window import history_window, pair, paired_calls
from schemas.documents import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

# A small pool makes duplicate ids, orphans and null ids common.
_IDS = st.sampled_from(["a", "b", "c", None])
_KINDS = st.sampled_from(["user", "assistant", "assistant", "tool", "tool", "system"])


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Random histories: users open turns; calls, results, system and deleted messages mix."""
    messages: list[Message] = []
    turn = 0
    for seq in range(draw(st.integers(0, 30))):
        kind = draw(_KINDS)
        if kind == "user":
            turn += 1
        common: dict[str, Any] = {
            "id": f"m{seq}",
            "conversation_id": "c1",
            "turn_id": f"t{turn}",
            "seq": seq,
            "created_at": "2026-01-01T00:00:00Z",
            "deleted": draw(st.integers(0, 5)) == 0,
        }
        text = draw(st.sampled_from(["", "some text", None]))
        message: Message
        if kind == "user":
            message = UserMessage(role="user", content=text or "", **common)
        elif kind == "system":
            message = SystemMessage(role="system", content=text, **common)
        elif kind == "assistant":
            calls = [
                ToolCall(id=cid, name=f"act{i}")
                for i, cid in enumerate(draw(st.lists(_IDS, min_size=0, max_size=3)))
            ]
            message = AssistantMessage(role="assistant", content=text, tool_calls=calls, **common)
        else:
            results = [
                ToolResult(call_id=cid, name=f"act{i}", success=True)
                for i, cid in enumerate(draw(st.lists(_IDS, min_size=1, max_size=3)))
            ]
            message = ToolMessage(role="tool", results=results, **common)
        messages.append(message)
    return messages


def _events(messages: Iterable[Message]) -> Iterable[tuple[str, str | None]]:
    """Calls and results in stream order, as ("call" | "result", id)."""
    for message in messages:
        if isinstance(message, AssistantMessage):
            yield from (("call", c.id) for c in message.tool_calls)
        elif isinstance(message, ToolMessage):
            yield from (("result", r.call_id) for r in message.results)


def _unmatched(messages: Sequence[Message]) -> tuple[int, int]:
    """(unanswered calls, results without a call) under nearest-unanswered pairing."""
    # Counting per id is independent of which equal-id call a result takes, so this
    # checks the invariant without reusing the implementation's tie-breaking.
    waiting: Counter[str | None] = Counter()
    orphans = 0
    for kind, cid in _events(messages):
        if kind == "call":
            waiting[cid] += 1
        elif cid is not None and waiting[cid] > 0:
            waiting[cid] -= 1
        else:
            orphans += 1
    return sum(waiting.values()), orphans


def _is_subsequence(part: Sequence[Any], whole: Sequence[Any]) -> bool:
    remaining = iter(whole)
    return all(any(item == candidate for candidate in remaining) for item in part)


def _visible(history: Sequence[Message]) -> list[Message]:
    return [m for m in history if not isinstance(m, SystemMessage) and not m.deleted]


_SETTINGS = settings(max_examples=300, deadline=None)


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_every_output_call_has_one_later_result_and_every_result_one_earlier_call(
    history: list[Message], limit: int
) -> None:
    window = history_window(history, limit)
    assert _unmatched(window) == (0, 0)
    calls = [cid for kind, cid in _events(window) if kind == "call"]
    assert None not in calls


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_output_is_an_ordered_subsequence_of_originals_or_trimmed_copies(
    history: list[Message], limit: int
) -> None:
    window = history_window(history, limit)
    by_id = {m.id: m for m in history}
    assert _is_subsequence([m.id for m in window], [m.id for m in history])
    for kept in window:
        original = by_id[kept.id]
        if kept == original:
            continue
        assert type(kept) is type(original)
        if isinstance(kept, AssistantMessage):
            assert isinstance(original, AssistantMessage)
            assert kept.model_dump(exclude={"tool_calls"}) == original.model_dump(
                exclude={"tool_calls"}
            )
            assert _is_subsequence(kept.tool_calls, original.tool_calls)
            assert kept.tool_calls or (kept.content and kept.content.strip())
        else:
            assert isinstance(kept, ToolMessage) and isinstance(original, ToolMessage)
            assert kept.model_dump(exclude={"results"}) == original.model_dump(exclude={"results"})
            assert kept.results and _is_subsequence(kept.results, original.results)


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_no_system_or_deleted_message_is_output(history: list[Message], limit: int) -> None:
    for kept in history_window(history, limit):
        assert not isinstance(kept, SystemMessage)
        assert not kept.deleted


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_pair_is_idempotent(history: list[Message], limit: int) -> None:
    once = pair(history)
    assert pair(once) == once
    window = history_window(history, limit)
    assert pair(window) == window


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_window_holds_at_most_limit_messages(history: list[Message], limit: int) -> None:
    assert len(history_window(history, limit)) <= max(limit, 0)


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_window_drops_only_what_cannot_pair(history: list[Message], limit: int) -> None:
    cut = _visible(history)[-limit:] if limit > 0 else []
    window = history_window(history, limit)
    unanswered, orphans = _unmatched(cut)
    cut_events = list(_events(cut))
    kept_events = list(_events(window))
    # Greedy pairing is maximal: every call or result that could pair is kept.
    assert len(kept_events) == len(cut_events) - unanswered - orphans
    assert [m for m in cut if isinstance(m, UserMessage)] == [
        m for m in window if isinstance(m, UserMessage)
    ]


@_SETTINGS
@given(histories())
def test_inputs_are_never_mutated(history: list[Message]) -> None:
    before = [m.model_dump() for m in history]
    history_window(history, 40)
    paired_calls(history)
    assert [m.model_dump() for m in history] == before


@_SETTINGS
@given(histories(), st.integers(0, 40))
def test_paired_calls_cover_every_call_once_with_a_later_matching_result(
    history: list[Message], limit: int
) -> None:
    window = history_window(history, limit)
    position = {id(m): i for i, m in enumerate(window)}
    calls = paired_calls(window)
    assert [p.call for p in calls] == [
        c for m in window if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    result_slots: set[tuple[int, int]] = set()
    for p in calls:
        assert p.result.call_id == p.call.id
        assert position[id(p.call_message)] < position[id(p.result_message)]
        (slot,) = [i for i, r in enumerate(p.result_message.results) if r is p.result]
        result_slots.add((position[id(p.result_message)], slot))
    # Each result answers exactly one call.
    assert len(result_slots) == len(calls)
    assert len(calls) == sum(len(m.results) for m in window if isinstance(m, ToolMessage))


def _nearest_pairs(messages: Sequence[Message]) -> set[tuple[tuple[int, int], tuple[int, int]]]:
    """The contract's pairing, written plainly: a result answers, among the unanswered calls
    with its id, the one in the newest message, the first in that message's list."""
    unanswered: list[tuple[int, int, str]] = []
    pairs = set()
    for m_pos, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            unanswered += [
                (m_pos, c, call.id) for c, call in enumerate(message.tool_calls) if call.id
            ]
        elif isinstance(message, ToolMessage):
            for r_pos, result in enumerate(message.results):
                waiting = [slot for slot in unanswered if slot[2] == result.call_id]
                if result.call_id is not None and waiting:
                    nearest = max(waiting, key=lambda slot: (slot[0], -slot[1]))
                    unanswered.remove(nearest)
                    pairs.add(((nearest[0], nearest[1]), (m_pos, r_pos)))
    return pairs


@_SETTINGS
@given(histories())
def test_each_result_answers_the_newest_messages_first_unanswered_call_with_its_id(
    history: list[Message],
) -> None:
    visible = _visible(history)
    slot_of: dict[int, tuple[int, int]] = {}
    for m_pos, message in enumerate(visible):
        items = (
            message.tool_calls
            if isinstance(message, AssistantMessage)
            else message.results
            if isinstance(message, ToolMessage)
            else []
        )
        slot_of.update({id(item): (m_pos, i) for i, item in enumerate(items)})
    pairs = {(slot_of[id(p.call)], slot_of[id(p.result)]) for p in paired_calls(visible)}
    assert pairs == _nearest_pairs(visible)


def test_thousands_of_calls_sharing_one_id_pair_in_list_order() -> None:
    # A model may reuse one id for every parallel call: each result takes the first call
    # still unanswered in the newest message holding the id.
    common = {"conversation_id": "c1", "turn_id": "t1", "created_at": "2026-01-01T00:00:00Z"}
    calls = [ToolCall(id="same", name=f"act{i}") for i in range(5_000)]
    results = [ToolResult(call_id="same", name=f"act{i}", success=True) for i in range(5_000)]
    history: list[Message] = [
        AssistantMessage(id="m1", seq=1, role="assistant", content="", tool_calls=calls, **common),
        ToolMessage(id="m2", seq=2, role="tool", results=results, **common),
    ]
    assert [(p.call.name, p.result.name) for p in paired_calls(history)] == [
        (f"act{i}", f"act{i}") for i in range(5_000)
    ]
