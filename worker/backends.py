"""Opening the configured backend: local (SQLite and files) or Azure.

Every port call of the backend returned is tried again in place on a transient error
(`worker/call_retries.py`, by the one retry policy). With `fault_rate` > 0 the adapters are
first wrapped in fault injection (`worker/faults.py`), for reliability tests.
"""

from __future__ import annotations

from worker.call_retries import with_call_retries
from worker.logs import get_logger
from worker.ports import Backend
from worker.retry_policy import RetryPolicy
from worker.settings import Settings


async def open_backend(settings: Settings) -> Backend:
    """The adapters the settings name, opened."""
    backend = await _adapters(settings)
    if settings.fault_rate > 0:
        from worker.faults import FaultPlan, with_faults

        get_logger().warning(
            "fault_injection_enabled",
            fault_rate=settings.fault_rate,
            fault_seed=settings.fault_seed,
            detail="every port call may fail with a transient error: for tests only",
        )
        backend = with_faults(backend, FaultPlan(settings.fault_rate, settings.fault_seed))
    return with_call_retries(backend, RetryPolicy.from_settings(settings))


async def _adapters(settings: Settings) -> Backend:
    if settings.backend == "azure":
        from worker.azure.backend import open_azure_backend

        return await open_azure_backend(settings)
    from worker.local.backend import open_local_backend

    return open_local_backend(settings.home, lock_duration=settings.lock_duration_seconds)
