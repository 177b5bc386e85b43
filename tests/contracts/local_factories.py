"""Factories of the local adapters for the contract suites (see conftest.py for the shape)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from worker.local.blobs import LocalBlobs
from worker.local.outbox import LocalOutbox
from worker.local.queue import LocalQueue
from worker.local.store import LocalConversationStore, LocalLedger


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_750_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds


class _Factory:
    """Hands out fresh adapters, each on its own file or folder under `tmp_path`."""

    name = "local"
    # Real seconds to wait for something that is there / must not arrive. SQLite answers
    # at once, so the local adapters never wait.
    wait = 0.0
    empty_wait = 0.0

    def __init__(self, tmp_path: Path) -> None:
        self._tmp_path = tmp_path
        self._counter = itertools.count()

    def _fresh(self, stem: str) -> Path:
        return self._tmp_path / f"{stem}-{next(self._counter)}"


class LocalQueueFactory(_Factory):
    """LocalQueue on a fake clock (`clock.advance` expires locks and schedules)."""

    lock_duration = 30.0

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(tmp_path)
        self.clock: FakeClock | None = FakeClock()

    @asynccontextmanager
    async def open(self) -> AsyncIterator[LocalQueue]:
        """A fresh, empty queue."""
        assert self.clock is not None
        queue = LocalQueue(
            self._fresh("queue").with_suffix(".db"),
            lock_duration=self.lock_duration,
            clock=self.clock,
        )
        try:
            yield queue
        finally:
            await queue.close()


class LocalStoreFactory(_Factory):
    """LocalConversationStore on a fresh database."""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[LocalConversationStore]:
        """A fresh, empty store."""
        store = LocalConversationStore(self._fresh("store").with_suffix(".db"))
        try:
            yield store
        finally:
            await store.close()


class LocalLedgerFactory(_Factory):
    """LocalLedger on a fresh database."""

    @asynccontextmanager
    async def open(self) -> AsyncIterator[LocalLedger]:
        """A fresh, empty ledger."""
        ledger = LocalLedger(self._fresh("ledger").with_suffix(".db"))
        try:
            yield ledger
        finally:
            await ledger.close()


class LocalBlobsFactory(_Factory):
    """LocalBlobs on a fresh folder."""

    xattrs = True  # each blob's info on its file where the filesystem allows

    @asynccontextmanager
    async def open(self) -> AsyncIterator[LocalBlobs]:
        """Fresh, empty blob storage."""
        blobs = LocalBlobs(self._fresh("blobs"), xattrs=self.xattrs)
        try:
            yield blobs
        finally:
            await blobs.close()


class LocalPublisherFactory(_Factory):
    """LocalOutbox on a fresh database."""

    @staticmethod
    async def published(publisher: LocalOutbox) -> list[dict[str, Any]]:
        """What the outbox holds: what the chat service would read."""
        return await publisher.sent()

    @asynccontextmanager
    async def open(self) -> AsyncIterator[LocalOutbox]:
        """A fresh, empty outbox."""
        outbox = LocalOutbox(self._fresh("outbox").with_suffix(".db"))
        try:
            yield outbox
        finally:
            await outbox.close()


def queue_factory(tmp_path: Path) -> LocalQueueFactory:
    """The local queue factory."""
    return LocalQueueFactory(tmp_path)


def store_factory(tmp_path: Path) -> LocalStoreFactory:
    """The local conversation store factory."""
    return LocalStoreFactory(tmp_path)


def ledger_factory(tmp_path: Path) -> LocalLedgerFactory:
    """The local ledger factory."""
    return LocalLedgerFactory(tmp_path)


def blobs_factory(tmp_path: Path) -> LocalBlobsFactory:
    """The local blobs factory."""
    return LocalBlobsFactory(tmp_path)


class SidecarBlobsFactory(LocalBlobsFactory):
    """LocalBlobs keeping every blob's info in a sidecar file."""

    name = "local-sidecars"
    xattrs = False


def sidecar_blobs_factory(tmp_path: Path) -> SidecarBlobsFactory:
    """The local blobs factory, info in sidecars."""
    return SidecarBlobsFactory(tmp_path)


def publisher_factory(tmp_path: Path) -> LocalPublisherFactory:
    """The local publisher factory."""
    return LocalPublisherFactory(tmp_path)
