"""An `export.published` consumer, as a runnable example: wait for the exports of a
conversation to be announced, then download each file the event names
(docs/contract/events.md).

The event says everything a consumer needs: `blob` (`container/name` in the exports
storage account), `file_name` (the name to offer the user), `format`, `row_count`. Its
message id is the export id, so a repeated announcement is recognised by `export_id`.

Locally the topic is the worker's outbox (what `export-worker dev events` lists) and the
blob is a file under the local home, read here through the worker's own adapters; on Azure
the loop is a topic subscription receiver and a blob download (examples/README.md).

    EXPORT_WORKER_HOME=/tmp/demo .venv/bin/python examples/export_consumer.py \\
        --conversation conv_demo --count 1 --out ./downloads
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from worker.backends import open_adapters
from worker.ports import Backend
from worker.settings import Settings
from worker.testing.seeding import seeding

POLL_SECONDS = 0.2


async def download(adapters: Backend, event: dict[str, Any], folder: Path) -> Path:
    """Stream the export's blob to `folder/file_name` (whole, or not at all)."""
    target = folder / Path(event["file_name"]).name  # a name, never a path from the event
    partial = target.with_name(f".{target.name}.part")
    with partial.open("wb") as sink:
        async for chunk in adapters.blobs.read(event["blob"]):
            sink.write(chunk)
    partial.replace(target)
    return target


async def consume(
    settings: Settings, conversation_id: str | None, count: int, folder: Path, timeout: float
) -> list[dict[str, Any]]:
    """Download the first `count` exports announced (of one conversation, when given)."""
    folder.mkdir(parents=True, exist_ok=True)
    done: dict[str, dict[str, Any]] = {}  # by export id: an announcement may come twice
    deadline = time.monotonic() + timeout
    adapters = await open_adapters(settings)
    try:
        outbox = seeding(adapters).events  # locally, the topic's stand-in
        while len(done) < count:
            for event in await outbox.sent():
                if event.get("type") != "export.published" or event["export_id"] in done:
                    continue
                if conversation_id is not None and event["conversation_id"] != conversation_id:
                    continue  # on Azure: a subscription rule, conversation_id = '…'
                path = await download(adapters, event, folder)
                done[event["export_id"]] = {
                    "export_id": event["export_id"],
                    "format": event["format"],
                    "row_count": event["row_count"],
                    "file": str(path),
                    "bytes": path.stat().st_size,
                }
                print(json.dumps(done[event["export_id"]]), flush=True)
            if len(done) < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(done)} of {count} exports within {timeout} s")
                await asyncio.sleep(POLL_SECONDS)
    finally:
        await adapters.close()
    return list(done.values())


def main() -> None:
    """Download announced exports; one JSON line per file on stdout."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversation", default=None, help="only this conversation's exports")
    parser.add_argument("--count", type=int, default=1, help="stop after this many files")
    parser.add_argument("--out", type=Path, default=Path("downloads"))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait in all")
    args = parser.parse_args()
    try:
        asyncio.run(consume(Settings(), args.conversation, args.count, args.out, args.timeout))
    except TimeoutError as exc:
        print(f"export_consumer: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
