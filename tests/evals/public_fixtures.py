"""Write the public fixtures for relevance and tolerant excerpts into tests/fixtures/public/.

`python -m tests.evals.public_fixtures` writes `relevance` and `tolerant_excerpt` (fixture
and expected outcome, in the format of the other public fixtures and the acceptance
runner). The expected outcomes are written from the contract: the export id and blob from
section 8, the rows from the data this script puts in the artifacts.
"""

from __future__ import annotations

import hashlib
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from handlers.compaction import build_citation

from .builders import T0, half_up, iso

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"
USER = "user_alice"


class Story:
    """One conversation of a public fixture, written message by message."""

    def __init__(self, case: str, letter: str) -> None:
        self.cid = f"conv_{case}_{letter}"
        self.prefix = f"{case}_{letter}"
        self.messages: list[dict[str, Any]] = []
        self.artifacts: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self.turn = 0
        self.clock = 0  # seconds after 09:00 on 2026-11-20

    @property
    def turn_id(self) -> str:
        return f"turn_{self.prefix}{self.turn}"

    def _add(self, role: str, pause: int, **fields: Any) -> dict[str, Any]:
        self.clock += pause
        seq = len(self.messages) + 1
        message = {
            "id": f"msg_{self.prefix}_{seq:03d}",
            "conversation_id": self.cid,
            "turn_id": self.turn_id,
            "seq": seq,
            "role": role,
            "created_at": self._at(0),
            "deleted": False,
            **fields,
        }
        self.messages.append(message)
        return message

    def _at(self, later: int) -> str:
        return iso(T0 + timedelta(days=1, hours=9, seconds=self.clock + later))

    def user(self, text: str) -> None:
        self.turn += 1
        self._add("user", 60, content=text)

    def calls(self, *calls: tuple[str, dict[str, Any], Any]) -> list[str]:
        """Parallel calls, each answered by its own tool message; the artifact paths."""
        ids = [
            "call_" + hashlib.sha256(f"{self.cid}/{self.turn}/{n}/{c[0]}".encode()).hexdigest()[:24]
            for n, c in enumerate(calls, start=len(self.artifacts))
        ]
        requests = [
            {"id": i, "name": name, "arguments": args}
            for i, (name, args, _) in zip(ids, calls, strict=True)
        ]
        self._add("assistant", 9, content="", tool_calls=requests)
        paths = []
        for call_id, (name, args, result) in zip(ids, calls, strict=True):
            path = f"artifacts/{self.cid}/{self.turn_id}/{call_id}.json"
            self.artifacts[path] = {
                "call_id": call_id,
                "name": name,
                "arguments": args,
                "result": result,
            }
            answer = {
                "call_id": call_id,
                "name": name,
                "success": True,
                "citation": build_citation(result),
                "artifact": path,
            }
            self._add("tool", 4, results=[answer])
            paths.append(path)
        return paths

    def reply(self, text: str) -> None:
        self._add("assistant", 9, content=text, tool_calls=[])

    def event(self, history_limit: int = 20) -> str:
        mine = [m for m in self.messages if m["turn_id"] == self.turn_id]
        event = {
            "type": "turn.completed",
            "version": 1,
            "event_id": "evt_"
            + hashlib.sha256(f"{self.cid}/{self.turn}".encode()).hexdigest()[:24],
            "occurred_at": self._at(1),
            "conversation_id": self.cid,
            "user_id": USER,
            "turn_id": self.turn_id,
            "user_message_id": mine[0]["id"],
            "reply_message_id": mine[-1]["id"],
            "history_limit": history_limit,
        }
        self.events.append(event)
        return event["event_id"]


def samples(parameter: str, start: int, count: int, base: float, unit: str) -> list[dict[str, Any]]:
    """One sample a minute, values with three decimals (so excerpts round them)."""
    return [
        {
            "timestamp": iso(T0 + timedelta(minutes=i)),
            "parameter": parameter,
            "value": round(base + ((i * 37) % 41) / 1000, 3),
            "unit": unit,
        }
        for i in range(start, start + count)
    ]


def history_page(rows: list[dict[str, Any]], page: int, parameter: str) -> Any:
    chunk = rows[(page - 1) * 450 : page * 450]
    result = {"instance_id": "sat-07", "parameter": parameter, "page": page, "page_size": 450}
    result.update(total=len(rows), items=chunk)
    arguments = {"instance_id": "sat-07", "parameter": parameter, "page": page, "page_size": 450}
    return ("list_parameter_history", arguments, result)


def lookups() -> tuple[tuple[str, dict[str, Any], Any], ...]:
    instance = {"instance_id": "sat-07", "name": "Sentinel-7 bus", "status": "online"}
    parameter = {"parameter": "BatteryVoltage1", "instance_id": "sat-07", "unit": "V"}
    return (
        ("list_instances", {"name_filter": "sat-07"}, {"items": [instance], "count": 1}),
        ("list_parameters", {"instance_id": "sat-07"}, {"items": [parameter], "count": 1}),
    )


def export_of(cid: str, turn_id: str, fmt: str) -> tuple[str, str]:
    """docs/contract/files.md: the export id and blob path."""
    digest = hashlib.sha256(f"{cid}\n{turn_id}\n{fmt}".encode()).hexdigest()[:20]
    return f"exp_{digest}", f"exports/{cid}/{turn_id}/exp_{digest}.{fmt}"


def turn_label(story: Story, event_id: str, decision: str, fmt: str | None) -> dict[str, Any]:
    return {
        "conversation_id": story.cid,
        "record": "one",
        "user_id": USER,
        "event_id": event_id,
        "decision": decision,
        "format": fmt,
        "carried": False,
        "state_after": {"state": "idle", "format": None},
        "export": None,
    }


def export_label(story: Story, fmt: str, source: str, rule: str, **fields: Any) -> dict[str, Any]:
    export_id, blob = export_of(story.cid, story.turn_id, fmt)
    label = {
        "format": fmt,
        "export_id": export_id,
        "blob": blob,
        "row_source": source,
        "selection_rule": rule,
        "columns_forbidden": ["Source action"],
        "source_artifacts": None,
        "source_artifacts_include": [],
        "source_artifacts_exclude": [],
        "truncated": False,
    }
    label.update(fields)
    return label


TELEMETRY_COLUMNS = ["timestamp", "parameter", "value", "unit"]


def relevance() -> tuple[dict[str, Any], dict[str, Any]]:
    """The seed's example: BatteryVoltage1 two turns back, Temperature1 newer, the request
    names BatteryVoltage1: the 900 voltage rows, not the newer dataset
    (docs/contract/decision.md step 7)."""
    story = Story("relevance", "a")
    volts = samples("BatteryVoltage1", 0, 900, 12.4, "V")
    temps = samples("Temperature1", 0, 600, 21.0, "C")
    labels: dict[str, Any] = {}
    story.user("Retrieve the BatteryVoltage1 history for instance sat-07")
    story.calls(*lookups())
    volt_paths = story.calls(
        history_page(volts, 1, "BatteryVoltage1"), history_page(volts, 2, "BatteryVoltage1")
    )
    story.reply("I retrieved 900 BatteryVoltage1 samples, one per minute.")
    labels[story.turn_id] = turn_label(story, story.event(), "no_request", None)
    story.user("Now the Temperature1 history for the same instance")
    temp_paths = story.calls(
        history_page(temps, 1, "Temperature1"), history_page(temps, 2, "Temperature1")
    )
    story.reply("I retrieved 600 Temperature1 samples.")
    labels[story.turn_id] = turn_label(story, story.event(), "no_request", None)
    story.user("create a csv of the BatteryVoltage1 samples")
    story.reply("Here is the CSV with the 900 BatteryVoltage1 samples.")
    published = turn_label(story, story.event(), "published", "csv")
    published["export"] = export_label(
        story,
        "csv",
        "prior_turn",
        "reach_back_named",
        row_count=900,
        columns_exact=TELEMETRY_COLUMNS,
        columns_required=TELEMETRY_COLUMNS,
        source_artifacts=sorted(volt_paths),
        source_artifacts_exclude=sorted(temp_paths),
        first_row=volts[0],
        last_row=volts[-1],
        value_counts={"parameter": {"BatteryVoltage1": 900}},
    )
    labels[story.turn_id] = published
    summary = (
        "BatteryVoltage1 (900 rows) two turns back, a newer Temperature1 dataset (600 rows); "
        "'create a csv of the BatteryVoltage1 samples' names the older one: its 900 rows."
    )
    return _files("relevance", ["core", "relevance"], summary, [story], labels)


def tolerant_excerpt() -> tuple[dict[str, Any], dict[str, Any]]:
    """A loosely pasted excerpt (units, rounding, reformatted times, an elision row) is an
    excerpt: the 900 action rows win. A look-alike with one value that no row holds is a
    table the model composed: it wins (docs/contract/decision.md step 7)."""
    labels: dict[str, Any] = {}
    volts = samples("BatteryVoltage1", 0, 900, 12.4, "V")

    def fetched(story: Story, text: str) -> list[str]:
        story.user(text)
        story.calls(*lookups())
        return story.calls(
            history_page(volts, 1, "BatteryVoltage1"), history_page(volts, 2, "BatteryVoltage1")
        )

    loose = Story("tolerant_excerpt", "a")
    paths = fetched(loose, "Get the BatteryVoltage1 history of sat-07 and create a csv")
    shown = [volts[0], volts[1], volts[899]]
    lines = [
        f"| {r['timestamp'][:10]} {r['timestamp'][11:16]} | batteryvoltage1 | "
        f"{half_up(r['value'], 2)} V |"
        for r in shown
    ]
    table = "\n".join(
        [
            "| Timestamp (UTC) | Parameter | Value (V) |",
            "|---|---|---|",
            *lines[:2],
            "| … | … | … |",
            lines[2],
        ]
    )
    loose.reply(f"Here is what the data looks like:\n\n{table}\n\nThe CSV holds all 900 samples.")
    label = turn_label(loose, loose.event(), "published", "csv")
    label["export"] = export_label(
        loose,
        "csv",
        "action_rows",
        "excerpt_replaced",
        row_count=900,
        columns_exact=TELEMETRY_COLUMNS,
        columns_required=TELEMETRY_COLUMNS,
        source_artifacts=sorted(paths),
        first_row=volts[0],
        last_row=volts[-1],
    )
    labels[loose.turn_id] = label

    composed = Story("tolerant_excerpt", "b")
    fetched(composed, "Get the BatteryVoltage1 history of sat-07 and create a csv")
    rows = [
        ["2026-11-19 00:00", "BatteryVoltage1", f"{half_up(volts[0]['value'], 2)} V"],
        ["2026-11-19 00:01", "BatteryVoltage1", "13.10 V"],  # no sample holds this value
        ["2026-11-19 00:02", "BatteryVoltage1", f"{half_up(volts[2]['value'], 2)} V"],
    ]
    body = "\n".join(f"{r[0]},{r[1]},{r[2]}" for r in rows)
    composed.reply(f"```csv\nTimestamp (UTC),Parameter,Value (V)\n{body}\n```")
    label = turn_label(composed, composed.event(), "published", "csv")
    header = ["Timestamp (UTC)", "Parameter", "Value (V)"]
    label["export"] = export_label(
        composed,
        "csv",
        "assistant_table",
        "assistant_table",
        row_count=3,
        columns_exact=header,
        columns_required=header,
        source_artifacts=[],
        first_row=dict(zip(header, rows[0], strict=True)),
        last_row=dict(zip(header, rows[-1], strict=True)),
    )
    labels[composed.turn_id] = label
    summary = (
        "a: the reply pastes 3 of 900 samples with units, rounding, minute times and an "
        "elision row: an excerpt, the 900 rows win. b: one pasted value is in no sample: "
        "the model composed the table, it wins."
    )
    return _files("tolerant_excerpt", ["core", "excerpt"], summary, [loose, composed], labels)


def _files(
    case: str, tags: list[str], summary: str, stories: list[Story], labels: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    fixture = {
        "conversations": [
            {"id": s.cid, "user_id": USER, "participants": [], "deleted": False} for s in stories
        ],
        "messages": [m for s in stories for m in s.messages],
        "artifacts": {p: a for s in stories for p, a in s.artifacts.items()},
        "events": [e for s in stories for e in s.events],
    }
    expected = {
        "case": case,
        "tags": tags,
        "summary": summary,
        "fixture": f"{case}.fixture.json",
        "conversations": [s.cid for s in stories],
        "turns": labels,
        "dlq": [],
    }
    return fixture, expected


def write(target: Path = PUBLIC) -> None:
    from .generate import dump

    for build in (relevance, tolerant_excerpt):
        fixture, expected = build()
        case = expected["case"]
        (target / f"{case}.fixture.json").write_text(dump(fixture), encoding="utf-8")
        (target / f"{case}.expected.json").write_text(dump(expected), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else PUBLIC)
