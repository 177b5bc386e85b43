"""Case az's machinery without the stand-ins: the HTTP hook the measured worker runs under,
the naming of Blob and Cosmos calls, the per-turn arithmetic, and what run_all reads back
and prints. (The case itself runs in benchmarks/run_all.py and in
tests/emulated/test_azure_turns_emulated.py.)"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from aiohttp import web
from azure.core.pipeline import AsyncPipeline
from azure.core.pipeline.transport import AioHttpTransport, HttpRequest

from tests.benchmarks.script_runs import benchmark_module
from worker.testing.http_calls import install

BLOB = "127.0.0.1:10000"
COSMOS = "127.0.0.1:8081"


def azure_turns() -> ModuleType:
    """The benchmark's modules, imported as run_all imports them (from benchmarks/)."""
    module = ModuleType("az")
    for name in ("azure_counts", "azure_report", "azure_turns"):
        module.__dict__.update(vars(benchmark_module(name)))
    return module


def call(host: str, method: str, path: str, query: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "host": host,
        "method": method,
        "path": path,
        "query": query,
        "headers": extra.pop("headers", {}),
        "status": extra.pop("status", 200),
        "sent": extra.pop("sent", 0),
        "received": extra.pop("received", 0),
        "charge": extra.pop("charge", None),
    }


def test_http_hook_records_method_address_sizes_and_charge_of_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest puts the transport's own send back afterwards.
    monkeypatch.setattr(AioHttpTransport, "send", AioHttpTransport.send)

    async def answer(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(body=b"r" * (len(body) + 7), headers={"x-ms-request-charge": "2.5"})

    async def scenario() -> tuple[list[dict[str, Any]], bytes]:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        calls = install(tmp_path / "calls.json")
        try:
            async with AsyncPipeline(AioHttpTransport()) as pipeline:
                request = HttpRequest(
                    "POST",
                    f"http://127.0.0.1:{port}/dbs/d/colls/turns/docs?x=1",
                    headers={"x-ms-documentdb-isquery": "true", "Authorization": "secret"},
                    data=b"q" * 10,
                )
                response = await pipeline.run(request)
                body = response.http_response.body()
        finally:
            await runner.cleanup()
        return calls, body

    calls, body = asyncio.run(scenario())
    assert body == b"r" * 17  # the worker's answer is untouched
    (recorded,) = calls
    assert recorded["method"] == "POST"
    assert recorded["path"] == "/dbs/d/colls/turns/docs"
    assert recorded["query"] == "x=1"
    assert recorded["headers"] == {"x-ms-documentdb-isquery": "true"}  # never credentials
    assert (recorded["sent"], recorded["received"]) == (10, 17)
    assert recorded["charge"] == "2.5"
    assert recorded["status"] == 200


def test_calls_are_named_by_service_and_operation() -> None:
    named = azure_turns().http_operation
    dbs = "/dbs/db1/colls"
    cases = {
        ("GET", "/devstoreaccount1/artifacts/c/t/a.json", ""): ("Blob", "read blob"),
        ("PUT", "/devstoreaccount1/exports/c/e.csv", "comp=block&blockid=x"): (
            "Blob",
            "stage block",
        ),
        ("PUT", "/devstoreaccount1/exports/c/e.csv", "comp=blocklist"): (
            "Blob",
            "commit block list",
        ),
        ("PUT", "/devstoreaccount1/exports", "restype=container"): ("Blob", "create container"),
    }
    for (method, path, query), expected in cases.items():
        assert named(call(BLOB, method, path, query), BLOB) == expected
    query = {"x-ms-documentdb-isquery": "True"}
    assert named(call(COSMOS, "POST", f"{dbs}/messages/docs", headers=query), BLOB) == (
        "Cosmos",
        "query messages",
    )
    assert named(call(COSMOS, "POST", f"{dbs}/turns/docs/"), BLOB) == ("Cosmos", "create turns")
    assert named(call(COSMOS, "PUT", f"{dbs}/turns/docs/t1/"), BLOB) == ("Cosmos", "replace turns")
    assert named(call(COSMOS, "GET", f"{dbs}/turns/docs/t1", status=404), BLOB) == (
        "Cosmos",
        "point read turns → 404",
    )
    assert named(call(COSMOS, "GET", f"{dbs}/turns/"), BLOB) == ("Cosmos", "read container")
    assert named(call(COSMOS, "GET", "/"), BLOB) == ("Cosmos", "read account")


def test_per_turn_figures_are_the_turns_run_minus_the_empty_run_over_the_turns() -> None:
    module = azure_turns()
    run = [call(BLOB, "GET", "/a/artifacts/x", received=1000)] * 8 + [call(COSMOS, "GET", "/")]
    empty = [call(COSMOS, "GET", "/")]
    figures = module.per_turn(module.http_totals(run, BLOB), module.http_totals(empty, BLOB), 4)
    assert figures == {"Blob": {"read blob": {"count": 2.0, "received": 2000.0, "sent": 0.0}}}

    before = {"connection": {"count": 1, "bytes": 0}}
    after = {"connection": {"count": 5, "bytes": 0}, "send q": {"count": 4, "bytes": 400}}
    assert module.tally_between(before, after) == {
        "connection": Counter(count=4, bytes=0),
        "send q": Counter(count=4, bytes=400),
    }


def test_run_all_reads_back_the_az_run_and_prints_its_row_and_operations() -> None:
    module = azure_turns()
    run = module.AzureRun(
        None,
        10,
        module.Measured(3.0, 2.0, 100.0),
        module.Measured(1.0, 1.0, 90.0),
        {
            "Service Bus": {
                "deliver turn-completed": {"count": 1.0, "bytes": 533.0},
                "send export-published": {"count": 1.0, "bytes": 660.0},
            },
            "Blob": {"read blob": {"count": 2.0, "sent": 0.0, "received": 90872.0}},
        },
        ("10 turn records `published`",),
    )
    line = "noise from a library\n" + __import__("json").dumps(run.to_json()) + "\n"
    parsed = module.parse_output(line)
    assert parsed == run
    assert parsed.ms() == pytest.approx(200.0)
    what, ours, limit, ratio = module.summary_cells(parsed, 50.0)
    assert what.startswith("10 headline turns on the Azure backend")
    assert (ours, limit, ratio) == ("200.0 ms", "local 50.0 ms (case d)", "4.0x")
    section = "\n".join(module.operations_section(parsed))
    assert "| Blob | read blob | 2 | 0 | 90,872 |" in section
    assert "| Service Bus | deliver turn-completed | 1 | 0 | 533 |" in section
    assert "| Service Bus | send export-published | 1 | 660 | 0 |" in section
    assert "- 10 turn records `published`" in section


def test_an_az_run_that_could_not_start_says_why_and_shows_no_figure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module = azure_turns()
    monkeypatch.setenv("EXPORT_WORKER_SKIP_EMULATED", "1")
    run = module.measure(5, tmp_path, with_local=False)
    assert run.skipped == "not run: EXPORT_WORKER_SKIP_EMULATED=1"
    _, ours, limit, ratio = module.summary_cells(run, 50.0)
    assert (ours, limit, ratio) == (run.skipped, "—", "—")
    assert module.parse_output("").skipped is not None
