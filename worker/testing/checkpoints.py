"""Crash and slow points: a `Checkpoint` (`worker/checkpoints.py`) that kills or waits.

`crash` maps a point to a probability: passing it ends the process with `os._exit(137)`
(no cleanup, no flush: a SIGKILL at that exact step) with that probability each time,
drawn from `seed`. `slow` maps a point to seconds to wait there (the event loop keeps
running, so lock renewal and shutdown are exercised). The CLI builds one from
`HarnessSettings` (`worker/testing/settings.py`); production code never reads these knobs.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping

from worker.checkpoints import CHECKPOINTS, CheckpointName

EXIT_CODE = 137  # what a shell reports for a SIGKILLed process


class CrashAndSlowPoints:
    """Kills the process, or waits, at the configured points."""

    def __init__(
        self,
        crash: Mapping[CheckpointName, float],
        slow: Mapping[CheckpointName, float],
        seed: int | None = None,
    ) -> None:
        self._crash = dict(crash)
        self._slow = dict(slow)
        self._draws = random.Random(seed)

    async def __call__(self, name: CheckpointName) -> None:
        """Pass the point `name`: exit at once with its crash odds, else wait its seconds."""
        rate = self._crash.get(name, 0.0)
        if rate > 0 and self._draws.random() < rate:
            # os.write: unbuffered, so the harness sees which point fired even though nothing
            # else is flushed.
            os.write(2, f"export-worker: crash point {name} fired\n".encode())
            os._exit(EXIT_CODE)
        seconds = self._slow.get(name, 0.0)
        if seconds > 0:
            await asyncio.sleep(seconds)


def parse_points(text: str, variable: str) -> dict[CheckpointName, float]:
    """`name:number,…` as a mapping; ValueError naming `variable` for an unknown point or a
    value that is not a number, so a typo fails loudly instead of testing nothing."""
    points: dict[CheckpointName, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, _, value = item.partition(":")
        point = _point(name.strip(), variable)
        try:
            points[point] = float(value)
        except ValueError:
            raise ValueError(f"{variable}: {item.strip()!r} is not NAME:NUMBER") from None
    return points


def _point(name: str, variable: str) -> CheckpointName:
    for point in CHECKPOINTS:
        if point == name:
            return point
    raise ValueError(f"{variable}: unknown point {name!r} (known: {', '.join(CHECKPOINTS)})")
