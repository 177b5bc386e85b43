"""Example tests for the history window and tool-call pairing (window.md, seed 001)."""

from __future__ import annotations

from typing import Any

from handlers.window import history_window, pair, paired_calls, split_turns
from schemas.documents import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
)

_COMMON: dict[str, Any] = {"conversation_id": "c1", "created_at": "2026-01-01T00:00:00Z"}


def _seq(message_id: str) -> int:
    return int("".join(ch for ch in message_id if ch.isdigit()) or "0")


def user(message_id: str, turn: str = "t1", *, deleted: bool = False) -> UserMessage:
    return UserMessage(
        id=message_id,
        turn_id=turn,
        seq=_seq(message_id),
        role="user",
        content="hi",
        deleted=deleted,
        **_COMMON,
    )


def assistant(
    message_id: str, *call_ids: str | None, content: str | None = "", turn: str = "t1"
) -> AssistantMessage:
    calls = [ToolCall(id=cid, name=f"act_{cid}", arguments={"q": cid}) for cid in call_ids]
    return AssistantMessage(
        id=message_id,
        turn_id=turn,
        seq=_seq(message_id),
        role="assistant",
        content=content,
        tool_calls=calls,
        **_COMMON,
    )


def tool(
    message_id: str, *call_ids: str | None, turn: str = "t1", deleted: bool = False
) -> ToolMessage:
    results = [ToolResult(call_id=cid, name=f"act_{cid}", success=True) for cid in call_ids]
    return ToolMessage(
        id=message_id,
        turn_id=turn,
        seq=_seq(message_id),
        role="tool",
        results=results,
        deleted=deleted,
        **_COMMON,
    )


def system(message_id: str, turn: str = "t1") -> SystemMessage:
    return SystemMessage(
        id=message_id,
        turn_id=turn,
        seq=_seq(message_id),
        role="system",
        content="be nice",
        **_COMMON,
    )


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def call_ids(message: Message) -> list[str | None]:
    assert isinstance(message, AssistantMessage)
    return [c.id for c in message.tool_calls]


def result_ids(message: Message) -> list[str | None]:
    assert isinstance(message, ToolMessage)
    return [r.call_id for r in message.results]


# --- seed 001: parallel calls -------------------------------------------------------------


def test_partial_results_keep_a_copy_holding_only_answered_calls_and_the_sibling_result() -> None:
    call_message = assistant("m2", "paris", "tokyo", content="Checking both.")
    history: list[Message] = [user("m1"), call_message, tool("m3", "paris")]
    out = pair(history)
    assert ids(out) == ["m1", "m2", "m3"]
    assert call_ids(out[1]) == ["paris"]
    assert out[1] is not call_message
    assert out[1].content == "Checking both."  # type: ignore[union-attr]
    assert out[2] is history[2]
    assert call_ids(call_message) == ["paris", "tokyo"]


def test_parallel_results_keep_their_chronological_order_and_are_not_moved() -> None:
    history: list[Message] = [
        assistant("m1", "a", "b"),
        tool("m2", "b"),
        assistant("m3", content="one came back"),
        tool("m4", "a"),
    ]
    out = pair(history)
    assert ids(out) == ["m1", "m2", "m3", "m4"]
    assert [result_ids(out[1]), result_ids(out[3])] == [["b"], ["a"]]
    assert all(o is i for o, i in zip(out, history, strict=True))


def test_call_message_outside_window_drops_all_its_results() -> None:
    history: list[Message] = [
        user("m1"),
        assistant("m2", "a", "b"),
        tool("m3", "a"),
        tool("m4", "b"),
        user("m5"),
    ]
    assert ids(history_window(history, 3)) == ["m5"]


def test_all_results_missing_keeps_the_call_message_as_a_text_only_copy() -> None:
    call_message = assistant("m1", "a", "b", content="Let me look that up.")
    out = pair([call_message, user("m2")])
    assert ids(out) == ["m1", "m2"]
    assert call_ids(out[0]) == []
    assert out[0].content == "Let me look that up."  # type: ignore[union-attr]
    assert call_ids(call_message) == ["a", "b"]


def test_all_results_missing_drops_a_call_message_without_text() -> None:
    for content in ("", None, "   \n"):
        assert ids(pair([assistant("m1", "a", content=content), user("m2")])) == ["m2"]


def test_several_results_in_one_tool_message_are_kept_once() -> None:
    history: list[Message] = [assistant("m1", "a", "b", "c"), tool("m2", "a", "b", "c")]
    out = pair(history)
    assert out == history
    assert out[1] is history[1]


def test_tool_message_with_some_results_orphaned_is_a_copy_with_only_the_paired_ones() -> None:
    results_message = tool("m2", "a", "zzz", "b", None)
    out = pair([assistant("m1", "a", "b"), results_message])
    assert ids(out) == ["m1", "m2"]
    assert result_ids(out[1]) == ["a", "b"]
    assert out[1] is not results_message
    assert result_ids(results_message) == ["a", "zzz", "b", None]


def test_tool_message_with_no_paired_result_is_dropped() -> None:
    assert ids(pair([user("m1"), tool("m2", "a", "b")])) == ["m1"]
    assert ids(pair([user("m1"), tool("m2")])) == ["m1"]


# --- window boundaries ------------------------------------------------------------------


def test_result_inside_window_with_call_outside_is_dropped() -> None:
    history: list[Message] = [user("m1"), assistant("m2", "a"), tool("m3", "a"), user("m4")]
    assert ids(history_window(history, 2)) == ["m4"]


def test_call_inside_window_with_result_outside_is_dropped() -> None:
    # The result lies past the end of the history (in the current turn, or never stored).
    history: list[Message] = [user("m1"), assistant("m2", "a", content="Fetching.")]
    out = history_window(history, 5)
    assert ids(out) == ["m1", "m2"]
    assert call_ids(out[1]) == []


def test_limit_zero_or_negative_gives_an_empty_window() -> None:
    history: list[Message] = [user("m1"), assistant("m2", content="hello")]
    assert history_window(history, 0) == []
    assert history_window(history, -3) == []


def test_limit_larger_than_history_keeps_the_whole_paired_history() -> None:
    history: list[Message] = [
        user("m1"),
        assistant("m2", "a", "b"),
        tool("m3", "a", "b"),
        assistant("m4", content="ok"),
    ]
    assert history_window(history, 40) == history


def test_system_and_deleted_messages_are_not_counted_and_never_output() -> None:
    history: list[Message] = [
        user("m1"),
        assistant("m2", content="first"),
        system("m3"),
        user("m4", deleted=True),
        user("m5"),
    ]
    assert ids(history_window(history, 2)) == ["m2", "m5"]


def test_deleted_result_does_not_answer_its_call() -> None:
    history: list[Message] = [
        assistant("m1", "a", "b"),
        tool("m2", "a", deleted=True),
        tool("m3", "b"),
    ]
    out = history_window(history, 10)
    assert ids(out) == ["m1", "m3"]
    assert call_ids(out[0]) == ["b"]


# --- ids --------------------------------------------------------------------------------


def test_duplicate_call_ids_pair_each_result_with_the_nearest_unanswered_call() -> None:
    history: list[Message] = [
        assistant("m1", "call_0"),
        tool("m2", "call_0"),
        assistant("m3", "call_0"),
        tool("m4", "call_0"),
    ]
    assert pair(history) == history
    pairs = [(p.call_message.id, p.result_message.id) for p in paired_calls(history)]
    assert pairs == [("m1", "m2"), ("m3", "m4")]


def test_duplicate_call_id_with_one_result_keeps_the_later_call() -> None:
    out = pair([assistant("m1", "x"), assistant("m2", "x"), tool("m3", "x")])
    assert ids(out) == ["m2", "m3"]


def test_duplicate_ids_inside_one_message_pair_in_list_order() -> None:
    first_call = ToolCall(id="x", name="first")
    second_call = ToolCall(id="x", name="second")
    call_message = AssistantMessage(
        id="m1",
        turn_id="t1",
        seq=1,
        role="assistant",
        tool_calls=[first_call, second_call],
        **_COMMON,
    )
    out = pair([call_message, tool("m2", "x")])
    assert [c.name for c in out[0].tool_calls] == ["first"]  # type: ignore[union-attr]


def test_a_result_answers_the_nearest_message_with_the_id_at_its_first_such_call() -> None:
    # An older message's unanswered call with the same id stays unanswered.
    parallel = AssistantMessage(
        id="m2",
        turn_id="t1",
        seq=2,
        role="assistant",
        tool_calls=[ToolCall(id="x", name="first"), ToolCall(id="x", name="second")],
        **_COMMON,
    )
    out = pair([assistant("m1", "x"), parallel, tool("m3", "x")])
    assert ids(out) == ["m2", "m3"]
    assert [c.name for c in out[0].tool_calls] == ["first"]  # type: ignore[union-attr]


def test_null_call_ids_are_dropped_on_both_sides() -> None:
    history: list[Message] = [assistant("m1", None, "a", content="go"), tool("m2", None, "a")]
    out = pair(history)
    assert call_ids(out[0]) == ["a"]
    assert result_ids(out[1]) == ["a"]
    assert ids(pair([assistant("m1", None), tool("m2", None)])) == []


# --- identity and immutability ----------------------------------------------------------


def test_user_and_callless_assistant_messages_pass_through_as_the_same_objects() -> None:
    history: list[Message] = [user("m1"), assistant("m2", content=""), assistant("m3", content="x")]
    out = pair(history)
    assert all(o is i for o, i in zip(out, history, strict=True))


def test_inputs_are_not_mutated() -> None:
    history: list[Message] = [
        user("m1"),
        assistant("m2", "a", "b", content="two"),
        tool("m3", "b", "orphan"),
        assistant("m4", "c"),
        system("m5"),
        tool("m6", "a", deleted=True),
    ]
    before = [m.model_dump() for m in history]
    history_window(history, 4)
    pair(history)
    paired_calls(history)
    assert [m.model_dump() for m in history] == before


# --- paired_calls -----------------------------------------------------------------------


def test_paired_calls_follow_call_order_not_result_order() -> None:
    history: list[Message] = [assistant("m1", "a", "b"), tool("m2", "b"), tool("m3", "a")]
    calls = paired_calls(history)
    assert [(p.call.id, p.result.call_id, p.result_message.id) for p in calls] == [
        ("a", "a", "m3"),
        ("b", "b", "m2"),
    ]
    assert all(p.call_message is history[0] for p in calls)


def test_paired_calls_on_unpaired_input_refer_to_the_copied_call_message() -> None:
    history: list[Message] = [assistant("m1", "a", "b", content="t"), tool("m2", "b")]
    (only,) = paired_calls(history)
    assert only.call.id == "b"
    assert call_ids(only.call_message) == ["b"]


def test_paired_calls_of_an_empty_history_is_empty() -> None:
    assert paired_calls([]) == []


# --- split_turns ------------------------------------------------------------------------


def test_split_turns_groups_consecutive_messages_by_turn_id() -> None:
    messages: list[Message] = [
        user("m1", "t1"),
        assistant("m2", content="a", turn="t1"),
        user("m3", "t2"),
        assistant("m4", "x", turn="t2"),
        tool("m5", "x", turn="t2"),
    ]
    assert [ids(t) for t in split_turns(messages)] == [["m1", "m2"], ["m3", "m4", "m5"]]


def test_split_turns_keeps_a_turn_cut_by_the_window_as_a_group() -> None:
    messages: list[Message] = [assistant("m2", content="tail", turn="t1"), user("m3", "t2")]
    assert [ids(t) for t in split_turns(messages)] == [["m2"], ["m3"]]


def test_split_turns_never_moves_a_message_back_to_an_earlier_turn() -> None:
    messages: list[Message] = [user("m1", "t1"), user("m2", "t2"), assistant("m3", turn="t1")]
    assert [ids(t) for t in split_turns(messages)] == [["m1"], ["m2"], ["m3"]]


def test_split_turns_of_nothing_is_empty() -> None:
    assert split_turns([]) == []
