"""Generated conversations for the reliability harnesses, each turn with the outcome it must reach.

`generate(turns, conversations, seed)` returns a fixture for `export-worker dev seed` (or
`worker.testing.seeding.seed`) and, for every turn, what docs/contract/decision.md says must
come of it. The mix, per conversation, in seeded random order:

- `direct`: lookup call plus two pages of `list_parameter_history` (parallel calls), "create
  a csv|json|xml|xlsx": published from action rows, both pages, lookup left out (dominance);
- `clarify` (two turns): the request, a clarification reply (flagged, or left to the
  heuristic), then "yes, one row per sample": `clarification`, then `published` carried,
  rows reached back from the first turn;
- `reach_back` (two turns): data retrieved without a request (`no_request`), then "now
  export that as json" with no calls: published from the prior turn;
- `no_request`, and `derived` ("calculate the average ... create a csv" answered in prose):
  `derived_output_without_table`.

Poison messages are planted on purpose (`Planted`): a body that is not JSON, a wrong
version, a forged event naming another user for a real turn, and a whole turn whose
artifact lies in another conversation. Each must end in the dead-letter queue with its reason
and nothing else; the good turns around them must not notice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from worker.testing.seeding import tool_result

FORMAT_WORDS = {
    "csv": "create a csv",
    "json": "create a json file",
    "xml": "export it as xml",
    "xlsx": "create an excel spreadsheet",
}
FORMATS = tuple(FORMAT_WORDS)
PARAMETERS = ("BatteryVoltage1", "BusCurrent", "PanelTemp2", "WheelSpeed3")
START = datetime(2026, 11, 20, 9, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class ExpectedExport:
    """What the file of a published turn must hold."""

    format: str
    row_source: str
    row_count: int
    first: dict[str, Any]
    last: dict[str, Any]


@dataclass(frozen=True)
class ExpectedTurn:
    """The one turn record a turn must end with."""

    conversation_id: str
    turn_id: str
    kind: str
    decision: str
    format: str | None
    carried: bool
    export: ExpectedExport | None


@dataclass(frozen=True)
class Planted:
    """A poison message put in the queue on purpose, and the dead-letter reason it must get."""

    message_id: str
    session_id: str
    kind: str
    reason: str


@dataclass
class Generated:
    """A fixture and what must come of it."""

    fixture: dict[str, Any]
    turns: dict[tuple[str, str], ExpectedTurn]
    planted: list[Planted]

    @property
    def conversation_ids(self) -> list[str]:
        """Every conversation of the fixture."""
        return [c["id"] for c in self.fixture["conversations"]]


@dataclass
class _Builder:
    """One conversation being written: messages, artifacts and events, in seq order."""

    cid: str
    user: str
    rng: random.Random
    big_every: int
    big_rows: tuple[int, int] = (
        600,
        900,
    )  # rows a page of a big retrieval holds, at least and at most
    messages: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    events: list[Any] = field(default_factory=list)
    expected: list[ExpectedTurn] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)
    seq: int = 0
    turn_no: int = 0
    data_no: int = 0

    def _at(self) -> str:
        return (START + timedelta(seconds=7 * self.seq)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _message(self, turn_id: str, role: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        message = {
            "id": f"msg_{self.cid}_{self.seq:04d}",
            "conversation_id": self.cid,
            "turn_id": turn_id,
            "seq": self.seq,
            "role": role,
            "created_at": self._at(),
            "deleted": False,
            **fields,
        }
        self.messages.append(message)
        return message

    def _turn(self) -> str:
        self.turn_no += 1
        return f"turn_{self.cid}_{self.turn_no:03d}"

    def _event(
        self, turn_id: str, user_msg: dict[str, Any], reply: dict[str, Any]
    ) -> dict[str, Any]:
        event = {
            **self._template(turn_id),
            "user_message_id": user_msg["id"],
            "reply_message_id": reply["id"],
            "history_limit": 10,
        }
        self.events.append(event)
        return event

    def _data(self, turn_id: str, artifact_cid: str | None = None) -> list[dict[str, Any]]:
        """A lookup, then two pages of history as parallel calls; the pages' rows, in order."""
        self.data_no += 1
        parameter = self.rng.choice(PARAMETERS)
        big = self.big_every > 0 and self.data_no % self.big_every == 0
        per_page = self.rng.randint(*self.big_rows) if big else self.rng.randint(12, 60)
        base = START + timedelta(days=self.data_no)
        rows = [
            {
                "timestamp": (base + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "parameter": parameter,
                "value": round(12 + self.rng.random(), 2),
                "unit": "V",
            }
            for i in range(2 * per_page)
        ]
        lookup = {"items": [{"instance_id": "sat-07", "name": "Sentinel-7", "status": "online"}]}
        # A big retrieval's second page repeats five rows of the first (a tool's paging
        # overlapping): the file holds them once, whichever way the worker de-duplicates.
        repeated = rows[:5] if big else []
        pages = [
            {"items": rows[:per_page], "page": 1, "total": 2 * per_page, "next_link": "?page=2"},
            {"items": rows[per_page:] + repeated, "page": 2, "total": 2 * per_page},
        ]
        folder = f"artifacts/{artifact_cid or self.cid}/{turn_id}"
        lookup_call = f"call_{turn_id}_lookup"
        self._message(
            turn_id,
            "assistant",
            content="",
            tool_calls=[{"id": lookup_call, "name": "list_instances", "arguments": {}}],
        )
        self._message(
            turn_id, "tool", results=[self._result(folder, lookup_call, "list_instances", lookup)]
        )
        page_calls = [f"call_{turn_id}_p{n}" for n in (1, 2)]
        self._message(
            turn_id,
            "assistant",
            content="",
            tool_calls=[
                {"id": c, "name": "list_parameter_history", "arguments": {"page": n}}
                for n, c in enumerate(page_calls, start=1)
            ],
        )
        self._message(
            turn_id,
            "tool",
            results=[
                self._result(folder, c, "list_parameter_history", page)
                for c, page in zip(page_calls, pages, strict=True)
            ],
        )
        return rows

    def _result(self, folder: str, call_id: str, name: str, result: Any) -> dict[str, Any]:
        path = f"{folder}/{call_id}.json"
        self.artifacts[path] = {"call_id": call_id, "name": name, "arguments": {}, "result": result}
        return tool_result(call_id, name, result, path)

    def _expect(
        self,
        turn_id: str,
        kind: str,
        decision: str,
        fmt: str | None,
        *,
        carried: bool = False,
        rows: list[dict[str, Any]] | None = None,
        source: str = "action_rows",
    ) -> None:
        export = None
        if decision == "published":
            assert rows and fmt
            export = ExpectedExport(fmt, source, len(rows), rows[0], rows[-1])
        self.expected.append(ExpectedTurn(self.cid, turn_id, kind, decision, fmt, carried, export))

    # ---- the kinds -------------------------------------------------------------------
    def direct(self) -> None:
        fmt = self.rng.choice(FORMATS)
        turn_id = self._turn()
        user = self._message(
            turn_id, "user", content=f"Retrieve the history for sat-07 and {FORMAT_WORDS[fmt]}"
        )
        rows = self._data(turn_id)
        reply = self._message(turn_id, "assistant", content="Here is the file.", tool_calls=[])
        self._event(turn_id, user, reply)
        self._expect(turn_id, "direct", "published", fmt, rows=rows)

    def clarify(self) -> None:
        fmt = self.rng.choice(FORMATS)
        ask = self._turn()
        user = self._message(ask, "user", content=f"{FORMAT_WORDS[fmt]} of the history for sat-07")
        rows = self._data(ask)
        flag: dict[str, Any] = {"clarification": True} if self.rng.random() < 0.5 else {}
        question = "Should each row be one sample, and which columns do you want?"
        reply = self._message(ask, "assistant", content=question, tool_calls=[], **flag)
        self._event(ask, user, reply)
        self._expect(ask, "clarify", "clarification", fmt)
        answer = self._turn()
        user = self._message(answer, "user", content="yes, one row per sample")
        reply = self._message(answer, "assistant", content="Here it is.", tool_calls=[])
        self._event(answer, user, reply)
        self._expect(
            answer, "clarify_answer", "published", fmt, carried=True, rows=rows, source="prior_turn"
        )

    def reach_back(self) -> None:
        shown = self._turn()
        user = self._message(shown, "user", content="Show me the history for sat-07")
        rows = self._data(shown)
        reply = self._message(shown, "assistant", content="It stayed near 12 V.", tool_calls=[])
        self._event(shown, user, reply)
        self._expect(shown, "reach_back_data", "no_request", None)
        later = self._turn()
        user = self._message(later, "user", content="now export that as json")
        reply = self._message(later, "assistant", content="Here is the JSON file.", tool_calls=[])
        self._event(later, user, reply)
        self._expect(later, "reach_back", "published", "json", rows=rows, source="prior_turn")

    def no_request(self) -> None:
        turn_id = self._turn()
        user = self._message(turn_id, "user", content="thanks, that helps a lot")
        reply = self._message(turn_id, "assistant", content="Glad it helped.", tool_calls=[])
        self._event(turn_id, user, reply)
        self._expect(turn_id, "no_request", "no_request", None)

    def derived(self) -> None:
        turn_id = self._turn()
        user = self._message(
            turn_id, "user", content="calculate the average voltage per hour and create a csv"
        )
        reply = self._message(
            turn_id, "assistant", content="The average was 12.4 V every hour.", tool_calls=[]
        )
        self._event(turn_id, user, reply)
        self._expect(turn_id, "derived", "derived_output_without_table", "csv")

    # ---- poison ------------------------------------------------------------------------
    def plant(self, kind: str, other_cid: str) -> None:
        """One poison message of `kind` on this conversation's session."""
        if kind == "not_json":
            self.events.append(f"{{not json at all {self.cid}")
            self.planted.append(Planted("", "", kind, "schema_invalid"))
        elif kind == "wrong_version":
            turn_id = f"turn_{self.cid}_v2_{len(self.planted)}"
            event = {**self._template(turn_id), "version": 2}
            self.events.append(event)
            self.planted.append(Planted(event["event_id"], self.cid, kind, "schema_invalid"))
        elif kind == "foreign_user":
            # A forged copy of this conversation's latest event, naming another user.
            real = next(e for e in reversed(self.events) if isinstance(e, dict))
            event = {**real, "event_id": f"{real['event_id']}_forged", "user_id": "user_mallory"}
            self.events.append(event)
            self.planted.append(Planted(event["event_id"], self.cid, kind, "not_authorized"))
        elif kind == "artifact_outside":
            turn_id = self._turn()
            user = self._message(turn_id, "user", content="Retrieve the history and create a csv")
            self._data(turn_id, artifact_cid=other_cid)
            reply = self._message(turn_id, "assistant", content="Here it is.", tool_calls=[])
            event = self._event(turn_id, user, reply)
            self.planted.append(Planted(event["event_id"], self.cid, kind, "not_authorized"))
        else:
            raise ValueError(kind)

    def _template(self, turn_id: str) -> dict[str, Any]:
        return {
            "type": "turn.completed",
            "version": 1,
            "event_id": f"evt_{turn_id}",
            "occurred_at": self._at(),
            "conversation_id": self.cid,
            "user_id": self.user,
            "turn_id": turn_id,
            "user_message_id": f"msg_{turn_id}_u",
            "reply_message_id": f"msg_{turn_id}_r",
        }


KINDS = ("direct", "direct", "direct", "clarify", "reach_back", "no_request", "derived")
POISON = ("not_json", "foreign_user", "artifact_outside", "wrong_version")


def generate(
    turns: int,
    conversations: int,
    seed: int,
    *,
    big_every: int = 12,
    big_rows: tuple[int, int] = (600, 900),
) -> Generated:
    """`turns` good turns over `conversations` conversations, plus a few planted poison messages.

    `big_every`: every so many data retrievals has two pages of `big_rows` rows (600-900)
    instead of 12-60 (a longer blob write for kills to land in; past 2,048 a page, the
    group's de-duplication digests go to the turn's digest file), the second page repeating
    five rows of the first; 0 for none.
    """
    if conversations < 2 or turns < 2 * conversations:
        raise ValueError("need at least 2 conversations and 2 turns per conversation")
    rng = random.Random(seed)
    builders = [
        _Builder(
            f"conv_chaos_{n:02d}", f"user_{n:02d}", random.Random(rng.random()), big_every, big_rows
        )
        for n in range(conversations)
    ]
    quota = [
        turns // conversations + (1 if n < turns % conversations else 0)
        for n in range(conversations)
    ]
    for builder, wanted in zip(builders, quota, strict=True):
        while len(builder.expected) < wanted:
            left = wanted - len(builder.expected)
            kind = rng.choice(KINDS)
            if kind in ("clarify", "reach_back") and left < 2:
                kind = "direct"
            getattr(builder, kind)()
    poison = max(len(POISON), turns // 40)
    for n in range(poison):
        builder = builders[(n * 7 + 3) % conversations]
        other = builders[(n * 7 + 4) % conversations]
        builder.plant(POISON[n % len(POISON)], other.cid)
    # Interleave the conversations' events so many sessions are live at once; each
    # conversation's own events stay in turn order (its session is FIFO).
    events: list[Any] = []
    queues = [list(b.events) for b in builders]
    while any(queues):
        for queue in queues:
            if queue:
                events.append(queue.pop(0))
    fixture = {
        "conversations": [
            {
                "id": b.cid,
                "user_id": b.user,
                "participants": [f"{b.user}_colleague"],
                "deleted": False,
            }
            for b in builders
        ],
        "messages": [m for b in builders for m in b.messages],
        "artifacts": {p: a for b in builders for p, a in b.artifacts.items()},
        "events": events,
    }
    expected = {(t.conversation_id, t.turn_id): t for b in builders for t in b.expected}
    planted = [p for b in builders for p in b.planted]
    return Generated(fixture, expected, planted)
