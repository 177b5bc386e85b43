"""Every event the worker logs is in the runbook's table (docs/operations.md, "Logs"):
an operator searching the logs for what a line means finds it there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LEVELS = {"debug", "info", "warning", "error", "critical", "exception"}
EVENT = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def logged_events() -> dict[str, str]:
    """Event name -> where it is logged, for `<logger>.<level>("event", ...)` calls."""
    found: dict[str, str] = {}
    for package in ("worker", "handlers", "schemas"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LEVELS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and EVENT.fullmatch(node.args[0].value)
                ):
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    found.setdefault(node.args[0].value, where)
    return found


def test_the_scan_finds_the_events_it_should() -> None:
    events = logged_events()
    # Written across lines, through self._log, and through the module logger.
    assert {"turn_retry_scheduled", "session_accept_failed", "turn_published"} <= set(events)


def test_every_logged_event_is_in_the_runbooks_table() -> None:
    runbook = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"`([a-z][a-z0-9_]+)`", runbook))
    missing = {event: where for event, where in logged_events().items() if event not in documented}
    assert missing == {}
