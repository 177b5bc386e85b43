"""The poison corpus: bad input of every kind, through `export-worker send` and the stores.

Every kind ends as docs/contract/delivery.md says (dead-lettered with its reason, or a recorded
decision), the worker never exits, and the good turns queued between the bad ones are all
published. The whole corpus runs through ONE home and ONE `run --drain`: it is seeded with
`dev seed` (documents, JSON artifacts), a few blobs are written as raw bytes (what no JSON
fixture can hold), and every event goes in through `send -` as JSON lines, a good event
after each bad one. README.md ("Operations") lists the same table.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cli_driver import Cli

from worker.local.backend import open_local_backend
from worker.ports import DeadLetteredMessage

ROW_MARKER = "ROWVALUE_7f3a"  # in every artifact row: must never reach a description or log
AT = "2026-11-20T09:00:00Z"


# --------------------------------------------------------------------------------------
# Building conversations
# --------------------------------------------------------------------------------------
def rows(n: int = 12) -> list[dict[str, Any]]:
    return [{"n": i, "label": f"{ROW_MARKER}_{i}", "value": 1.5 * i} for i in range(n)]


@dataclass
class Case:
    """One kind of bad input: what it puts where, and how it must end."""

    kind: str
    route: str  # "send" (a queue body) or "store" (documents or blobs)
    outcome: str  # a dead-letter reason, or "decision:<decision>"
    conversations: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    artifacts: dict[str, Any] = field(default_factory=dict)
    raw_blobs: dict[str, bytes] = field(default_factory=dict)
    bodies: list[bytes] = field(default_factory=list)
    check: Callable[[Outcome, Case], None] | None = None

    @property
    def cid(self) -> str:
        return f"conv_p_{self.kind}"

    @property
    def turn_id(self) -> str:
        return f"turn_p_{self.kind}"

    def conversation(self, **changes: Any) -> dict[str, Any]:
        doc = {"id": self.cid, "user_id": "user_p", "participants": [], "deleted": False}
        doc.update(changes)
        self.conversations.append(doc)
        return doc

    def turn(
        self,
        *,
        result: Any = None,
        artifact: str | None = None,
        call_id: str | None = "call_1",
        content: str = "Retrieve the rows and create a csv",
        reply: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A turn: user, one call, its result (artifact), the reply. Returns its event."""
        cid, tid = self.cid, self.turn_id
        path = artifact or f"artifacts/{cid}/{tid}/call_1.json"

        def message(seq: int, role: str, **fields: Any) -> dict[str, Any]:
            return {
                "id": f"msg_{tid}_{seq}",
                "conversation_id": cid,
                "turn_id": tid,
                "seq": seq,
                "role": role,
                "created_at": AT,
                **fields,
            }

        self.messages += [
            message(1, "user", content=content),
            message(2, "assistant", content="", tool_calls=[{"id": "call_1", "name": "list_rows"}]),
            message(
                3,
                "tool",
                results=[
                    {"call_id": call_id, "name": "list_rows", "success": True, "artifact": path}
                ],
            ),
            {
                **message(4, "assistant", content="Here is the file.", tool_calls=[]),
                **(reply or {}),
            },
        ]
        if result is not None and artifact is None:
            self.artifacts[path] = {"call_id": "call_1", "name": "list_rows", "result": result}
        return self.event()

    def event(self, **changes: Any) -> dict[str, Any]:
        tid = self.turn_id
        event = {
            "type": "turn.completed",
            "version": 1,
            "event_id": f"evt_{tid}",
            "occurred_at": AT,
            "conversation_id": self.cid,
            "user_id": "user_p",
            "turn_id": tid,
            "user_message_id": f"msg_{tid}_1",
            "reply_message_id": f"msg_{tid}_4",
            "poison": self.kind,
        }
        event.update(changes)
        return event

    def send(self, *events: dict[str, Any] | bytes) -> None:
        for e in events:
            self.bodies.append(e if isinstance(e, bytes) else json.dumps(e).encode())

    def marker(self) -> bytes:
        return f'"poison": "{self.kind}"'.encode()


@dataclass
class Outcome:
    """What the one run left behind."""

    records: dict[str, list[dict[str, Any]]]
    dead: list[DeadLetteredMessage]
    events: list[dict[str, Any]]
    home: Path
    stderr: str

    def dead_for(self, case: Case) -> list[DeadLetteredMessage]:
        marker = case.marker() if case.bodies and case.bodies[0][:1] == b"{" else None
        return [
            d
            for d in self.dead
            if (marker and marker in d.body) or f"poison={case.kind}".encode() in d.body
        ]


# --------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------
def event_cases() -> list[Case]:
    """Bodies that are not a valid turn.completed v1: schema_invalid at once."""
    cases: list[Case] = []

    def raw(kind: str, body: bytes) -> None:
        case = Case(kind, "send", "schema_invalid")
        case.send(body)
        cases.append(case)

    def changed(kind: str, **changes: Any) -> None:
        case = Case(kind, "send", "schema_invalid")
        event = case.event(**changes)
        for key in [k for k, v in changes.items() if v is _DROP]:
            del event[key]
        case.send(event)
        cases.append(case)

    raw("not_json", b"this is not json poison=not_json")
    raw("json_array", b'["poison=json_array", 1, 2]')
    raw("json_string", b'"poison=json_string"')
    changed("wrong_type", type="turn.started")
    changed("wrong_version", version=2)
    changed("version_as_string", version="1")
    changed("missing_field", reply_message_id=_DROP)
    changed("ill_typed_field", turn_id=42)
    changed("empty_user_id", user_id="")
    changed("null_conversation_id", conversation_id=None)
    changed("negative_history_limit", history_limit=-1)
    changed("boolean_history_limit", history_limit=True)
    changed("oversized_body", padding="x" * (300 * 1024))
    # JSON escapes a lone surrogate ("\ud800"): `send` must still enqueue it as given.
    changed("lone_surrogate_in_conversation_id", conversation_id="conv_p_\ud800")
    changed("lone_surrogate_in_event_id", event_id="evt_p_\udfff")
    base = Case("x", "send", "").event()
    raw(
        "invalid_utf8",
        json.dumps({**base, "poison": "invalid_utf8"}).encode()[:-1]
        + b', "note": "\xff\xfe poison=invalid_utf8"}',
    )
    for kind, constant in (("nan_in_event", "NaN"), ("infinity_in_event", "Infinity")):
        body = json.dumps({**base, "poison": kind}).encode()[:-1]
        raw(kind, body + f', "x": {constant}}}'.encode())
    raw(
        "deeply_nested_event",
        json.dumps({**base, "poison": "deeply_nested_event"}).encode()[:-1]
        + b', "x": '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}",
    )
    return cases


_DROP = object()


def store_cases() -> list[Case]:
    """Valid events whose stored documents, blobs or routing are bad."""
    cases: list[Case] = []

    def case(kind: str, outcome: str, route: str = "store") -> Case:
        c = Case(kind, route, outcome)
        cases.append(c)
        return c

    c = case("unknown_conversation", "conversation_not_found", "send")
    c.send(c.turn(result=rows()))  # messages and artifact stored, the conversation never

    c = case("deleted_conversation", "decision:conversation_deleted", "send")
    c.conversation(deleted=True)
    c.send(c.turn(result=rows()))

    c = case("foreign_user", "not_authorized", "send")
    c.conversation()
    c.send({**c.turn(result=rows()), "user_id": "user_mallory"})

    c = case("forged_user_for_recorded_turn", "not_authorized", "send")
    c.conversation()
    good = c.turn(result=rows())
    c.send({**good, "poison": "ok"}, {**good, "event_id": "evt_forged", "user_id": "user_mallory"})
    c.check = lambda o, c: _one_record(o, c, "published")

    c = case("message_ids_that_do_not_exist", "turn_not_found", "send")
    c.conversation()
    c.send({**c.turn(result=rows()), "user_message_id": "msg_nope", "reply_message_id": "msg_nah"})

    c = case("user_message_of_another_turn", "turn_not_found", "send")
    c.conversation()
    event = c.turn(result=rows())
    c.messages[0]["turn_id"] = "turn_somewhere_else"
    c.send(event)

    # The message is there, of another role: retried like one not written yet, but the
    # description says what the id names, so that no one waits for a write.
    c = case("call_message_named_as_the_user_message", "turn_not_found", "send")
    c.conversation()
    event = c.turn(result=rows())
    c.send({**event, "user_message_id": c.messages[1]["id"]})
    c.check = lambda o, c: _described(o, c, "user message id names an assistant message")

    c = case("duplicate_event_id", "decision:published", "send")
    c.conversation()
    event = c.turn(result=rows())
    c.send(event, event)
    c.check = lambda o, c: _one_record(o, c, "published")

    c = case("two_events_for_one_turn", "decision:published", "send")
    c.conversation()
    event = c.turn(result=rows())
    c.send(event, {**event, "event_id": "evt_again"})
    c.check = lambda o, c: _one_record(o, c, "published")

    c = case("artifact_outside_the_conversation", "not_authorized")
    c.conversation()
    c.artifacts["artifacts/conv_p_someone_else/t/call_1.json"] = {"result": rows()}
    c.send(c.turn(artifact="artifacts/conv_p_someone_else/t/call_1.json"))

    c = case("artifact_path_traversal", "not_authorized")
    c.conversation()
    c.send(c.turn(artifact=f"artifacts/{c.cid}/../conv_p_someone_else/t/call_1.json"))

    c = case("artifact_in_another_container", "not_authorized")
    c.conversation()
    c.send(c.turn(artifact=f"exports/{c.cid}/t/call_1.json"))

    c = case("missing_artifact", "artifact_missing")
    c.conversation()
    c.send(c.turn())  # its artifact never stored

    c = case("artifact_not_json", "artifact_invalid")
    c.conversation()
    c.raw_blobs[f"artifacts/{c.cid}/{c.turn_id}/call_1.json"] = f"{ROW_MARKER} not json".encode()
    c.send(c.turn())

    c = case("artifact_invalid_utf8", "artifact_invalid")
    c.conversation()
    c.raw_blobs[f"artifacts/{c.cid}/{c.turn_id}/call_1.json"] = b'{"result": "\xff\xfe"}'
    c.send(c.turn())

    c = case("artifact_not_an_object", "artifact_invalid")
    c.conversation()
    c.artifacts[f"artifacts/{c.cid}/{c.turn_id}/call_1.json"] = rows()
    c.send(c.turn())

    c = case("artifact_deeply_nested", "artifact_invalid")
    c.conversation()
    c.raw_blobs[f"artifacts/{c.cid}/{c.turn_id}/call_1.json"] = (
        b'{"result": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    )
    c.send(c.turn())

    c = case("artifact_too_deep_to_walk", "artifact_invalid")
    c.conversation()
    c.raw_blobs[f"artifacts/{c.cid}/{c.turn_id}/call_1.json"] = (
        b'{"result": [{"id": 1, "tree": ' + b"[" * 700 + b"]" * 700 + b"}]}"
    )
    c.send(c.turn())

    c = case("result_of_an_unexpected_shape", "decision:published")
    c.conversation()
    c.send(c.turn(result=f"plain text, not rows {ROW_MARKER}"))
    c.check = lambda o, c: _rows_in_file(o, c, 1, ["value"])

    c = case("huge_cell", "decision:published")
    c.conversation()
    huge = "h" * (2 * 1024 * 1024)
    c.send(c.turn(result=[{"id": 1, "blob": huge}, {"id": 2, "blob": "small"}]))
    c.check = lambda o, c: _huge_cell_whole(o, c, huge)

    c = case("nan_and_infinity_in_rows", "decision:published")
    c.conversation()
    c.raw_blobs[f"artifacts/{c.cid}/{c.turn_id}/call_1.json"] = (
        b'{"result": [{"a": NaN, "b": 1}, {"a": Infinity, "b": -Infinity}]}'
    )
    c.send(c.turn(content="Retrieve the rows and create a json file"))
    c.check = lambda o, c: _json_file(o, c, [{"a": None, "b": 1}, {"a": None, "b": None}])

    c = case("nested_values_in_cells", "decision:published")
    c.conversation()
    nested: Any = "leaf"
    for _ in range(200):
        nested = {"down": nested}
    c.send(c.turn(result=[{"id": 1, "tree": nested}]))
    c.check = lambda o, c: _rows_in_file(o, c, 1, ["id", "tree"])

    c = case("tool_result_whose_call_is_missing", "decision:no_rows")
    c.conversation()
    c.send(c.turn(result=rows(), call_id="call_that_was_never_made"))

    c = case("malformed_earlier_message", "decision:published")
    c.conversation()
    event = c.turn(result=rows())
    for m in c.messages:
        m["seq"] += 1
    c.messages.append(
        {"id": "msg_bad", "conversation_id": c.cid, "turn_id": "t0", "seq": 1, "role": 7}
    )
    c.send(event)

    # The turn's own calls stored OpenAI-style (arguments as a JSON string): skipping the
    # message would lose its calls, and the turn would export an earlier turn's rows.
    c = case("malformed_tool_call_message_of_the_turn", "schema_invalid")
    c.conversation()
    event = c.turn(result=rows())
    c.messages[1]["tool_calls"][0]["arguments"] = '{"day": "today"}'
    c.send(event)

    # Deleted, the same message is invisible whatever it holds: the turn has no rows.
    c = case("malformed_deleted_message_of_the_turn", "decision:no_rows")
    c.conversation()
    event = c.turn(result=rows())
    c.messages[1]["tool_calls"][0]["arguments"] = '{"day": "today"}'
    c.messages[1]["deleted"] = True
    c.send(event)

    # A message of the turn that does not parse, changed in one field (the messages:
    # 0 user, 1 the call, 2 its result, 3 the reply). Not a boolean, `deleted` leaves open
    # whether the calls are visible, and so does a role the contract does not name; the
    # turn's result answers them, so skipping the message would lose its rows:
    # dead-lettered, not guessed.
    for kind, at, name, value in (
        ("malformed_reply_message", 3, "role", "robot"),
        ("answered_calls_with_deleted_null", 1, "deleted", None),
        ("answered_calls_with_deleted_as_text", 1, "deleted", "false"),
        ("answered_calls_with_deleted_a_number", 1, "deleted", 0),
        ("answered_calls_of_an_unknown_role", 1, "role", "function"),
        ("results_with_deleted_null", 2, "deleted", None),
    ):
        c = case(kind, "schema_invalid")
        c.conversation()
        event = c.turn(result=rows())
        c.messages[at][name] = value
        c.send(event)

    # Malformed messages of the turn's id that hold no call or result it needs: skipped
    # with a warning, the turn published from its rows. Each goes in just before the reply
    # (or, for an earlier turn sharing the id, before the user message).
    extras: dict[str, dict[str, Any]] = {
        "system_message_with_content_parts": {"role": "system", "content": [{"text": "x"}]},
        "system_message_deleted_null": {"role": "system", "content": "x", "deleted": None},
        "draft_deleted_as_text": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c9", "name": "x", "arguments": "{}"}],
            "deleted": "true",
        },
        "developer_role_message": {"role": "developer", "content": "be brief"},
        "earlier_message_sharing_the_turn_id": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c9", "name": "x", "arguments": "{}"}],
        },
    }
    for kind, extra in extras.items():
        c = case(f"malformed_{kind}_is_skipped", "decision:published")
        c.conversation()
        event = c.turn(result=rows())
        at = 0 if kind.startswith("earlier") else 3
        c.messages.insert(
            at,
            {
                "id": f"msg_{c.turn_id}_extra",
                "conversation_id": c.cid,
                "turn_id": c.turn_id,
                "created_at": AT,
                **extra,
            },
        )
        for seq, m in enumerate(c.messages, start=1):
            m["seq"] = seq
        c.send(event)
        c.check = lambda o, c: _rows_in_file(o, c, 12, ["n", "label", "value"])

    # An assistant note between the calls and the reply, written as chat APIs write one
    # that called nothing: no calls, not malformed.
    c = case("assistant_note_with_tool_calls_null", "decision:published")
    c.conversation()
    event = c.turn(result=rows())
    c.messages.insert(
        3,
        {
            "id": f"msg_{c.turn_id}_note",
            "conversation_id": c.cid,
            "turn_id": c.turn_id,
            "role": "assistant",
            "content": "Let me fetch that.",
            "tool_calls": None,
            "created_at": AT,
        },
    )
    for seq, m in enumerate(c.messages, start=1):
        m["seq"] = seq
    c.send(event)

    # A turn that is all there, whose id cannot be a folder of the export's path: refused
    # when the event is read, not after the turn ran to the blob write.
    c = case("turn_id_that_cannot_be_a_folder", "schema_invalid")
    c.conversation()
    event = c.turn(result=rows())
    for m in c.messages:
        m["turn_id"] = ".."
    c.send({**event, "turn_id": ".."})

    # Ids Blob Storage or a file system cannot hold as a blob name's folders: the same.
    for kind, bad_id in [
        ("turn_id_with_a_tab", "turn\tone"),
        ("turn_id_with_a_256_byte_part", "t" * 256),
        ("ids_too_long_for_one_blob_name", "/".join(["t" * 200] * 5)),
    ]:
        c = case(kind, "schema_invalid")
        c.conversation()
        event = c.turn(result=rows())
        for m in c.messages:
            m["turn_id"] = bad_id
        c.send({**event, "turn_id": bad_id})

    c = case("malformed_conversation", "schema_invalid")
    c.conversation(user_id=None)
    c.send(c.turn(result=rows()))

    # No bound but the body's: the record keeps it whole (on Blob Storage, past the 8 KB of
    # metadata, the export's metadata holds its digest: docs/contract/files.md).
    long_user = "用户" * 4500
    c = case("user_id_of_9000_characters", "decision:published")
    c.conversation(user_id=long_user)
    c.send({**c.turn(result=rows()), "user_id": long_user})
    c.check = lambda o, c: _kept_whole(o, c, "user_id", long_user)

    c = case("reply_is_a_tool_message", "decision:published")
    c.conversation()
    c.send({**c.turn(result=rows()), "reply_message_id": f"msg_{c.turn_id}_3"})

    c = case("secret_keys_in_rows", "decision:published")
    c.conversation()
    secret_rows = [
        {
            "id": 1,
            "api_key": "k1",
            "password": "p",
            "Authorization": "Bearer x",
            "meta": {"token": "t"},
        }
    ]
    c.send(c.turn(result=secret_rows))
    c.check = lambda o, c: _rows_in_file(o, c, 1, ["id", "meta"])
    return cases


CASES = event_cases() + store_cases()


def good_turn(n: int) -> Case:
    good = Case(f"good_{n:02d}", "send", "decision:published")
    good.conversation()
    good.send({**good.turn(result=rows(20)), "poison": "none"})
    return good


# --------------------------------------------------------------------------------------
# Checks beyond the outcome
# --------------------------------------------------------------------------------------
def _record(outcome: Outcome, case: Case) -> dict[str, Any]:
    [record] = [r for r in outcome.records.get(case.cid, []) if r["turn_id"] == case.turn_id]
    return record


def _file(outcome: Outcome, case: Case) -> bytes:
    return (outcome.home / "blobs" / _record(outcome, case)["export"]["blob"]).read_bytes()


def _one_record(outcome: Outcome, case: Case, decision: str) -> None:
    records = outcome.records.get(case.cid, [])
    assert [r["decision"] for r in records] == [decision]
    sent = [e for e in outcome.events if e["conversation_id"] == case.cid]
    assert len(sent) == 1


def _kept_whole(outcome: Outcome, case: Case, field: str, value: str) -> None:
    assert _record(outcome, case)[field] == value
    [sent] = [e for e in outcome.events if e["conversation_id"] == case.cid]
    assert sent[field] == value


def _described(outcome: Outcome, case: Case, says: str) -> None:
    [dead] = outcome.dead_for(case)
    assert says in dead.description, dead.description


def _rows_in_file(outcome: Outcome, case: Case, count: int, columns: list[str]) -> None:
    from cli_driver import csv_rows

    header, body = csv_rows(_file(outcome, case))
    assert header == columns
    assert len(body) == count


def _huge_cell_whole(outcome: Outcome, case: Case, huge: str) -> None:
    import csv
    import io

    text = _file(outcome, case).decode("utf-8-sig")
    limit = csv.field_size_limit(len(huge) + 1)
    try:
        body = list(csv.DictReader(io.StringIO(text, newline=""), strict=True))
    finally:
        csv.field_size_limit(limit)
    assert [r["blob"] for r in body] == [huge, "small"]


def _json_file(outcome: Outcome, case: Case, expected: list[dict[str, Any]]) -> None:
    assert json.loads(_file(outcome, case)) == expected


# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """Seed the whole corpus with good turns in between, run one `run --drain`."""
    home = tmp_path_factory.mktemp("poison") / "home"
    home.mkdir()
    cli = Cli(home, {"EXPORT_WORKER_MAX_ATTEMPTS": "3", "EXPORT_WORKER_BACKOFF_BASE_SECONDS": "0"})
    goods = [good_turn(n) for n in range(len(CASES))]
    everything = CASES + goods
    fixture = {
        "conversations": [d for c in everything for d in c.conversations],
        "messages": [m for c in everything for m in c.messages],
        "artifacts": {p: a for c in everything for p, a in c.artifacts.items()},
        "events": [],
    }
    (home / "corpus.json").write_text(json.dumps(fixture))
    cli.run("dev", "seed", str(home / "corpus.json"))
    for case in CASES:
        for path, data in case.raw_blobs.items():
            target = home / "blobs" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    lines: list[bytes] = []
    for case, good in zip(CASES, goods, strict=True):
        lines += case.bodies + good.bodies
    cli.run("send", "-", input=b"\n".join(lines))
    run = cli.run("run", "--drain", "--concurrency", "4", timeout=180)

    async def read() -> Outcome:
        backend = open_local_backend(home)
        try:
            records = {
                c.cid: [r.model_dump() for r in await backend.ledger.list_turns(c.cid)]
                for c in everything
            }
            assert await backend.queue.is_drained()
            return Outcome(
                records,
                await backend.queue.dead_letters(),
                await backend.publisher.sent(),
                home,
                run.stderr.decode(errors="replace"),
            )
        finally:
            await backend.close()

    result = asyncio.run(read())
    result.records["__goods__"] = [r for g in goods for r in result.records[g.cid]]
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_each_kind_of_bad_input_ends_as_the_spec_says(outcome: Outcome, case: Case) -> None:
    dead = outcome.dead_for(case)
    if case.outcome.startswith("decision:"):
        assert dead == [], [(d.reason, d.description) for d in dead]
        assert _record(outcome, case)["decision"] == case.outcome.split(":", 1)[1]
    else:
        assert [d.reason for d in dead] == [case.outcome], [d.description for d in dead]
        if case.kind != "forged_user_for_recorded_turn":
            assert outcome.records.get(case.cid, []) == []
            assert not (outcome.home / "blobs" / "exports" / case.cid).exists()
    if case.check is not None:
        case.check(outcome, case)


def test_the_good_turns_between_the_bad_ones_are_all_published(outcome: Outcome) -> None:
    goods = outcome.records["__goods__"]
    assert len(goods) == len(CASES)
    assert {r["decision"] for r in goods} == {"published"}
    assert all(r["event_sent"] and r["export"]["row_count"] == 20 for r in goods)


def test_the_dead_letter_queue_holds_the_bad_input_and_nothing_else(outcome: Outcome) -> None:
    expected = sum(1 for c in CASES if not c.outcome.startswith("decision:"))
    assert len(outcome.dead) == expected
    for d in outcome.dead:
        assert ROW_MARKER not in d.description
        assert len(d.description) <= 480


def test_the_worker_kept_serving_and_logged_no_row_data(outcome: Outcome) -> None:
    assert "Traceback" not in outcome.stderr
    assert ROW_MARKER not in outcome.stderr
    assert '"event": "worker_stopped"' in outcome.stderr
