"""A stored conversation built the way the chat service writes it, for tests of the core and
of the handler that reads it; and `drive`, which plays the shell over the core: it feeds
exactly the artifacts the core asks for and records which were read, so a test can pin what
is fetched as well as what is decided."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from handlers import phases
from handlers import turn as story
from handlers.compaction import build_citation
from handlers.dataset import finish_row
from schemas.documents import Conversation, parse_message
from schemas.events import TurnCompleted

CID = "conv_t"


class Chat:
    """Builds a stored conversation the way the chat service writes it."""

    def __init__(self, cid: str = CID) -> None:
        self.cid = cid
        self.messages: list[dict[str, Any]] = []
        self.artifacts: dict[str, Any] = {}
        self.turn = 0
        self.calls = 0

    def _add(self, role: str, **fields: Any) -> str:
        seq = len(self.messages) + 1
        mid = f"m{seq}"
        self.messages.append(
            {
                "id": mid,
                "conversation_id": self.cid,
                "turn_id": f"t{self.turn}",
                "seq": seq,
                "role": role,
                "created_at": "2026-11-20T09:00:00Z",
                "deleted": False,
                **fields,
            }
        )
        return mid

    def user(self, text: str) -> str:
        self.turn += 1
        return self._add("user", content=text)

    def reply(self, text: str = "", **fields: Any) -> str:
        return self._add("assistant", content=text, tool_calls=[], **fields)

    def tools(self, *results: tuple[Any, ...], success: bool = True, artifact: bool = True) -> None:
        """One assistant message with parallel calls and one tool message answering them.

        Each result is (name, result) or (name, result, arguments).
        """
        calls, answers = [], []
        for name, result, *rest in results:
            arguments = rest[0] if rest else {}
            self.calls += 1
            call_id = f"call_{self.calls}"
            path = f"artifacts/{self.cid}/t{self.turn}/{call_id}.json"
            calls.append({"id": call_id, "name": name, "arguments": arguments})
            answers.append(
                {
                    "call_id": call_id,
                    "name": name,
                    "success": success,
                    "citation": build_citation(result),
                    "artifact": path if artifact else None,
                }
            )
            self.artifacts[path] = {
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
                "result": result,
            }
        self._add("assistant", content="", tool_calls=calls)
        self._add("tool", results=answers)

    def event(
        self, history_limit: int | None = 10, user: str = "u1", turn_number: int | None = None
    ) -> TurnCompleted:
        """The `turn.completed` of the latest turn, or of turn `turn_number`."""
        number = self.turn if turn_number is None else turn_number
        turn = f"t{number}"
        mine = [m for m in self.messages if m["turn_id"] == turn]
        user_msg = next(m for m in mine if m["role"] == "user")
        reply = [m for m in mine if m["role"] == "assistant"][-1]
        return TurnCompleted.model_validate(
            {
                "type": "turn.completed",
                "version": 1,
                "event_id": f"e_{self.cid}_{number}",  # unique across conversations
                "occurred_at": "2026-11-20T09:01:39Z",
                "conversation_id": self.cid,
                "user_id": user,
                "turn_id": turn,
                "user_message_id": user_msg["id"],
                "reply_message_id": reply["id"],
                "history_limit": history_limit,
            }
        )


def samples(n: int, start: int = 0) -> dict[str, Any]:
    items = [{"timestamp": f"t{i:04d}", "value": round(12 + i / 1000, 3)} for i in range(start, n)]
    return {"items": items, "total": n}


def history_then_a_csv_two_turns_later() -> Chat:
    """900 samples in two pages, a discovery turn, then "create a csv" with no tool call."""
    chat = Chat()
    chat.user("get the history")
    chat.tools(("history", samples(450)), ("history", samples(900, 450)))
    chat.reply("I have 900 samples.")
    chat.user("what is the instance?")
    chat.tools(("get_facts", {"name": "sat-07"}))
    chat.reply("sat-07")
    chat.user("create a csv")
    chat.reply("Here is the file.")
    return chat


FETCH_PHASES = (phases.FetchCurrentTurn, phases.FetchDeferredGroups, phases.FetchReachBack)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def drive(
    messages: list[dict[str, Any]],
    artifacts: dict[str, Any],
    event: TurnCompleted,
    conversation: dict[str, Any] | None = None,
) -> tuple[phases.Ending, list[str], list[dict[str, Any]]]:
    """Run the core as the shell would; return the ending, the paths read and the file rows."""
    inp = turn_input(messages, event, conversation)
    phase = story.start(inp)
    read: list[str] = []
    spooled: list[tuple[str, dict[str, Any]]] = []
    collector = None
    while isinstance(phase, FETCH_PHASES):
        collector = story.collector_for(phase, collector)
        for ref in phase.fetch:
            assert ref.artifact is not None
            read.append(ref.artifact)
            spooled += [
                (ref.action, r) for r in collector.feed(ref, artifacts[ref.artifact]["result"])
            ]
        phase = story.after_fetch(inp, phase, collector)
    rows: list[dict[str, Any]] = []
    if isinstance(phase, phases.ExportPlan) and phase.selection is not None:
        sel = phase.selection
        rows = [finish_row(r, a, sel) for want in sel.actions for a, r in spooled if a == want]
    return phase, read, rows


def turn_input(
    messages: list[dict[str, Any]],
    event: TurnCompleted,
    conversation: dict[str, Any] | None = None,
) -> story.TurnInput:
    """What the shell reads for `event`: the messages up to its reply."""
    conv = Conversation.model_validate(conversation or {"id": CID, "user_id": "u1"})
    upto = next(m["seq"] for m in messages if m["id"] == event.reply_message_id)
    return story.TurnInput(
        event=event,
        conversation=conv,
        messages=[parse_message(m) for m in messages if m["seq"] <= upto],
        history_limit=event.effective_history_limit(10, 40),
        artifacts_container="artifacts",
        exports_container="exports",
        now=NOW,
    )


def decision_of(outcome: phases.Ending) -> str:
    return "published" if isinstance(outcome, phases.ExportPlan) else outcome.decision
