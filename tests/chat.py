"""A stored conversation built the way the chat service writes it, for tests of the core and
of the handler that reads it."""

from __future__ import annotations

from typing import Any

from handlers.compaction import build_citation
from schemas.events import TurnCompleted

CID = "conv_t"


class Chat:
    """Builds a stored conversation the way the chat service writes it."""

    def __init__(self) -> None:
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
                "conversation_id": CID,
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
            path = f"artifacts/{CID}/t{self.turn}/{call_id}.json"
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

    def event(self, history_limit: int | None = 10, user: str = "u1") -> TurnCompleted:
        turn = f"t{self.turn}"
        mine = [m for m in self.messages if m["turn_id"] == turn]
        user_msg = next(m for m in mine if m["role"] == "user")
        reply = [m for m in mine if m["role"] == "assistant"][-1]
        return TurnCompleted.model_validate(
            {
                "type": "turn.completed",
                "version": 1,
                "event_id": f"e{self.turn}",
                "occurred_at": "2026-11-20T09:01:39Z",
                "conversation_id": CID,
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
