"""Opening the configured backend: local (SQLite and files) or Azure."""

from __future__ import annotations

from worker.ports import Backend
from worker.settings import Settings


async def open_backend(settings: Settings) -> Backend:
    """The adapters the settings name, opened."""
    if settings.backend == "azure":
        from worker.azure.backend import open_azure_backend

        return await open_azure_backend(settings)
    from worker.local.backend import open_local_backend

    return open_local_backend(settings.home, lock_duration=settings.lock_duration_seconds)
