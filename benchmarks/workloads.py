"""The benchmark workloads: seed a worker home, and read back what a run left in it.

Run as its own process by `run_all.py` (so the data is built, and the worker imported, in
a process that is neither the measured one nor its parent). Each mode prints one JSON
object on stdout:

    python benchmarks/workloads.py seed-rows HOME --pages 10 --rows 100000 --format csv
    python benchmarks/workloads.py seed-headline HOME --turns 100 [--start 0]
    python benchmarks/workloads.py seed-reach-back HOME
    python benchmarks/workloads.py seed-wide HOME --groups 4000 --format xlsx
    python benchmarks/workloads.py seed-empty HOME
    python benchmarks/workloads.py outcome HOME
    python benchmarks/workloads.py forget-messages HOME --turns 100 --start 0   # Azure only

Backend: the local one under HOME by default; with `--backend azure` the one the
EXPORT_WORKER_* environment configures (the Service Bus case of `run_all.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import orjson

from worker.local.backend import BLOBS_DIR, open_local_backend
from worker.ports import Backend, NotFound
from worker.sending import enqueue
from worker.testing.seeding import seed, seeding, tool_result

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = ROOT / "tests/fixtures/public/headline.fixture.json"
HEADLINE_EXPECTED = ROOT / "tests/fixtures/public/headline.expected.json"
REQUESTS = {
    "csv": "create a csv",
    "json": "export it as json",
    "xml": "create an xml file",
    "xlsx": "create an xlsx file",
}
START = datetime(2026, 1, 1, tzinfo=UTC)
USER = "user_bench"
ROWS_CONVERSATION = "conv_rows"  # the rows case's conversation (seed_rows)
CREATED = "2026-11-20T09:00:00Z"


# --------------------------------------------------------------------------------------
# Rows: one turn whose parallel calls hold PAGES artifacts of ROWS telemetry rows each
# --------------------------------------------------------------------------------------
def telemetry_page(page: int, rows: int, total: int) -> dict[str, Any]:
    """One page of telemetry as the tool returned it (4 columns); rows unique across pages."""
    first = page * rows
    items = [
        {
            "timestamp": (START + timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "parameter": "BatteryVoltage1",
            "value": round(12.0 + (k % 997) / 1000, 3),
            "unit": "V",
        }
        for k in range(first, first + rows)
    ]
    return {
        "instance_id": "sat-07",
        "page": page + 1,
        "page_size": rows,
        "total": total,
        "items": items,
    }


async def seed_rows(
    backend: Backend, home: Path, pages: int, rows: int, fmt: str
) -> dict[str, Any]:
    """The rows case: 4 messages, PAGES artifacts; the user asks for FMT, the reply has no table."""
    cid, tid = ROWS_CONVERSATION, "turn_rows_1"
    await backend.store.put_conversation({"id": cid, "user_id": USER, "participants": []})
    base = {"conversation_id": cid, "turn_id": tid, "deleted": False, "created_at": CREATED}
    calls, results, paths, largest = [], [], [], 0
    for page in range(pages):
        call_id = f"call_{page:04d}"
        arguments = {
            "instance_id": "sat-07",
            "parameter": "BatteryVoltage1",
            "page": page + 1,
            "page_size": rows,
        }
        result = telemetry_page(page, rows, pages * rows)
        path = f"artifacts/{cid}/{tid}/{call_id}.json"
        artifact = {
            "call_id": call_id,
            "name": "list_parameter_history",
            "arguments": arguments,
            "result": result,
        }
        data = orjson.dumps(artifact)
        largest = max(largest, len(data))
        await backend.blobs.put(path, data)
        calls.append({"id": call_id, "name": "list_parameter_history", "arguments": arguments})
        results.append(tool_result(call_id, "list_parameter_history", result, path))
        paths.append(path)
    text = f"Retrieve the BatteryVoltage1 history for sat-07 and {REQUESTS[fmt]}"
    reply = f"I retrieved {pages * rows} BatteryVoltage1 samples in {pages} pages."
    for message in (
        {"id": "m1", "seq": 1, "role": "user", "content": text},
        {"id": "m2", "seq": 2, "role": "assistant", "content": "", "tool_calls": calls},
        {"id": "m3", "seq": 3, "role": "tool", "results": results},
        {"id": "m4", "seq": 4, "role": "assistant", "content": reply, "tool_calls": []},
    ):
        await backend.store.put_message({**base, **message})
    await _send(backend, _event(cid, tid, "evt_rows_1", "m1", "m4", history_limit=10))
    return {
        "artifacts": [_file(home, p) for p in paths],
        "largest_bytes": largest,
        "rows": pages * rows,
    }


# --------------------------------------------------------------------------------------
# Wide: one turn of GROUPS distinct actions, each with columns of its own (one file)
# --------------------------------------------------------------------------------------
WIDE_CONVERSATION = "conv_wide"


async def seed_wide(backend: Backend, home: Path, groups: int, fmt: str) -> dict[str, Any]:
    """The wide case: one parallel call per instance, each a different action whose 3 rows
    have 3 columns of their own; the user asks for every instance's readings in FMT, so the
    groups are combined into one file as wide as all of them (3 × GROUPS + 1 columns)."""
    cid, tid = WIDE_CONVERSATION, "turn_wide_1"
    await backend.store.put_conversation({"id": cid, "user_id": USER, "participants": []})
    base = {"conversation_id": cid, "turn_id": tid, "deleted": False, "created_at": CREATED}
    calls, results = [], []
    for group in range(groups):
        call_id, name = f"call_{group:05d}", f"read_instance_{group}"
        rows = [
            {f"i{group}_count": n, f"i{group}_value": n * 1.5, f"i{group}_state": f"s{n}"}
            for n in range(3)
        ]
        result = {"items": rows}
        path = f"artifacts/{cid}/{tid}/{call_id}.json"
        artifact = {"call_id": call_id, "name": name, "arguments": {"id": group}, "result": result}
        await backend.blobs.put(path, orjson.dumps(artifact))
        calls.append({"id": call_id, "name": name, "arguments": {"id": group}})
        results.append(tool_result(call_id, name, result, path))
    text = f"Fetch every instance's readings and {REQUESTS[fmt]}"
    for message in (
        {"id": "m1", "seq": 1, "role": "user", "content": text},
        {"id": "m2", "seq": 2, "role": "assistant", "content": "", "tool_calls": calls},
        {"id": "m3", "seq": 3, "role": "tool", "results": results},
        {"id": "m4", "seq": 4, "role": "assistant", "content": "Here they are.", "tool_calls": []},
    ):
        await backend.store.put_message({**base, **message})
    await _send(backend, _event(cid, tid, "evt_wide_1", "m1", "m4", history_limit=10))
    return {"groups": groups, "rows": 3 * groups, "columns": 3 * groups + 1}


# --------------------------------------------------------------------------------------
# Headline turns: the public headline fixture under new ids, one conversation each
# --------------------------------------------------------------------------------------
def headline_copies(count: int, start: int = 0) -> Iterator[tuple[dict[str, Any], list[str]]]:
    """`count` renamed copies of the headline fixture, each with its two winning artifacts,
    made one at a time (a soak's thousands of copies would hold ~0.4 MB each)."""
    text = HEADLINE.read_text(encoding="utf-8")
    (event,) = json.loads(text)["events"]
    expected = json.loads(HEADLINE_EXPECTED.read_text(encoding="utf-8"))
    (turn,) = expected["turns"].values()
    winners = turn["export"]["source_artifacts_include"]
    for n in range(start, start + count):
        renames = [
            (event["conversation_id"], f"conv_hl_{n:05d}"),
            (event["turn_id"], f"turn_hl_{n:05d}"),
            (event["event_id"], f"evt_hl_{n:05d}"),
            ("msg_headline_a_", f"msg_hl_{n:05d}_"),
        ]
        renamed, paths = text, list(winners)
        for old, new in renames:
            renamed = renamed.replace(old, new)
            paths = [p.replace(old, new) for p in paths]
        yield json.loads(renamed), paths


async def seed_headline(backend: Backend, home: Path, turns: int, start: int = 0) -> dict[str, Any]:
    """TURNS headline turns, one conversation (one session) each, queued in order; their
    numbers (in the ids) from START on."""
    seeded = []
    for fixture, winners in headline_copies(turns, start):
        await seed(seeding(backend), fixture)
        (event,) = fixture["events"]
        seeded.append(
            {
                "conversation_id": event["conversation_id"],
                "turn_id": event["turn_id"],
                "artifacts": [_file(home, p) for p in winners],
                "blobs": winners,
            }
        )
    return {"turns": seeded}


async def forget_headline_messages(home: Path, turns: int, start: int) -> dict[str, Any]:
    """Delete the stored messages of headline turns START.. on the Azure backend's Cosmos DB
    (a soak's served waves: cosmosdb-server reads every stored message for each history
    query, so a turn there costs more with each conversation kept)."""
    from azure.cosmos.exceptions import CosmosResourceNotFoundError

    from worker.azure.cosmos import CosmosAccount
    from worker.settings import Settings

    settings = Settings(backend="azure")
    account = CosmosAccount(settings).acquire()
    deleted = 0
    try:
        container = await account.container(settings.messages_container)
        for fixture, _ in headline_copies(turns, start):
            for message in fixture["messages"]:
                with contextlib.suppress(CosmosResourceNotFoundError):
                    await container.delete_item(message["id"], message["conversation_id"])
                    deleted += 1
    finally:
        await account.release()
    return {"deleted": deleted}


# --------------------------------------------------------------------------------------
# Reach-back: 10 earlier turns (40 messages, 21 artifacts), then "create a csv" without calls
# --------------------------------------------------------------------------------------
REACH_BACK_HISTORY_LIMIT = 40


async def seed_reach_back(backend: Backend, home: Path) -> dict[str, Any]:
    """A 40-message window holding 21 artifacts; the newest turn's 2 history pages win."""
    cid = "conv_reach"
    await backend.store.put_conversation({"id": cid, "user_id": USER, "participants": []})
    seq = 0
    artifacts: list[str] = []
    winners: list[str] = []

    async def message(turn: int, role: str, **fields: Any) -> str:
        nonlocal seq
        seq += 1
        await backend.store.put_message(
            {
                "id": f"m{seq:03d}",
                "conversation_id": cid,
                "turn_id": f"t{turn:02d}",
                "seq": seq,
                "role": role,
                "created_at": CREATED,
                "deleted": False,
                **fields,
            }
        )
        return f"m{seq:03d}"

    # Turns 1-9 each call a lookup and one history page (18 artifacts); turn 10, the newest,
    # calls a lookup and two history pages (3 artifacts): its two pages are the winning group.
    for turn in range(1, 11):
        names = ["list_instances", "list_parameter_history"]
        if turn == 10:
            names.append("list_parameter_history")
        calls, results = [], []
        for k, name in enumerate(names):
            call_id = f"call_{turn:02d}_{k}"
            path = f"artifacts/{cid}/t{turn:02d}/{call_id}.json"
            result = (
                telemetry_page(turn * 10 + k, 450, 900)
                if name == "list_parameter_history"
                else {"items": [{"instance_id": "sat-07", "status": "online"}], "count": 1}
            )
            await backend.blobs.put(
                path,
                orjson.dumps({"call_id": call_id, "name": name, "arguments": {}, "result": result}),
            )
            calls.append({"id": call_id, "name": name, "arguments": {}})
            results.append(tool_result(call_id, name, result, path))
            artifacts.append(path)
            if turn == 10 and name == "list_parameter_history":
                winners.append(path)
        await message(turn, "user", content=f"Show the BatteryVoltage1 history of day {turn}")
        await message(turn, "assistant", content="", tool_calls=calls)
        await message(turn, "tool", results=results)
        await message(turn, "assistant", content=f"Day {turn} averaged 12.4 V.", tool_calls=[])
    user = await message(11, "user", content="Now create a csv of that data")
    reply = await message(11, "assistant", content="Creating the csv now.", tool_calls=[])
    event = _event(cid, "t11", "evt_reach", user, reply, history_limit=REACH_BACK_HISTORY_LIMIT)
    await _send(backend, event)
    return {
        "window_messages": seq - 2,
        "artifacts": [_file(home, p) for p in artifacts],
        "winners": [_file(home, p) for p in winners],
    }


async def seed_empty(backend: Backend, home: Path) -> dict[str, Any]:
    """A home whose stores exist (every table created) and whose queue is empty."""
    await backend.queue.is_drained()
    await backend.ledger.list_exports()
    await seeding(backend).events.sent()
    with contextlib.suppress(NotFound):
        await backend.store.get_conversation("none")
    return {}


# --------------------------------------------------------------------------------------
async def outcome(backend: Backend, home: Path) -> dict[str, Any]:
    """Every turn record (decision, export entry), the dead letters and the events sent."""
    records = [r.model_dump() for r in await backend.ledger.list_exports()]
    turns = []
    for record in records:
        export = record["export"]
        turns.append(
            {
                "conversation_id": record["conversation_id"],
                "turn_id": record["turn_id"],
                "decision": record["decision"],
                "export": export,
                "file": _file(home, export["blob"]),
            }
        )
    others = []
    conversations = {t["conversation_id"] for t in turns}
    for cid in ("conv_rows", "conv_reach"):
        if cid not in conversations:
            others += [r.decision for r in await backend.ledger.list_turns(cid)]
    try:
        events_sent: int | None = len(await seeding(backend).events.sent())
    except NotImplementedError:  # a Service Bus topic cannot list what was sent
        events_sent = None
    return {
        "exports": turns,
        "unexported_decisions": others,
        "dead_letters": [d.summary() for d in await backend.queue.dead_letters()],
        "events_sent": events_sent,
    }


def file_sha256(path: str) -> str:
    """The sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------
def _event(
    cid: str, tid: str, eid: str, user: str, reply: str, history_limit: int
) -> dict[str, Any]:
    return {
        "type": "turn.completed",
        "version": 1,
        "event_id": eid,
        "occurred_at": "2026-11-20T09:01:00Z",
        "conversation_id": cid,
        "user_id": USER,
        "turn_id": tid,
        "user_message_id": user,
        "reply_message_id": reply,
        "history_limit": history_limit,
    }


async def _send(backend: Backend, event: dict[str, Any]) -> None:
    await enqueue(backend.queue, json.dumps(event).encode("utf-8"))


def _file(home: Path, blob: str) -> str:
    """Where the local backend keeps a blob (the bare pipeline reads the same files)."""
    return str(Path(home).resolve() / BLOBS_DIR / blob)


async def _with_backend(
    home: Path, azure: bool, work: Callable[[Backend, Path], Awaitable[T]]
) -> T:
    if azure:
        from worker.backends import open_adapters
        from worker.settings import Settings

        backend = await open_adapters(Settings(backend="azure"))
    else:
        backend = open_local_backend(home)
    try:
        return await work(backend, home)
    finally:
        await backend.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "mode",
        choices=(
            "seed-rows",
            "seed-headline",
            "seed-reach-back",
            "seed-wide",
            "seed-empty",
            "outcome",
            "forget-messages",
        ),
    )
    parser.add_argument("home", type=Path)
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--format", default="csv", choices=sorted(REQUESTS))
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--start", type=int, default=0, help="the first headline copy's number")
    parser.add_argument("--groups", type=int, default=4000)
    parser.add_argument("--backend", choices=("local", "azure"), default="local")
    args = parser.parse_args(argv)
    works: dict[str, Callable[[Backend, Path], Awaitable[dict[str, Any]]]] = {
        "seed-rows": lambda b, h: seed_rows(b, h, args.pages, args.rows, args.format),
        "seed-headline": lambda b, h: seed_headline(b, h, args.turns, args.start),
        "seed-reach-back": seed_reach_back,
        "seed-wide": lambda b, h: seed_wide(b, h, args.groups, args.format),
        "seed-empty": seed_empty,
        "outcome": outcome,
    }
    if args.mode == "forget-messages":
        answer = asyncio.run(forget_headline_messages(args.home, args.turns, args.start))
    else:
        answer = asyncio.run(_with_backend(args.home, args.backend == "azure", works[args.mode]))
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
