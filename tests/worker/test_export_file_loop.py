"""Writing an export never holds the event loop for the whole file: the session lock is
renewed on the loop, and a loop held past the lock's duration loses the turn (a 1M-row
workbook took minutes and was taken back again and again)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbooks import PATH, write_workbook

WAIT_SECONDS = 10.0


def test_the_loop_runs_while_a_workbook_is_written(tmp_path: Path) -> None:
    writing = threading.Event()  # the serialiser has taken the first row
    answered = threading.Event()  # set by a coroutine: only a running loop can
    heard: list[bool] = []

    def rows() -> Iterator[list[Any]]:
        yield [1, "a"]
        writing.set()
        heard.append(answered.wait(WAIT_SECONDS))
        yield [2, "b"]

    async def answer() -> None:
        while not writing.is_set():
            await asyncio.sleep(0)
        answered.set()

    async def main() -> None:
        answering = asyncio.create_task(answer())
        await write_workbook(tmp_path, rows())
        await answering

    asyncio.run(main())
    assert heard == [True]
    assert (tmp_path / PATH).read_bytes()[:2] == b"PK"


class _Recorded:
    """An upload that never awaits (a buffer in memory): the loop runs between its writes
    only if the writer lets it. Each write is noted in the shared `events`."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def write(self, chunk: bytes) -> None:
        self.events.append("chunk")

    async def commit(self) -> None:
        self.events.append("commit")

    async def abort(self) -> None:
        self.events.append("abort")


class _RecordingBlobs:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def upload(self, path: str, info: Any) -> _Recorded:
        return _Recorded(self.events)


def test_the_loop_runs_between_the_chunks_of_a_streamed_export() -> None:
    from handlers.serialisers.csv_file import csv_chunks
    from worker.export_file import write_export
    from worker.ports import BlobInfo

    columns, rows = ["n", "s"], [[n, "x" * 100] for n in range(20_000)]
    chunks = len(list(csv_chunks(columns, rows, bom=True)))
    assert chunks > 3
    events: list[str] = []

    async def tick() -> None:
        while True:
            events.append("tick")
            await asyncio.sleep(0)

    async def main() -> None:
        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        blobs: Any = _RecordingBlobs(events)
        info = BlobInfo(content_type="text/csv", file_name="x.csv", metadata={})
        await write_export(
            blobs, "exports/c/t/x.csv", info, "csv", columns, rows, len(rows),
            max_bytes=1 << 30, csv_bom=True,
        )  # fmt: skip
        ticker.cancel()

    asyncio.run(main())
    written = [event for event in events if event != "tick"]
    assert written == ["chunk"] * chunks + ["commit"]
    between = "".join("c" if event == "chunk" else "t" for event in events if event != "commit")
    assert "cc" not in between  # a tick between every two chunks
