"""Gestures on one proton link: attaching our end (echoing the client's terminus),
refusing an attach, errors as Service Bus words them, and reading what the client put on
its attach (source filters, link properties)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from proton import Condition, Described, Link, Terminus, symbol, uint

SESSION_FILTER = symbol("com.microsoft:session-filter")
TRACKING_ID = symbol("com.microsoft:tracking-id")


def error(condition: str, description: str) -> Condition:
    """An AMQP error as Service Bus sends it: with an `info` map (a tracking id). The
    Python SDK reads a rejected outcome's error as three fields and hangs without one."""
    return Condition(condition, description, {TRACKING_ID: str(uuid.uuid4())})


def open_link(link: Link, session_id: str | None = None) -> None:
    """Attach our end, echoing the client's terminus (and the accepted session, if any)."""
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    if session_id is not None:
        link.source.filter.clear()
        link.source.filter.put_dict({SESSION_FILTER: session_id})
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = link.remote_rcv_settle_mode
    link.open()


def refuse(link: Link, condition: str, description: str) -> None:
    """Protocol guide, "Create message sender (error)": attach with a null terminus, then
    detach (closed) with the error. The SDK reads the error from the detach."""
    link.source.type = Terminus.UNSPECIFIED
    link.target.type = Terminus.UNSPECIFIED
    link.open()
    link.condition = error(condition, description)
    link.close()


def links_of(connection: Any) -> Iterator[Link]:
    """Every link of a connection."""
    link = connection.link_head(0)
    while link is not None:
        yield link
        link = link.next(0)


def source_filters(link: Link) -> dict[Any, Any]:
    """The filter set of the client's source, values undescribed."""
    data = link.remote_source.filter
    data.rewind()
    if not data.next():
        return {}
    found = data.get_object()
    if not isinstance(found, dict):
        return {}
    return {k: v.value if isinstance(v, Described) else v for k, v in found.items()}


def remote_property(link: Link, key: symbol) -> Any:
    """A property of the client's attach, or None."""
    value = (link.remote_properties or {}).get(key)
    return int(value) if isinstance(value, int | uint) else value
