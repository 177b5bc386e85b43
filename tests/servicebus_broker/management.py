"""The `$management` node of an entity: request-response operations, each answering with
`statusCode`/`statusDescription` application properties and an amqp-value map body, as
"AMQP 1.0 in Microsoft Azure Service Bus: request-response-based operations" defines
them. Failures add `errorCondition`, the condition the SDK maps to an exception (e.g.
`com.microsoft:message-lock-lost` for 410 Gone).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from proton import UNDESCRIBED, Array, Data, Message, int32, symbol

from . import wire_message
from .entity import Entity, LockLost, NotAllowed, SessionCannotBeLocked
from .namespace import Node

OK, NO_CONTENT, BAD_REQUEST, NOT_FOUND, GONE = 200, 204, 400, 404, 410
# The SDK's session browser asks for every session with messages or state by sending
# DateTime.MaxValue (year 10000) as `last-updated-time`.
MAX_DATETIME_MS = 253402300799000
MESSAGE_LOCK_LOST = "com.microsoft:message-lock-lost"
SESSION_LOCK_LOST = "com.microsoft:session-lock-lost"
MESSAGE_NOT_FOUND = "com.microsoft:message-not-found"
SESSION_CANNOT_BE_LOCKED = "com.microsoft:session-cannot-be-locked"
NOT_ALLOWED = "amqp:not-allowed"
NOT_IMPLEMENTED = "amqp:not-implemented"
# `disposition-status` values; "defered" is how the SDK spells its deferral request.
DISPOSITIONS = {"completed", "abandoned", "suspended", "defered", "deferred"}


class Failure(Exception):
    """An operation that answers with an error status."""

    def __init__(self, status: int, condition: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.condition = condition
        self.description = description


def response(
    request: Message,
    status: int,
    description: str,
    body: Any = None,
    *,
    condition: str | None = None,
    status_key: str = "statusCode",
    description_key: str = "statusDescription",
) -> Message:
    """A reply correlated to the request (`correlation-id` = the request's `message-id`)."""
    properties: dict[str, Any] = {status_key: int32(status), description_key: description}
    if condition is not None:
        properties["errorCondition"] = symbol(condition)
    return Message(correlation_id=request.id, properties=properties, body=body)


def answer(request: Message, node: Node, holder: object | None, now: float) -> Message:
    """Run one request on an entity's management node; `holder` is the receiver named by
    the request's `associated-link-name`, when there is one."""
    operation = str((request.properties or {}).get("operation", ""))
    handler = _OPERATIONS.get(operation)
    if handler is None or node.entity is None:
        return response(
            request, BAD_REQUEST, f"{operation} is not implemented", condition=NOT_IMPLEMENTED
        )
    body = _plain(request.body) if isinstance(request.body, Mapping) else {}
    try:
        status, result = handler(node.entity, body, holder, now)
    except Failure as failure:
        return response(request, failure.status, failure.description, condition=failure.condition)
    except LockLost as lost:
        condition = SESSION_LOCK_LOST if lost.session else MESSAGE_LOCK_LOST
        return response(request, GONE, str(lost), condition=condition)
    except SessionCannotBeLocked as taken:
        return response(request, GONE, str(taken), condition=SESSION_CANNOT_BE_LOCKED)
    except NotAllowed as refused:
        return response(request, BAD_REQUEST, str(refused), condition=NOT_ALLOWED)
    return response(request, status, "OK" if status == OK else "No Content", result)


# ---- operations ----------------------------------------------------------------------
Result = tuple[int, Any]


def _renew_lock(entity: Entity, body: dict[str, Any], holder: object | None, now: float) -> Result:
    expirations = [entity.renew(token, None, now) for token in _tokens(body)]
    return OK, {
        "expirations": _array(Data.TIMESTAMP, map(wire_message.amqp_timestamp, expirations))
    }


def _renew_session_lock(
    entity: Entity, body: dict[str, Any], holder: object | None, now: float
) -> Result:
    until = entity.renew_session(_required(body, "session-id"), holder, now)
    return OK, {"expiration": wire_message.amqp_timestamp(until)}


def _peek(entity: Entity, body: dict[str, Any], holder: object | None, now: float) -> Result:
    found = entity.peek(
        int(_required(body, "from-sequence-number")),
        int(_required(body, "message-count")),
        body.get("session-id"),
    )
    if not found:
        return NO_CONTENT, None
    return OK, {"messages": [{"message": wire_message.outgoing(m)} for m in found]}


def _sessions(entity: Entity, body: dict[str, Any], holder: object | None, now: float) -> Result:
    updated = int(_required(body, "last-updated-time"))
    skip, top = int(body.get("skip", 0)), int(body.get("top", 100))
    after = None if updated >= MAX_DATETIME_MS else updated / 1000
    page = entity.session_ids(after)[skip : skip + top]
    if not page:
        return NO_CONTENT, None
    return OK, {"skip": int32(skip), "sessions-ids": _array(Data.STRING, page)}


def _update_disposition(
    entity: Entity, body: dict[str, Any], holder: object | None, now: float
) -> Result:
    status = str(_required(body, "disposition-status"))
    if status not in DISPOSITIONS:
        raise Failure(BAD_REQUEST, NOT_ALLOWED, f"unknown disposition-status {status}")
    for token in _tokens(body):
        if status == "completed":
            entity.complete(token, None, now)
        elif status == "abandoned":
            entity.abandon(token, None, now)
        elif status == "suspended":
            entity.dead_letter(
                token, None, now, body.get("deadletter-reason"), body.get("deadletter-description")
            )
        else:
            entity.defer(token, None, now)
    return OK, {}


def _receive_by_sequence_number(
    entity: Entity, body: dict[str, Any], holder: object | None, now: float
) -> Result:
    peek_lock = int(body.get("receiver-settle-mode", 1)) == 1
    found = []
    for number in _required(body, "sequence-numbers"):
        stored = entity.by_sequence_number(int(number))
        if stored is None or not stored.deferred or stored.lock is not None:
            raise Failure(NOT_FOUND, MESSAGE_NOT_FOUND, f"no deferred message {number}")
        if entity.settings.requires_session and stored.session_id != body.get("session-id"):
            raise Failure(NOT_FOUND, MESSAGE_NOT_FOUND, f"no deferred message {number}")
        if not peek_lock:
            entity.remove(stored)
            found.append({"message": wire_message.outgoing(stored)})
            continue
        lock = entity.lock(stored, holder, now)
        encoded = wire_message.outgoing(stored, lock_token=lock.token, locked_until=lock.until)
        found.append({"lock-token": lock.token, "message": encoded})
    return OK, {"messages": found}


def _get_session_state(
    entity: Entity, body: dict[str, Any], holder: object | None, now: float
) -> Result:
    record = entity.session(_required(body, "session-id"))
    return OK, {"session-state": record.state}


def _set_session_state(
    entity: Entity, body: dict[str, Any], holder: object | None, now: float
) -> Result:
    session_id = _required(body, "session-id")
    entity.renew_session(session_id, holder, now)  # LockLost unless held (by the asker)
    record = entity.session(session_id)
    state = body.get("session-state")
    record.state = None if state is None else bytes(state)
    record.state_updated_at = now
    return OK, {}


_OPERATIONS: dict[str, Callable[[Entity, dict[str, Any], object | None, float], Result]] = {
    "com.microsoft:renew-lock": _renew_lock,
    "com.microsoft:renew-session-lock": _renew_session_lock,
    "com.microsoft:peek-message": _peek,
    "com.microsoft:get-message-sessions": _sessions,
    "com.microsoft:update-disposition": _update_disposition,
    "com.microsoft:receive-by-sequence-number": _receive_by_sequence_number,
    "com.microsoft:get-session-state": _get_session_state,
    "com.microsoft:set-session-state": _set_session_state,
}


# ---- decoding requests ---------------------------------------------------------------
def _plain(value: Any) -> Any:
    """Request values as plain Python: str keys, lists for AMQP arrays."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Array):
        return [_plain(v) for v in value.elements]
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _required(body: dict[str, Any], key: str) -> Any:
    if body.get(key) is None:
        raise Failure(BAD_REQUEST, "com.microsoft:argument-error", f"{key} is required")
    return body[key]


def _tokens(body: dict[str, Any]) -> list[uuid.UUID]:
    tokens = _required(body, "lock-tokens")
    return [t if isinstance(t, uuid.UUID) else uuid.UUID(str(t)) for t in tokens]


def _array(kind: int, values: Any) -> Array:
    return Array(UNDESCRIBED, kind, *values)
