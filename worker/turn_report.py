"""A turn record as an operator reads it: the decision, the file, and why its rows were chosen."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def turn_lines(record: dict[str, Any]) -> Iterator[str]:
    """The lines `turns show` prints for one turn record (no row data: none is recorded)."""
    state = record.get("state_after") or {}
    yield f"turn        {record.get('turn_id')}  (conversation {record.get('conversation_id')})"
    yield f"decision    {record.get('decision')}"
    yield f"format      {record.get('format') or '-'}  carried: {_yes(record.get('carried'))}"
    yield f"state after {state.get('state')} {state.get('format') or ''}".rstrip()
    yield f"processed   {record.get('processed_at')}  event sent: {_yes(record.get('event_sent'))}"
    export = record.get("export")
    if not export:
        return
    yield f"export      {export.get('export_id')}  {export.get('blob')}"
    yield (
        f"rows        {export.get('row_count')} from {export.get('row_source')}"
        f"  truncated: {_yes(export.get('truncated'))}"
    )
    yield f"columns     {', '.join(export.get('columns') or [])}"
    selection = export.get("selection")
    if not selection:
        yield "why         not recorded (an export written before selections were recorded)"
        return
    yield f"why         rule {selection.get('rule')}"
    groups = selection.get("groups") or []
    if not groups:
        yield "            no action groups were considered"
        return
    yield "            chosen  turn / action  estimate  rows  score"
    for group in groups:
        yield (
            f"            {'yes' if group.get('chosen') else 'no ':<6}  "
            f"{group.get('turn_id')} / {group.get('action')}  "
            f"{_count(group.get('estimate'))}  {_count(group.get('rows'))}  {group.get('score')}"
        )


def _yes(flag: Any) -> str:
    return "yes" if flag else "no"


def _count(value: Any) -> str:
    return "-" if value is None else str(value)
