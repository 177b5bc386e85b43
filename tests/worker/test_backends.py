"""Opening the configured backend passes the settings the adapters need."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from worker import backends
from worker.azure import backend as azure_backend
from worker.settings import Settings


def test_the_maximum_lock_renewal_setting_reaches_the_service_bus_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    async def opened(settings: Settings, **options: Any) -> str:
        seen.update(options)
        return "backend"

    monkeypatch.setattr(azure_backend, "open_azure_backend", opened)
    settings = Settings(_env_file=None, backend="azure", max_lock_renewal_seconds=900)  # type: ignore[call-arg]
    assert asyncio.run(backends.open_adapters(settings)) == "backend"
    assert seen == {"max_lock_renewal_seconds": 900}
