"""Contract suites: one per port, each test run against every adapter of that port.

Each fixture (`queue_factory`, `store_factory`, `ledger_factory`, `blobs_factory`,
`publisher_factory`) is parametrised with ids `local` and `azure` and yields a factory
(`blobs_factory` also with `local-sidecars`: the local blobs keeping every blob's info in a
sidecar file, as on a filesystem without extended attributes):

    factory.name: str                      # "local" | "azure"
    factory.open()                         # async context manager -> a fresh, isolated adapter
    factory.wait: float                    # max_wait for a receive/accept that must succeed
    factory.empty_wait: float              # max_wait for one that must come back empty
    queue:     factory.clock               # object with advance(seconds), or None when time
                                           #   cannot be faked (time-dependent tests skip)
               factory.lock_duration: float  # the queue's lock duration (with a clock)
    publisher: factory.published           # async (publisher) -> the JSON bodies its consumers
                                           #   got, oldest first, or None when nothing can tell

Tests drive adapters only through the port Protocols (worker/ports/) plus those
capabilities, so the same suite pins Cosmos, Blob Storage and Service Bus.

The local factories come from `local_factories.py`. The Azure ones come from
`azure_factories.py` (maintained with the Azure adapters): its `queue_factory()`,
`store_factory()`, ... return factories of the shape above, and `available(port)` returns
None or the reason to skip. When that module is missing, the Azure params skip.
Capabilities an Azure factory leaves out take the defaults below.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import local_factories
import pytest

ADAPTERS = ["local", "azure"]

_CAPABILITY_DEFAULTS: dict[str, Any] = {
    "wait": 5.0,
    "empty_wait": 1.0,
    "clock": None,
    "lock_duration": 60.0,
    "published": None,
}


def _azure_module() -> ModuleType | str:
    """The azure_factories module, or why it cannot be used."""
    try:
        return importlib.import_module("azure_factories")
    except ModuleNotFoundError as exc:
        if exc.name != "azure_factories":
            raise
        return "tests/contracts/azure_factories.py is not there"


def _factory(port: str, adapter: str, tmp_path: Path) -> Any:
    if adapter == "local":
        return getattr(local_factories, f"{port}_factory")(tmp_path)
    if adapter == "local-sidecars":
        return local_factories.sidecar_blobs_factory(tmp_path)
    module = _azure_module()
    if isinstance(module, str):
        pytest.skip(module)
    reason = module.available(port)
    if reason is not None:
        pytest.skip(reason)
    factory = getattr(module, f"{port}_factory")()
    if not hasattr(factory, "name"):
        factory.name = adapter
    for capability, default in _CAPABILITY_DEFAULTS.items():
        if not hasattr(factory, capability):
            setattr(factory, capability, default)
    return factory


@pytest.fixture(params=ADAPTERS)
def queue_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens fresh queues of each adapter."""
    return _factory("queue", request.param, tmp_path)


@pytest.fixture(params=ADAPTERS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens fresh conversation stores of each adapter."""
    return _factory("store", request.param, tmp_path)


@pytest.fixture(params=ADAPTERS)
def ledger_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens fresh ledgers of each adapter."""
    return _factory("ledger", request.param, tmp_path)


@pytest.fixture(params=["local", "local-sidecars", "azure"])
def blobs_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens fresh blob stores of each adapter."""
    return _factory("blobs", request.param, tmp_path)


@pytest.fixture(params=ADAPTERS)
def publisher_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens fresh publishers of each adapter."""
    return _factory("publisher", request.param, tmp_path)
