"""The chat service's side, as a runnable example: persist one turn of a conversation, then
announce it with `turn.completed` (docs/contract/stored-data.md and events.md).

After its agent has answered, a chat service:

1. stores each tool call's whole result as an artifact blob, at
   `artifacts/{conversation_id}/{turn_id}/{call_id}.json`;
2. stores the turn's messages; the tool message carries a compact citation of each result
   (`build_citation`, shipped with the worker so both sides compact alike), never the
   result itself;
3. only then sends `turn.completed` on the queue, with session id = conversation id, so
   the conversation's turns are handled one at a time, in order.

Here the documents and blobs go to the worker's local backend through
`worker.testing.seeding`: that is the local stand-in for the chat service's own Cosmos DB
and Blob Storage writes. On Azure the same three steps are an `upsert_item` per document,
an `upload_blob` per artifact and a Service Bus queue send (examples/README.md).

    EXPORT_WORKER_HOME=/tmp/demo .venv/bin/python examples/chat_service.py --conversation conv_demo
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from handlers.compaction import build_citation
from worker.backends import open_adapters
from worker.settings import Settings
from worker.testing.seeding import seeding

TOOL = "list_parameter_history"


def telemetry(samples: int, start: datetime) -> dict[str, Any]:
    """What the agent's tool returned: one battery voltage sample a minute."""
    items = [
        {
            "timestamp": _rfc3339(start + timedelta(minutes=n)),
            "parameter": "BatteryVoltage1",
            "value": round(12.4 + 0.01 * (n % 7), 2),
            "unit": "V",
        }
        for n in range(samples)
    ]
    return {"instance_id": "sat-07", "parameter": "BatteryVoltage1", "items": items}


def one_turn(
    conversation_id: str, user_id: str, turn_id: str, samples: int, now: datetime
) -> dict[str, Any]:
    """The conversation, the turn's messages, its artifacts and its event, as the chat
    service writes them."""
    call_id = f"call_{uuid.uuid4().hex[:24]}"
    arguments = {"instance_id": "sat-07", "parameter": "BatteryVoltage1"}
    result = telemetry(samples, now - timedelta(days=1))
    artifact_path = f"artifacts/{conversation_id}/{turn_id}/{call_id}.json"

    def message(seq: int, role: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": f"msg_{conversation_id}_{seq:03d}",
            "conversation_id": conversation_id,
            "turn_id": turn_id,
            "seq": seq,
            "role": role,
            "created_at": _rfc3339(now - timedelta(seconds=10 - seq)),
            "deleted": False,
            **fields,
        }

    ask = "Retrieve the BatteryVoltage1 history for sat-07 and create a csv"
    call = {"id": call_id, "name": TOOL, "arguments": arguments}
    reply = f"I retrieved {samples} BatteryVoltage1 samples for sat-07."
    messages = [
        message(1, "user", content=ask),
        message(2, "assistant", content="", tool_calls=[call]),
        message(
            3,
            "tool",
            results=[
                {
                    "call_id": call_id,
                    "name": TOOL,
                    "success": True,
                    "citation": build_citation(result),  # small, whatever the result's size
                    "artifact": artifact_path,
                }
            ],
        ),
        message(4, "assistant", content=reply),
    ]
    event = {
        "type": "turn.completed",
        "version": 1,
        "event_id": f"evt_{uuid.uuid4().hex[:24]}",
        "occurred_at": _rfc3339(now),
        "conversation_id": conversation_id,
        "user_id": user_id,
        "turn_id": turn_id,
        "user_message_id": messages[0]["id"],
        "reply_message_id": messages[-1]["id"],
        "history_limit": 10,
    }
    return {
        "conversation": {
            "id": conversation_id,
            "user_id": user_id,
            "participants": [],
            "deleted": False,
        },
        "messages": messages,
        # The whole result, as the tool returned it: the worker fetches it only if it wins.
        "artifacts": {
            artifact_path: {
                "call_id": call_id,
                "name": TOOL,
                "arguments": arguments,
                "result": result,
            }
        },
        "event": event,
    }


async def persist_and_announce(settings: Settings, turn: dict[str, Any]) -> None:
    """Write the turn's documents and blobs, then send its event: in that order."""
    adapters = await open_adapters(settings)
    try:
        chat = seeding(adapters)  # the local stand-in for the chat service's own stores
        await chat.store.put_conversation(turn["conversation"])
        for path, artifact in turn["artifacts"].items():
            await chat.blobs.put(path, json.dumps(artifact).encode("utf-8"))
        for document in turn["messages"]:
            await chat.store.put_message(document)
        event = turn["event"]
        await chat.queue.send(
            json.dumps(event).encode("utf-8"),
            session_id=event["conversation_id"],  # one conversation, one session: in order
            message_id=event["event_id"],
        )
    finally:
        await adapters.close()


def main() -> None:
    """Persist one turn and announce it; print its ids as one JSON object."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversation", default=f"conv_{uuid.uuid4().hex[:12]}")
    parser.add_argument("--user", default="user_alice")
    parser.add_argument("--turn", default="turn_1")
    parser.add_argument("--samples", type=int, default=120)
    args = parser.parse_args()
    turn = one_turn(args.conversation, args.user, args.turn, args.samples, datetime.now(UTC))
    asyncio.run(persist_and_announce(Settings(), turn))
    event = turn["event"]
    print(json.dumps({k: event[k] for k in ("conversation_id", "turn_id", "event_id")}))


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


if __name__ == "__main__":
    main()
