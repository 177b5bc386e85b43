"""Named points of the publish sequence, where a test may stop or slow the worker.

The handler passes each point in the order a published turn reaches it (docs/contract/delivery.md):
`during_blob` (after each chunk is staged, before commit), `after_blob` (committed, no record
yet), `after_record` (record written, event not sent), `after_publish` (event sent,
`event_sent` not yet true), `after_event_sent` (all done, the queue message not completed).
What happens at a point is the `Checkpoint` the caller passes in, like a clock: the worker
passes `no_checkpoint`; the reliability harnesses pass crash and slow points
(`worker/testing/checkpoints.py`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, get_args

CheckpointName = Literal[
    "during_blob", "after_blob", "after_record", "after_publish", "after_event_sent"
]
CHECKPOINTS: tuple[CheckpointName, ...] = get_args(CheckpointName)

Checkpoint = Callable[[CheckpointName], Awaitable[None]]


async def no_checkpoint(name: CheckpointName) -> None:
    """Pass the point: nothing happens there outside a test."""
