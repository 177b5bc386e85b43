"""Structured logging, configured in one place: JSON lines when not a TTY, pretty on a TTY.

Logs go to stderr (stdout belongs to `--json` output). Events are past-tense facts with
bound ids (contextvars, merged by the first processor); never row data, never secrets. An
exception is logged as its type, where it was raised and the frames it passed (file, line,
function), never its message, args or locals: an exception's text may quote the rows it
choked on. Records of the standard library's `logging` (the Azure SDKs, asyncio, warnings)
go through the same renderer, so one JSON query sees everything the process said.
"""

from __future__ import annotations

import logging
import os
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

import structlog
from structlog.typing import EventDict, WrappedLogger

if TYPE_CHECKING:
    from worker.settings import Settings

_SECRET_WORDS = ("connection_string", "key", "secret", "password", "token", "credential")
# Bounds on what one exception may add to a line.
MAX_FRAMES = 30
MAX_CAUSES = 5
MAX_FOREIGN_MESSAGE = 500
# The Azure SDKs log every HTTP request and AMQP frame at info: warnings and up only.
QUIET_LOGGERS = ("azure", "urllib3", "msal")

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _drop_secrets(_: WrappedLogger, __: str, event: EventDict) -> EventDict:
    """Belt and braces: a field whose name says secret never reaches the output."""
    for name in list(event):
        if name != "event" and any(w in name.lower() for w in _SECRET_WORDS):
            event[name] = "[redacted]"
    return event


# --------------------------------------------------------------------------------------
# Exceptions: type, location and frames only
# --------------------------------------------------------------------------------------
def _exc_info(value: Any) -> ExcInfo | None:
    """The (type, exception, traceback) a log call's `exc_info` stands for, if any."""
    if isinstance(value, BaseException):
        return type(value), value, value.__traceback__
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[1], BaseException):
        return value
    if value is True:
        current = sys.exc_info()
        if current[1] is not None:
            return current
    return None


def _short_path(filename: str) -> str:
    """A frame's file relative to the import root it came from (site-packages, the repo)."""
    roots = sorted((p for p in sys.path if p), key=len, reverse=True)
    for root in roots:
        prefix = root.rstrip(os.sep) + os.sep
        if filename.startswith(prefix):
            return filename[len(prefix) :]
    return filename


def _type_name(exc_type: type[BaseException]) -> str:
    module = exc_type.__module__
    name = exc_type.__qualname__
    return name if module in ("builtins", "__main__") else f"{module}.{name}"


def _frames(tb: TracebackType | None) -> list[dict[str, Any]]:
    frames = []
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append(
            {"file": _short_path(code.co_filename), "line": tb.tb_lineno, "function": code.co_name}
        )
        tb = tb.tb_next
    return frames[-MAX_FRAMES:]


def _where(frames: list[dict[str, Any]]) -> str:
    if not frames:
        return ""
    last = frames[-1]
    return f"{last['file']}:{last['line']}"


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """The loggable facts of an exception: type, where it was raised, its frames, and the
    types and locations of its causes; no message, no args, no locals."""
    frames = _frames(exc.__traceback__)
    described: dict[str, Any] = {"type": _type_name(type(exc)), "at": _where(frames)}
    described["frames"] = frames
    causes: list[dict[str, str]] = []
    seen = {id(exc)}
    link = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while link is not None and id(link) not in seen and len(causes) < MAX_CAUSES:
        seen.add(id(link))
        causes.append({"type": _type_name(type(link)), "at": _where(_frames(link.__traceback__))})
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    if causes:
        described["causes"] = causes
    return described


def render_exception(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Processor: `exc_info` becomes a structured `exception` field (see the module doc)."""
    info = _exc_info(event.pop("exc_info", None))
    event.pop("stack_info", None)
    if info is not None:
        event["exception"] = describe_exception(info[1])
    return event


def _exception_as_text(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Processor for the console renderer, which prints `exception` as text."""
    described = event.get("exception")
    if isinstance(described, dict):
        lines = [f"{described['type']} at {described['at']}"]
        lines += [f"  {f['file']}:{f['line']} in {f['function']}" for f in described["frames"]]
        lines += [f"  caused by {c['type']} at {c['at']}" for c in described.get("causes", [])]
        event["exception"] = "\n".join(lines)
    return event


def _foreign_message(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Processor for standard-library records: their first line only. Later lines of
    asyncio's and the SDKs' messages are reprs of tasks, futures and payloads, which can
    hold an exception's text."""
    message = str(event.get("event", ""))
    event["event"] = message.split("\n", 1)[0][:MAX_FOREIGN_MESSAGE]
    return event


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------
class _RoutedHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler `configure` installs on the root logger (and replaces on a second call)."""


def _configured_level() -> str | None:
    """The `log_level` setting; None when unset or when the settings do not load (the
    command that needs them reports that)."""
    from worker.environment import SettingsError
    from worker.settings import Settings

    try:
        return Settings().log_level
    except SettingsError:
        return None


def configure(
    level: str | None = None,
    stream: TextIO | None = None,
    pretty: bool | None = None,
    *,
    default: str = "info",
    settings: Settings | None = None,
) -> None:
    """Configure structlog and the standard library's logging for the process. The level:
    `level` (the CLI flag) when given, else the `log_level` setting (of `settings` when the
    caller has read them, else read here), else `default`."""
    out = stream or sys.stderr
    if pretty is None:
        pretty = out.isatty()
    if not level:
        level = settings.log_level if settings is not None else _configured_level()
    chosen = level or default
    numeric = logging.getLevelNamesMapping().get(chosen.upper(), logging.INFO)
    renderer: Any = (
        structlog.dev.ConsoleRenderer() if pretty else structlog.processors.JSONRenderer()
    )
    tail: list[Any] = [_exception_as_text, renderer] if pretty else [renderer]
    shared: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        render_exception,
        _drop_secrets,
    ]
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, *shared, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
    foreign: list[Any] = [_foreign_message, structlog.stdlib.add_logger_name, *shared]
    handler = _RoutedHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=foreign,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _RoutedHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    logging.captureWarnings(True)


def get_logger(**bound: Any) -> Any:
    """A logger with `bound` fields; without any, one that follows later configuration.

    Ids that hold for a whole message (session, message, delivery, then the event's
    conversation, turn and event ids) are bound once with structlog's contextvars by the
    runtime and the handler, and reach every line logged meanwhile without being passed.
    """
    logger = structlog.get_logger("export_worker")
    return logger.bind(**bound) if bound else logger
