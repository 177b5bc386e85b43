"""How a CLI command reaches the configured adapters and prints what it found: shared by
the command modules (`worker/cli.py`, `worker/cli_dlq.py`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click

from worker.backends import open_adapters, open_backend
from worker.ports import Backend
from worker.retry_policy import RetryPolicy
from worker.settings import Settings
from worker.testing.seeding import Seeding, seeding
from worker.testing.settings import HarnessSettings

T = TypeVar("T")


class Failure(Exception):
    """A failure to report in one line with exit code 1."""


def with_backend(work: Callable[[Backend, Settings], Awaitable[T]], *, probe: bool = True) -> T:
    """Run `work` on the configured backend (faults injected only when a harness asks).

    `probe=False` for work that calls the queue only (the dead-letter commands): no store
    is reached, so it runs while Cosmos DB or Blob Storage is down."""
    settings = Settings()
    inject = HarnessSettings().fault_injection()  # None unless a harness asks for faults

    async def main() -> T:
        backend = await open_backend(settings, inject=inject, probe=probe)
        try:
            return await work(backend, settings)
        finally:
            await backend.close()

    return asyncio.run(main())


def with_seeding(work: Callable[[Seeding], Awaitable[T]]) -> T:
    """Run `work` on the configured adapters in their test and development roles."""
    settings = Settings()

    async def main() -> T:
        adapters = await open_adapters(settings)
        try:
            return await work(seeding(adapters, RetryPolicy.from_settings(settings)))
        finally:
            await adapters.close()

    return asyncio.run(main())


def print_json(items: list[dict[str, Any]]) -> None:
    """The items as one JSON array on one line."""
    click.echo(json.dumps(items, ensure_ascii=False, indent=None))


def show(items: list[dict[str, Any]], as_json: bool, line: Callable[[dict[str, Any]], str]) -> None:
    """One JSON array with --json, else one line per item."""
    if as_json:
        print_json(items)
        return
    for item in items:
        click.echo(line(item))
