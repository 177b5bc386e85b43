"""Opt-in crash and slow points for the reliability harnesses: off, and free, unless configured.

`EXPORT_WORKER_CRASH_POINTS="after_blob:0.2,after_record:0.2"` makes `crashpoint(name)` end the
process with `os._exit(137)` (no cleanup, no flush: a SIGKILL at that exact step) with that
probability each time the point is passed; `EXPORT_WORKER_CRASH_SEED` seeds the draws.
`EXPORT_WORKER_SLOW_POINTS="during_blob:2.5"` makes `await slowpoint(name)` wait that many
seconds there (lock renewal and shutdown tests). Only this module reads these variables.

The points, in the order a published turn passes them (SPEC section 9):
`during_blob` (after each chunk is staged, before commit), `after_blob` (committed, no record
yet), `after_record` (record written, event not sent), `after_publish` (event sent,
`event_sent` not yet true), `after_event_sent` (all done, the queue message not completed).
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping

POINTS = ("during_blob", "after_blob", "after_record", "after_publish", "after_event_sent")
CRASH_ENV = "EXPORT_WORKER_CRASH_POINTS"
SEED_ENV = "EXPORT_WORKER_CRASH_SEED"
SLOW_ENV = "EXPORT_WORKER_SLOW_POINTS"
EXIT_CODE = 137  # what a shell reports for a SIGKILLed process

_crash: dict[str, float] = {}
_slow: dict[str, float] = {}
_draws = random.Random()


def load(environ: Mapping[str, str]) -> None:
    """Read the crash and slow points from `environ` (done once at import from os.environ)."""
    global _crash, _slow, _draws
    _crash = _parse(environ.get(CRASH_ENV, ""), CRASH_ENV)
    _slow = _parse(environ.get(SLOW_ENV, ""), SLOW_ENV)
    seed = environ.get(SEED_ENV)
    _draws = random.Random(int(seed) if seed else None)


def crashpoint(name: str) -> None:
    """Exit at once, without cleanup, with the configured probability for `name`."""
    if not _crash:
        return
    rate = _crash.get(name, 0.0)
    if rate > 0 and _draws.random() < rate:
        # os.write: unbuffered, so the harness sees which point fired even though nothing
        # else is flushed.
        os.write(2, f"export-worker: crash point {name} fired\n".encode())
        os._exit(EXIT_CODE)


async def slowpoint(name: str) -> None:
    """Wait the configured seconds at `name` (the event loop keeps running meanwhile)."""
    if not _slow:
        return
    seconds = _slow.get(name, 0.0)
    if seconds > 0:
        await asyncio.sleep(seconds)


def _parse(text: str, variable: str) -> dict[str, float]:
    points: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, _, value = item.partition(":")
        name = name.strip()
        if name not in POINTS:
            raise ValueError(f"{variable}: unknown point {name!r} (known: {', '.join(POINTS)})")
        try:
            points[name] = float(value)
        except ValueError:
            raise ValueError(f"{variable}: {item.strip()!r} is not NAME:NUMBER") from None
    return points


load(os.environ)
