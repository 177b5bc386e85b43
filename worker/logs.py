"""Structured logging, configured in one place: JSON lines when not a TTY, pretty on a TTY.

Logs go to stderr (stdout belongs to `--json` output). Events are past-tense facts with
bound ids (contextvars, merged by the first processor); never row data, never secrets.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

_SECRET_WORDS = ("connection_string", "key", "secret", "password", "token", "credential")


def _drop_secrets(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Belt and braces: a field whose name says secret never reaches the output."""
    for name in list(event):
        if name != "event" and any(w in name.lower() for w in _SECRET_WORDS):
            event[name] = "[redacted]"
    return event


def configure(
    level: str = "info", stream: TextIO | None = None, pretty: bool | None = None
) -> None:
    """Configure structlog for the process."""
    out = stream or sys.stderr
    if pretty is None:
        pretty = out.isatty()
    renderer: Any = (
        structlog.dev.ConsoleRenderer() if pretty else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _drop_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


def get_logger(**bound: Any) -> Any:
    """A logger with `bound` fields; without any, one that follows later configuration.

    Ids that hold for a whole message (session, message, delivery, then the event's
    conversation, turn and event ids) are bound once with structlog's contextvars by the
    runtime and the handler, and reach every line logged meanwhile without being passed.
    """
    logger = structlog.get_logger("export_worker")
    return logger.bind(**bound) if bound else logger
