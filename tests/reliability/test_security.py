"""Security checks as tests: authorisation before any read, confinement, no secrets out."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from handlers.errors import PermanentError
from worker.handler import TurnHandler
from worker.local.backend import open_local_backend
from worker.ports import Backend
from worker.settings import Settings
from worker.testing.seeding import seed, seeding

PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def headline() -> dict[str, Any]:
    return json.loads((PUBLIC / "headline.fixture.json").read_text())


def test_a_forged_event_for_an_already_recorded_turn_is_not_authorized(tmp_path: Path) -> None:
    """The ledger short-cut is for redeliveries: another user naming the turn is a stranger."""
    fixture = headline()
    good = fixture["events"][0]
    forged = {**good, "event_id": "evt_forged", "user_id": "user_mallory"}
    fixture["events"] = [good, forged]

    async def main() -> None:
        backend = open_local_backend(tmp_path / "home", lock_duration=60)
        try:
            await seed(seeding(backend), fixture)
            handler = TurnHandler(backend, Settings(home=tmp_path / "home"))
            session = await backend.queue.accept_session(0)
            assert session is not None
            first = await session.receive(0)
            assert first is not None
            record = await handler.handle(first)
            assert record.decision == "published"
            await session.complete(first)
            second = await session.receive(0)
            assert second is not None
            with pytest.raises(PermanentError) as raised:
                await handler.handle(second)
            assert raised.value.reason == "not_authorized"
            assert len(await backend.publisher.sent()) == 1
        finally:
            await backend.close()

    asyncio.run(main())


# --------------------------------------------------------------------------------------
SECRET_ROW_VALUE = "SECRET_ROW_VALUE_5b1e"
SECRET_VALUES = ("APIKEY_VALUE_1", "PASSWORD_VALUE_2", "BEARER_VALUE_3", "TOKEN_VALUE_4")
FAKE_BLOB_KEY = "RkFLRV9CTE9CX0tFWV9TRUNSRVQ3ODk="
FAKE_COSMOS_KEY = "RkFLRV9DT1NNT1NfS0VZX1NFQ1JFVDQ1Ng=="
FAKE_SB_KEY = "RkFLRV9TQl9LRVlfU0VDUkVU"
FAKE_ENV = {
    "EXPORT_WORKER_BLOB_CONNECTION_STRING": (
        f"DefaultEndpointsProtocol=http;AccountName=fakeacct;AccountKey={FAKE_BLOB_KEY};"
        "BlobEndpoint=http://127.0.0.1:9/fakeacct;"
    ),
    "EXPORT_WORKER_COSMOS_ENDPOINT": "https://127.0.0.1:9/",
    "EXPORT_WORKER_COSMOS_KEY": FAKE_COSMOS_KEY,
    "EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING": (
        f"Endpoint=sb://127.0.0.1:9/;SharedAccessKeyName=k;SharedAccessKey={FAKE_SB_KEY}"
    ),
    "EXPORT_WORKER_SDK_TIMEOUT_SECONDS": "2",
}


def secret_rows(n: int = 12) -> list[dict[str, Any]]:
    """Rows holding formula-looking text, secrets under secret keys, and a marked value."""
    formulas = ["=cmd|' /C calc'!A0", "+1+1", "@SUM(A1:A2)", "\t=1", "-2+3", "  =HYPERLINK(1)"]
    return [
        {
            "n": i,
            "note": SECRET_ROW_VALUE if i == 0 else formulas[i % len(formulas)],
            "number": -i,
            "api_key": SECRET_VALUES[0],
            "password": SECRET_VALUES[1],
            "Authorization": f"Bearer {SECRET_VALUES[2]}",
            "meta": {"source": "x", "auth": {"refresh_token": SECRET_VALUES[3]}},
        }
        for i in range(n)
    ]


def one_turn(
    cid: str,
    *,
    content: str = "Retrieve the rows and create a csv",
    result: Any = None,
    artifacts: list[str] | None = None,
    owner: str = "user_owner",
    deleted: bool = False,
) -> dict[str, Any]:
    """A fixture of one conversation with one turn whose calls' results are `artifacts`."""
    tid = f"turn_{cid}"
    paths = artifacts or [f"artifacts/{cid}/{tid}/call_0.json"]
    calls = [{"id": f"call_{i}", "name": "list_rows"} for i in range(len(paths))]

    def message(seq: int, role: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": f"{tid}_m{seq}",
            "conversation_id": cid,
            "turn_id": tid,
            "seq": seq,
            "role": role,
            "created_at": "2026-11-20T09:00:00Z",
            **fields,
        }

    results = [
        {"call_id": c["id"], "name": "list_rows", "success": True, "artifact": p}
        for c, p in zip(calls, paths, strict=True)
    ]
    return {
        "conversations": [{"id": cid, "user_id": owner, "participants": [], "deleted": deleted}],
        "messages": [
            message(1, "user", content=content),
            message(2, "assistant", content="", tool_calls=calls),
            message(3, "tool", results=results),
            message(4, "assistant", content="Here is the file.", tool_calls=[]),
        ],
        "artifacts": {
            p: {"result": result if result is not None else secret_rows()} for p in paths
        },
        "events": [
            {
                "type": "turn.completed",
                "version": 1,
                "event_id": f"evt_{tid}",
                "occurred_at": "2026-11-20T09:00:05Z",
                "conversation_id": cid,
                "user_id": owner,
                "turn_id": tid,
                "user_message_id": f"{tid}_m1",
                "reply_message_id": f"{tid}_m4",
            }
        ],
    }


class Counted:
    """A port whose calls are counted by name (a wrapper on the local adapter)."""

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self._inner = inner
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._counts[name] += 1
            return value(*args, **kwargs)

        return call


def handle_first(
    tmp_path: Path, fixture: dict[str, Any], **settings: Any
) -> tuple[Any, Counter[str], Backend]:
    """Seed, then handle the first event with the store and blobs counted: (outcome, counts)."""
    counts: Counter[str] = Counter()
    home = tmp_path / "home"

    async def main() -> Any:
        backend = open_local_backend(home, lock_duration=60)
        try:
            await seed(seeding(backend), fixture)
            session = await backend.queue.accept_session(0)
            assert session is not None
            message = await session.receive(0)
            assert message is not None
            backend.store = Counted(backend.store, counts)  # type: ignore[assignment]
            backend.blobs = Counted(backend.blobs, counts)  # type: ignore[assignment]
            handler = TurnHandler(backend, Settings(home=home, **settings))
            try:
                return await handler.handle(message)
            except Exception as exc:
                return exc
        finally:
            await backend.close()

    outcome = asyncio.run(main())
    return outcome, counts, open_local_backend(home, lock_duration=60)


def test_a_strangers_event_reads_no_message_and_no_artifact(tmp_path: Path) -> None:
    fixture = one_turn("conv_s")
    fixture["events"][0]["user_id"] = "user_stranger"
    outcome, counts, _ = handle_first(tmp_path, fixture)
    assert isinstance(outcome, PermanentError) and outcome.reason == "not_authorized"
    assert counts["get_conversation"] == 1
    assert counts["get_message"] == counts["history"] == 0
    assert counts["read"] == counts["exists"] == counts["info"] == 0


def test_a_deleted_conversation_is_recorded_without_reading_a_message(tmp_path: Path) -> None:
    outcome, counts, _ = handle_first(tmp_path, one_turn("conv_d", deleted=True))
    assert outcome.decision == "conversation_deleted" and outcome.export is None
    assert counts["get_message"] == counts["history"] == counts["read"] == 0


@pytest.mark.parametrize(
    "outside",
    [
        "artifacts/conv_other/turn/call.json",
        "artifacts/conv_c/../conv_other/call.json",
        "artifacts/conv_c_suffix/call.json",
        "exports/conv_c/turn/call.json",
        "/artifacts/conv_c/turn/call.json",
    ],
)
def test_an_artifact_outside_the_conversation_is_never_read(tmp_path: Path, outside: str) -> None:
    inside = "artifacts/conv_c/turn_conv_c/call_0.json"
    fixture = one_turn("conv_c", artifacts=[inside, outside])
    fixture["artifacts"] = {inside: fixture["artifacts"][inside]}  # the outside one: anywhere
    outcome, counts, _ = handle_first(tmp_path, fixture)
    assert isinstance(outcome, PermanentError) and outcome.reason == "not_authorized"
    assert outside not in outcome.description  # the description names the prefix only
    assert counts["read"] == 0  # not even the artifact inside was read


def _file(tmp_path: Path, fmt: str) -> tuple[Any, bytes]:
    word = {"csv": "a csv", "json": "a json file", "xlsx": "an excel spreadsheet"}[fmt]
    fixture = one_turn(f"conv_{fmt}", content=f"Retrieve the rows and create {word}")
    record, _, backend = handle_first(tmp_path, fixture)
    assert record.decision == "published", record

    async def read() -> bytes:
        try:
            return b"".join([c async for c in backend.blobs.read(record.export.blob)])
        finally:
            await backend.close()

    return record, asyncio.run(read())


def test_formula_cells_are_neutralised_in_csv_and_text_stays_text_in_xlsx(tmp_path: Path) -> None:
    from cli_driver import csv_rows

    _, data = _file(tmp_path / "csv", "csv")
    _, rows = csv_rows(data)
    notes = {r["note"] for r in rows[1:]}
    assert notes == {
        "'=cmd|' /C calc'!A0",
        "'+1+1",
        "'@SUM(A1:A2)",
        "'\t=1",
        "'-2+3",
        "'  =HYPERLINK(1)",
    }
    assert [r["number"] for r in rows[:3]] == ["0", "-1", "-2"]  # numbers stay numbers

    import io

    import openpyxl

    _, data = _file(tmp_path / "xlsx", "xlsx")
    sheet = openpyxl.load_workbook(io.BytesIO(data)).active
    header = [c.value for c in sheet[1]]
    for row in sheet.iter_rows(min_row=3):
        note = row[header.index("note")]
        assert note.data_type == "s" and not str(note.value).startswith("'")
        assert row[header.index("number")].data_type == "n"


@pytest.mark.parametrize("fmt", ["csv", "json", "xlsx"])
def test_secret_keys_are_absent_from_the_file(tmp_path: Path, fmt: str) -> None:
    import io
    import zipfile

    record, data = _file(tmp_path, fmt)
    assert record.export.columns == ["n", "note", "number", "meta"]
    text = data
    if fmt == "xlsx":
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            text = b"".join(z.read(name) for name in z.namelist())
    for secret in (*SECRET_VALUES, "api_key", "password", "Authorization", "refresh_token"):
        assert secret.encode() not in text, secret
    assert b"source" in text  # the nested dict stays, without its secret key


def test_no_key_connection_string_or_row_value_ever_reaches_the_logs(tmp_path: Path) -> None:
    from cli_driver import Cli

    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(home, {**FAKE_ENV, "EXPORT_WORKER_MAX_ATTEMPTS": "2"})
    good = one_turn("conv_log")
    stranger = one_turn("conv_log_stranger")
    stranger["events"][0]["user_id"] = "user_stranger"
    bad_artifact = one_turn("conv_log_bad")
    missing = one_turn("conv_log_missing")
    missing["artifacts"] = {}
    fixture = {
        key: [*good[key], *stranger[key], *bad_artifact[key], *missing[key]]
        for key in ("conversations", "messages", "events")
    }
    fixture["artifacts"] = {**good["artifacts"], **stranger["artifacts"]}
    (home / "fixture.json").write_text(json.dumps(fixture))
    cli.run("dev", "seed", str(home / "fixture.json"))
    # An artifact that is not JSON, whose text holds a row value.
    path = home / "blobs" / "artifacts" / "conv_log_bad" / "turn_conv_log_bad" / "call_0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'{{"result": [{{"note": "{SECRET_ROW_VALUE}", "password": "x"')

    outputs = [cli.run("--log-level", "debug", "run", "--drain")]
    outputs.append(cli.run("dlq", "list"))
    outputs.append(cli.run("dlq", "show", str(cli.json("dlq", "list")[0]["sequence_number"])))
    outputs.append(cli.run("turns", "list", "--conversation", "conv_log"))
    # The Azure backend with those fake credentials fails to connect: one line, no key.
    outputs.append(cli.run("run", "--drain", check=False))
    azure = Cli(home, {**FAKE_ENV, "EXPORT_WORKER_BACKEND": "azure"})
    failed = azure.run("dlq", "list", check=False)
    assert failed.returncode == 1 and len(failed.stderr.decode().strip().splitlines()) == 1
    outputs.append(failed)

    logs = b"\n".join(o.stderr for o in outputs)
    assert b"turn_published" in logs and b"export_not_authorized" in logs
    assert b"message_dead_lettered" in logs
    for secret in (FAKE_BLOB_KEY, FAKE_COSMOS_KEY, FAKE_SB_KEY, "AccountKey", "SharedAccessKey"):
        assert secret.encode() not in logs, secret
    for value in (SECRET_ROW_VALUE, *SECRET_VALUES, "HYPERLINK", "calc"):
        assert value.encode() not in logs, value
