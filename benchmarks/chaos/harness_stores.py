"""Where the crash harness reads what the workers left: the local home (SQLite and files),
or the whole Azure backend on the stand-ins (tests/emulated/azure_environment.py: Service
Bus on the test broker, run inside the harness's own process so it outlives every killed
worker; Blob on Azurite; Cosmos on cosmosdb-server, started by scripts/test-emulated).

Both answer the same questions: the settings every CLI process gets, whether the queue
is drained, the turn records, the export files (`exports/...` path → bytes), the events
published, and staged uploads left behind (Azure keeps an aborted upload's blocks
uncommitted, out of sight: there is nothing to look at there).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

Cli = Callable[..., bytes]


class Stores(Protocol):
    """What the harness asks of a backend's stores."""

    def settings(self) -> dict[str, str]:
        """EXPORT_WORKER_ variables naming the backend, for every CLI process."""
        ...

    def drained(self) -> bool:
        """No message queued or locked (dead letters aside)."""
        ...

    def records(self, conversations: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Each conversation's turn records, as JSON."""
        ...

    def files(self, conversations: list[str]) -> dict[str, bytes]:
        """Every file under the conversations' export folders."""
        ...

    def events(self, cli: Cli) -> list[dict[str, Any]]:
        """The export.published bodies sent."""
        ...

    def staged(self) -> list[str]:
        """Staged uploads left behind."""
        ...


class LocalStores:
    """The local backend in one home folder."""

    def __init__(self, home: Path) -> None:
        self._home = home

    def settings(self) -> dict[str, str]:
        """The local backend in the harness's home."""
        return {"EXPORT_WORKER_HOME": str(self._home), "EXPORT_WORKER_BACKEND": "local"}

    def drained(self) -> bool:
        """No active row in the queue table (before any worker ran, nothing is there yet)."""
        with contextlib.closing(sqlite3.connect(self._home / "worker.db", timeout=30)) as db:
            row = db.execute("SELECT COUNT(*) FROM queue_messages WHERE state = 'active'")
            return int(row.fetchone()[0]) == 0

    def records(self, conversations: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Read through the local ledger adapter."""
        from worker.local.backend import open_local_backend

        async def read() -> dict[str, list[dict[str, Any]]]:
            backend = open_local_backend(self._home)
            try:
                return {
                    cid: [r.model_dump() for r in await backend.ledger.list_turns(cid)]
                    for cid in conversations
                }
            finally:
                await backend.close()

        return asyncio.run(read())

    def files(self, conversations: list[str]) -> dict[str, bytes]:
        """Every file under `blobs/exports/<conversation>/`."""
        root = self._home / "blobs"
        found = {}
        for cid in conversations:
            folder = root / "exports" / cid
            if folder.exists():
                for path in folder.rglob("*"):
                    if path.is_file():
                        found[path.relative_to(root).as_posix()] = path.read_bytes()
        return found

    def events(self, cli: Cli) -> list[dict[str, Any]]:
        """The local outbox, through `dev events`."""
        value: list[dict[str, Any]] = json.loads(cli("dev", "events", "--json"))
        return value

    def staged(self) -> list[str]:
        """Part files in `blobs/.staging`."""
        staging = self._home / "blobs" / ".staging"
        return [p.name for p in staging.iterdir()] if staging.exists() else []


class AzureStores:
    """The Azure backend on the stand-ins, one environment for the whole run."""

    def __init__(self, environment: Any) -> None:
        self._env = environment

    def settings(self) -> dict[str, str]:
        """The environment's settings (BACKEND=azure)."""
        return dict(self._env.values)

    def drained(self) -> bool:
        """The broker's own count of active messages."""
        return bool(self._env.active_messages() == 0)

    def records(self, conversations: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Read through the Cosmos ledger adapter."""
        from worker.azure.cosmos import AzureLedger, CosmosAccount

        async def read() -> dict[str, list[dict[str, Any]]]:
            settings = self._env.settings()
            ledger = AzureLedger(settings, account=CosmosAccount(settings))
            try:
                return {
                    cid: [r.model_dump() for r in await ledger.list_turns(cid)]
                    for cid in conversations
                }
            finally:
                await ledger.close()

        return asyncio.run(read())

    def files(self, conversations: list[str]) -> dict[str, bytes]:
        """Every blob under the conversations' export folders on Azurite."""
        found: dict[str, bytes] = asyncio.run(self._env.export_blobs(conversations))
        return found

    def events(self, cli: Cli) -> list[dict[str, Any]]:
        """What the topic's subscription got (the broker's duplicate detection drops a
        re-publish with the same export id, as Service Bus does in production)."""
        found: list[dict[str, Any]] = asyncio.run(self._env.events())
        return found

    def staged(self) -> list[str]:
        """Nothing to see: uncommitted blocks are not listed."""
        return []

    def prepare(self, conversations: list[str]) -> None:
        """Delete blobs an earlier run left under these conversations."""
        asyncio.run(self._env.clear_blobs(conversations))

    def drop(self) -> None:
        """Delete the run's Cosmos database."""
        asyncio.run(self._env.drop_database())


@contextlib.contextmanager
def azure_stores(lock_seconds: float) -> Iterator[AzureStores]:
    """A fresh Azure environment for one harness run (a broker living as long as it)."""
    from tests.emulated.azure_environment import azure_environment, emulators_missing

    reason = emulators_missing()
    if reason is not None:
        raise SystemExit(f"--backend azure: {reason}")
    # The broker's max delivery count stays out of the way: kills expire locks, and a
    # message moved to its dead-letter queue for that would count as lost.
    with azure_environment(lock_duration=lock_seconds, max_delivery_count=10_000) as env:
        yield AzureStores(env)


def run_cli(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> bytes:
    """Run one CLI command; its stdout, or RuntimeError with the end of its stderr."""
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[-3:])} exited {proc.returncode}: "
            f"{proc.stderr.decode(errors='replace')[-1500:]}"
        )
    return proc.stdout
