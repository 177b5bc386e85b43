"""History window and tool-call pairing (docs/contract/window.md).

The window is what the model could still see. Cutting it, or filtering a history, can
split a call from its result; a connector rejects a call without a result and a result
without a call, so `pair` keeps exactly the calls and results that answer each other.
Messages are never reordered and stored messages are never changed: a message that
loses some of its calls or results is output as a copy.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from schemas.documents import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
)

# Where a call or result sits: (index of its message in the input, index inside the message).
_Slot = tuple[int, int]


class PairedCall(msgspec.Struct, frozen=True):
    """A kept call with its result and the messages holding each."""

    call: ToolCall
    call_message: AssistantMessage  # the (possibly copied) message that holds the call
    result: ToolResult
    result_message: ToolMessage


def _take_nearest(pending: list[_Slot], call_id: str, turned: set[tuple[str, int]]) -> _Slot:
    """Remove and return the nearest unanswered call with the id: the newest message's, the
    first in its list.

    `pending` holds the id's unanswered calls in stream order, so the newest message's are
    its last run. A run of more than one call (a model may reuse one id across thousands of
    parallel calls) is turned round when first taken from, once (`turned`), so that every
    take is a pop from the end: the pairing stays linear in the calls."""
    # Parallel calls in one message are equally near; their results usually follow in
    # call order, so within the newest message the first unanswered call is taken.
    m_pos = pending[-1][0]
    if len(pending) > 1 and pending[-2][0] == m_pos and (call_id, m_pos) not in turned:
        first = len(pending) - 1
        while first > 0 and pending[first - 1][0] == m_pos:
            first -= 1
        pending[first:] = reversed(pending[first:])
        turned.add((call_id, m_pos))
    return pending.pop()


def _match(messages: Sequence[Message]) -> dict[_Slot, _Slot]:
    """Map each answered call's slot to the slot of the result that answers it."""
    unanswered: dict[str, list[_Slot]] = {}
    matches: dict[_Slot, _Slot] = {}
    turned: set[tuple[str, int]] = set()  # (id, message) whose run of calls is turned round
    for m_pos, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            for c_pos, call in enumerate(message.tool_calls):
                # A call without an id can never be answered: leave it unmatched.
                if call.id is not None:
                    unanswered.setdefault(call.id, []).append((m_pos, c_pos))
        elif isinstance(message, ToolMessage):
            for r_pos, result in enumerate(message.results):
                if result.call_id is None:
                    continue
                pending = unanswered.get(result.call_id)
                if pending:
                    matches[_take_nearest(pending, result.call_id, turned)] = (m_pos, r_pos)
    return matches


def _has_text(message: AssistantMessage) -> bool:
    """Whether the message says something once its calls are gone."""
    # Whitespace alone shows nothing to the model, so it does not keep a message.
    return bool(message.content and message.content.strip())


def _kept_assistant(
    message: AssistantMessage, m_pos: int, kept_calls: set[_Slot]
) -> AssistantMessage | None:
    """The message with only its answered calls, or None when nothing of it remains."""
    kept = [c for c_pos, c in enumerate(message.tool_calls) if (m_pos, c_pos) in kept_calls]
    if len(kept) == len(message.tool_calls):
        return message
    if kept or _has_text(message):
        return message.model_copy(update={"tool_calls": kept})
    return None


def _kept_tool(message: ToolMessage, m_pos: int, kept_results: set[_Slot]) -> ToolMessage | None:
    """The message with only its paired results, or None when none of them is paired."""
    kept = [r for r_pos, r in enumerate(message.results) if (m_pos, r_pos) in kept_results]
    if not kept:
        # Also drops a tool message with no results at all: it shows the model nothing.
        return None
    if len(kept) == len(message.results):
        return message
    return message.model_copy(update={"results": kept})


def pair(messages: Sequence[Message]) -> list[Message]:
    """Keep what pairs: every kept call has exactly one later kept result and vice versa."""
    matches = _match(messages)
    kept_calls = set(matches)
    kept_results = set(matches.values())
    output: list[Message] = []
    for m_pos, message in enumerate(messages):
        kept: Message | None = message
        if isinstance(message, AssistantMessage) and message.tool_calls:
            kept = _kept_assistant(message, m_pos, kept_calls)
        elif isinstance(message, ToolMessage):
            kept = _kept_tool(message, m_pos, kept_results)
        if kept is not None:
            output.append(kept)
    return output


def is_visible(message: Message) -> bool:
    """System and soft-deleted messages are invisible: never read, never counted in a window."""
    return not isinstance(message, SystemMessage) and not message.deleted


def visible(messages: Sequence[Message]) -> list[Message]:
    """The visible messages, in order."""
    return [m for m in messages if is_visible(m)]


def history_window(history: Sequence[Message], limit: int) -> list[Message]:
    """The window the model could still see: the last `limit` visible messages, paired."""
    if limit <= 0:
        return []
    return pair(visible(history)[-limit:])


def paired_calls(messages: Sequence[Message]) -> list[PairedCall]:
    """Each call of already-paired messages with its result, in call order."""
    # Pairing again is a no-op on paired input and makes unpaired input safe to pass.
    paired = pair(messages)
    matches = _match(paired)
    calls: list[PairedCall] = []
    for m_pos, message in enumerate(paired):
        if not isinstance(message, AssistantMessage):
            continue
        for c_pos, call in enumerate(message.tool_calls):
            r_m_pos, r_pos = matches[(m_pos, c_pos)]
            result_message = paired[r_m_pos]
            # _match only answers calls from tool messages; the check narrows the type.
            assert isinstance(result_message, ToolMessage)
            calls.append(
                PairedCall(
                    call=call,
                    call_message=message,
                    result=result_message.results[r_pos],
                    result_message=result_message,
                )
            )
    return calls


def split_turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages (oldest first) into turns by turn_id, keeping order."""
    turns: list[list[Message]] = []
    for message in messages:
        # Grouping is by runs: the window may cut a turn's start, and a turn id seen
        # again after another turn is a new group rather than moving messages back.
        if turns and turns[-1][0].turn_id == message.turn_id:
            turns[-1].append(message)
        else:
            turns.append([message])
    return turns
