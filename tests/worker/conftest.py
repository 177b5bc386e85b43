"""Shared by the worker's tests: logging configured by one test never leaks into the next."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog

from worker import logs


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Each test configures logging on its own stream; leave nothing behind."""
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, logs._RoutedHandler)]:
        root.removeHandler(handler)
    logging.captureWarnings(False)
    structlog.reset_defaults()
