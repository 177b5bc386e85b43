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
