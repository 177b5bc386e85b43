"""Opening the configured backend: local (SQLite and files) or Azure.

`open_backend` gives the worker's ports with every repeatable call tried again in place on
a transient error (`worker/call_retries.py`, by the one retry policy). `inject` wraps the
adapters first, before the retries: the reliability harnesses pass fault injection
(`worker/testing/`). `open_adapters` gives the adapters as they are, for roles other than
the worker's (seeding, `worker/testing/seeding.py`).
"""

from __future__ import annotations

from collections.abc import Callable

from worker.call_retries import with_call_retries
from worker.ports import Backend
from worker.retry_policy import RetryPolicy
from worker.settings import Settings


async def open_backend(
    settings: Settings,
    *,
    inject: Callable[[Backend], Backend] | None = None,
    probe: bool = True,
) -> Backend:
    """The adapters the settings name, opened, as the worker's ports; `probe`: whether
    the stores are reached now (see `open_adapters`)."""
    backend = await open_adapters(settings, probe=probe)
    if inject is not None:
        backend = inject(backend)
    return with_call_retries(backend, RetryPolicy.from_settings(settings))


async def open_adapters(settings: Settings, *, probe: bool = True) -> Backend:
    """The adapters the settings name, opened and unwrapped. With `probe`, Azure's stores
    are reached at once (bad settings fail here); without, only when a call needs them."""
    if settings.backend == "azure":
        from worker.azure.backend import open_azure_backend

        return await open_azure_backend(settings, probe=probe)
    from worker.local.backend import open_local_backend

    return open_local_backend(settings.home, lock_duration=settings.lock_duration_seconds)
