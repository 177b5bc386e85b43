"""Building eval conversations: the chat service's documents, telemetry data and pasted tables.

A `Case` writes messages, artifacts and events the way the chat service stores them (the
compact citation on each tool result comes from the project's own compactor, as the contract
section 3 says the chat service uses it) and carries the labels its author wrote from the
the contract. Nothing here runs the worker or reads its decisions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from handlers.compaction import build_citation

T0 = datetime(2026, 11, 19, 0, 0, tzinfo=UTC)


def iso(at: datetime) -> str:
    """An RFC 3339 UTC time as tools return it."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Group:
    """One action's results in one turn: its artifacts and the rows they hold, unique."""

    action: str
    artifacts: list[str] = field(default_factory=list)
    rows: int = 0


@dataclass
class Case:
    """One labelled conversation: the fixture of docs/contract/cli.md and the expected outcome."""

    number: int
    slug: str
    rule: str  # the accuracy bucket it counts in
    summary: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)
    turn: int = 0
    calls: int = 0
    clock: datetime = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)

    @property
    def name(self) -> str:
        return f"{self.number:03d}_{self.slug}"

    @property
    def cid(self) -> str:
        return f"conv_eval_{self.number:03d}"

    @property
    def turn_id(self) -> str:
        return f"turn_eval_{self.number:03d}_{self.turn}"

    def _add(self, role: str, **fields: Any) -> dict[str, Any]:
        self.clock += timedelta(seconds=7)
        seq = len(self.messages) + 1
        message = {
            "id": f"msg_eval_{self.number:03d}_{seq:03d}",
            "conversation_id": self.cid,
            "turn_id": self.turn_id,
            "seq": seq,
            "role": role,
            "created_at": iso(self.clock),
            "deleted": False,
            **fields,
        }
        self.messages.append(message)
        return message

    def user(self, text: str) -> None:
        """A user message opens a new turn."""
        self.turn += 1
        self._add("user", content=text)

    def reply(self, text: str, clarification: bool | None = None) -> None:
        """The turn's last assistant message."""
        extra = {} if clarification is None else {"clarification": clarification}
        self._add("assistant", content=text, tool_calls=[], **extra)

    def tools(self, *calls: tuple[str, dict[str, Any], Any], **options: Any) -> list[Group]:
        """Parallel calls in one assistant message, answered by one tool message.

        Options: success (False: failed results), row_count (False: the citation keeps only
        the `remaining_items` marker to estimate from), artifact (False: no blob).
        """
        success = options.get("success", True)
        requests, results, groups = [], [], []
        for action, arguments, result in calls:
            self.calls += 1
            call_id = f"call_eval_{self.number:03d}_{self.calls:02d}"
            path = f"artifacts/{self.cid}/{self.turn_id}/{call_id}.json"
            citation = build_citation(result)
            if not options.get("row_count", True):
                del citation["row_count"]
            requests.append({"id": call_id, "name": action, "arguments": arguments})
            stored = options.get("artifact", True)
            results.append(
                {
                    "call_id": call_id,
                    "name": action,
                    "success": success,
                    "citation": citation,
                    "artifact": path if stored else None,
                }
            )
            if stored:
                self.artifacts[path] = {
                    "call_id": call_id,
                    "name": action,
                    "arguments": arguments,
                    "result": result,
                }
            groups.append(Group(action, [path] if stored else [], len(rows_of(result))))
        self._add("assistant", content="", tool_calls=requests)
        self._add("tool", results=results)
        return groups

    def event(self, history_limit: int | None = 20) -> str:
        """The turn.completed event of the current turn."""
        mine = [m for m in self.messages if m["turn_id"] == self.turn_id]
        user = next(m for m in mine if m["role"] == "user")
        reply = [m for m in mine if m["role"] == "assistant"][-1]
        event = {
            "type": "turn.completed",
            "version": 1,
            "event_id": f"evt_eval_{self.number:03d}_{self.turn}",
            "occurred_at": iso(self.clock + timedelta(seconds=1)),
            "conversation_id": self.cid,
            "user_id": "user_eval",
            "turn_id": self.turn_id,
            "user_message_id": user["id"],
            "reply_message_id": reply["id"],
        }
        if history_limit is not None:
            event["history_limit"] = history_limit
        self.events.append(event)
        return self.turn_id

    def expect(
        self,
        decision: str,
        fmt: str | None,
        *,
        carried: bool = False,
        source: str | None = None,
        rule: str | None = None,
        rows: int | None = None,
        groups: list[Group] | None = None,
        columns: list[str] | None = None,
    ) -> None:
        """Label the current turn (its event must be sent with `event`)."""
        label: dict[str, Any] = {
            "decision": decision,
            "format": fmt,
            "carried": carried,
            "row_source": source,
            "selection_rule": rule,
            "row_count": rows,
            # docs/contract/turn-record.md: the artifacts whose rows are in the file (none for a
            # reply table).
            "source_artifacts": sorted(a for g in groups or [] for a in g.artifacts)
            if decision == "published"
            else None,
        }
        if columns is not None:
            label["columns"] = columns
        self.labels[self.turn_id] = label

    def fixture(self) -> dict[str, Any]:
        conversation = {
            "id": self.cid,
            "user_id": "user_eval",
            "participants": [],
            "deleted": False,
        }
        return {
            "conversations": [conversation],
            "messages": self.messages,
            "artifacts": self.artifacts,
            "events": self.events,
        }

    def expected(self) -> dict[str, Any]:
        return {
            "case": self.name,
            "rule": self.rule,
            "summary": self.summary,
            "fixture": f"{self.name}.fixture.json",
            "conversation_id": self.cid,
            "turns": self.labels,
        }


def rows_of(result: Any) -> list[Any]:
    """The rows the generator put in a result (its own shapes only: a list or {items})."""
    if isinstance(result, list):
        return result
    if isinstance(result, dict) and isinstance(result.get("items"), list):
        return result["items"]
    return [result]


# --- data --------------------------------------------------------------------------------
UNITS = {"Voltage": "V", "Current": "A", "Temperature": "C", "Power": "W", "Speed": "rpm"}


def unit_of(parameter: str) -> str:
    return next((u for word, u in UNITS.items() if word in parameter), "")


def telemetry(
    parameter: str,
    n: int,
    *,
    instance: str = "sat-07",
    start: int = 0,
    step: int = 60,
    base: float = 12.4,
    spread: float = 0.9,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Samples of one parameter, one every `step` seconds, values with four decimals."""
    rows = []
    for i in range(start, start + n):
        wobble = ((i * 7919 + seed * 104729) % 1000) / 1000
        rows.append(
            {
                "timestamp": iso(T0 + timedelta(seconds=i * step)),
                "instance_id": instance,
                "parameter": parameter,
                "value": round(base + spread * wobble, 4),
                "unit": unit_of(parameter),
            }
        )
    return rows


def page(rows: list[dict[str, Any]], number: int, size: int, **envelope: Any) -> dict[str, Any]:
    """One page of a paged history result."""
    chunk = rows[(number - 1) * size : number * size]
    return {**envelope, "page": number, "page_size": size, "total": len(rows), "items": chunk}


def alarm_events(n: int, *, subsystem: str = "EPS", seed: int = 0) -> list[dict[str, Any]]:
    """Alarm events with ids, counts in the thousands and acknowledgement flags."""
    severities = ("minor", "major", "critical", "warning")
    return [
        {
            "event_id": f"EV-{4100 + i}",
            "raised_at": iso(T0 + timedelta(minutes=13 * i + seed)),
            "subsystem": subsystem,
            "severity": severities[(i + seed) % 4],
            "occurrences": 1000 + ((i * 2731 + seed * 17) % 90000),
            "acknowledged": (i + seed) % 3 == 0,
        }
        for i in range(n)
    ]


def pack_status(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """Battery pack samples with millisecond times, percentages, °C and flags."""
    return [
        {
            "sampled_at": (T0 + timedelta(seconds=97 * i, milliseconds=250 + seed))
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "pack": f"B{1 + i % 3}",
            "charge": 40 + (i * 37 + seed) % 60,
            "cell_temp": round(18 + ((i * 53 + seed) % 100) / 17, 3),
            "balancing": (i + seed) % 4 == 0,
        }
        for i in range(n)
    ]


def instances(names: list[str]) -> dict[str, Any]:
    return {
        "items": [
            {"instance_id": n, "name": f"Sentinel-{n[-2:].lstrip('0')} bus", "status": "online"}
            for n in names
        ],
        "count": len(names),
    }


def sites(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"site_id": n[:4].upper(), "name": n, "country": "NO" if n != "Kiruna" else "SE"}
        for n in names
    ]


# --- pasting tables the way models do ------------------------------------------------------
def half_up(value: float, places: int) -> str:
    quantum = Decimal(1).scaleb(-places)
    return str(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))


def grouped(number: int, separator: str = ",") -> str:
    return f"{number:,}".replace(",", separator)


def pipe_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def csv_lines(header: list[str], rows: list[list[str]]) -> str:
    def cell(text: str) -> str:
        return f'"{text}"' if re.search(r'[",\n]', text) else text

    return "\n".join(",".join(cell(c) for c in line) for line in [header, *rows])


def tsv_lines(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join("\t".join(line) for line in [header, *rows])
