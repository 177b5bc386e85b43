"""Start-up: `export-worker run` imports only what the configured run needs (issue 10's
start-up goal; each of these libraries costs tens of milliseconds and megabytes)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from schemas.records import TurnRecord
from worker.ports import QueueMessage
from worker.serving import BuiltOnFirstMessage
from worker.testing.records import a_turn_record

# Imported when needed only: the endpoint's HTTP server when a port is set, the
# OpenTelemetry SDK when something receives spans, the xlsx writer (and xlsxwriter) and the
# xml writer when writing those formats, the Azure SDKs on the azure backend,
# prometheus-client when /metrics is served, the stored documents' structs when a message
# is handled.
OPTIONAL = (
    "schemas.documents",
    "aiohttp",
    "prometheus_client",
    "opentelemetry.sdk",
    "xlsxwriter",
    "handlers.serialisers.xlsx_file",
    "handlers.serialisers.xml_file",
    "azure.servicebus",
    "azure.cosmos",
)


class FakeHandler:
    """Records the messages it was given; the records it returns are empty."""

    def __init__(self) -> None:
        self.handled: list[QueueMessage] = []

    async def handle(self, message: QueueMessage) -> TurnRecord:
        self.handled.append(message)
        return a_turn_record("conv", "t")


def message(body: bytes) -> QueueMessage:
    """A first delivery of `body`."""
    return QueueMessage(1, "m1", "conv", body, 1, "2026-11-20T09:01:00Z")


_PROBE = textwrap.dedent(
    """
    import json, sys
    from worker.cli import cli
    from worker.operations import Operations
    from worker.settings import Settings
    import worker.local.backend

    Operations.from_settings(Settings(), environ={})
    print(json.dumps(sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[1:])))))
    """
)


def _loaded_after_startup(*prefixes: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EXPORT_WORKER_"))}
    env.pop("APPLICATIONINSIGHTS_CONNECTION_STRING", None)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *prefixes],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_a_local_run_without_port_or_tracing_imports_no_optional_library() -> None:
    assert _loaded_after_startup(*OPTIONAL) == []


_EMPTY_RUN = textwrap.dedent(
    """
    import asyncio, json, sys
    from worker.operations import Operations
    from worker.serving import serve
    from worker.settings import Settings

    settings = Settings(env_file=None, backend="local", home=sys.argv[1])
    stats = asyncio.run(serve(settings, Operations(), drain=True))
    loaded = [m in sys.modules for m in ("handlers.turn", "schemas.documents")]
    print(json.dumps([stats.completed, *loaded]))
    """
)


def test_a_run_that_finds_its_queue_empty_never_imports_the_decision_core(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EXPORT_WORKER_"))}
    done = subprocess.run(
        [sys.executable, "-c", _EMPTY_RUN, str(tmp_path / "home")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.splitlines()[-1]) == [0, False, False]


def test_the_turn_handler_is_built_on_the_first_message_and_only_once() -> None:
    built: list[FakeHandler] = []

    def build() -> FakeHandler:
        built.append(FakeHandler())
        return built[-1]

    handler = BuiltOnFirstMessage(build)
    assert built == []
    first, second = message(b"1"), message(b"2")

    async def both() -> None:
        await asyncio.gather(handler.handle(first), handler.handle(second))

    asyncio.run(both())
    assert len(built) == 1 and built[0].handled == [first, second]


def test_the_probe_sees_what_start_up_does_import() -> None:
    # The same probe finds a library the CLI always needs: it is not blind.
    assert "click" in _loaded_after_startup("click")


_GC = textwrap.dedent(
    """
    import gc, json
    from worker.cli import main

    before = gc.get_threshold()
    try:
        main(["--help"])
    except SystemExit:
        pass
    print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count() > 0]))
    """
)


def test_the_worker_collects_its_young_generation_every_ten_thousand_objects() -> None:
    # A headline turn at the default (700) paid ~0.3 ms of collections; what start-up
    # imported is frozen out of every collection.
    done = subprocess.run([sys.executable, "-c", _GC], capture_output=True, text=True, check=True)
    before, after, frozen = json.loads(done.stdout.splitlines()[-1])
    assert before[0] == 700
    assert after == [10_000, *before[1:]]
    assert frozen
