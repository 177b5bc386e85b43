"""The clients' receiver links on entities: session acceptance (named and next available),
messages out against link credit, and the dispositions that come back.

- A receiver's source carries `com.microsoft:session-filter`: a session id, or null for
  the next available session. The attach reply echoes the accepted id and states the lock
  in the link property `com.microsoft:locked-until-utc` (.NET ticks). A session held by
  another receiver is refused with `com.microsoft:session-cannot-be-locked`; when no
  session comes within the link's `com.microsoft:timeout` (ms), the attach is refused
  with `com.microsoft:timeout` ("Message sessions"; the SDK's session receiver).
- One locked message per unit of credit (protocol guide, "Flow control"); the delivery
  tag is the lock token. Receive-and-delete receivers (sender-settle-mode `settled`) get
  pre-settled deliveries and the message is gone.
- Dispositions (protocol guide, "Transfers"; "Message transfers, locks, and
  settlement"): `accepted` completes, `modified` with delivery-failed abandons (with
  undeliverable-here: defers), `rejected` with `com.microsoft:dead-letter` dead-letters
  (reason and description from its info), `released` returns the message uncounted. The
  broker settles with the outcome it applied, or `rejected` with
  `com.microsoft:message-lock-lost` / `com.microsoft:session-lock-lost`.
- When a session lock expires the session is free at once; the old receiver is told
  (detached with `com.microsoft:session-lock-lost`) the next time it asks for messages,
  and its settlements are rejected the same way.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from proton import Condition, Delivery, Endpoint, Link, symbol

from . import management, wire_message
from .entity import Entity, LockLost, NotAllowed, SessionCannotBeLocked
from .links import SESSION_FILTER, error, open_link, refuse, remote_property, source_filters
from .namespace import Namespace
from .tally import Tally

LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
OPERATION_TIMEOUT = symbol("com.microsoft:timeout")
# Without a `com.microsoft:timeout` an attach for the next available session waits this long.
DEFAULT_ACCEPT_WAIT = 60.0
TERMINAL = (Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED)
# How the tally names a disposition (modified: an abandon or a deferral).
_OUTCOMES = {
    Delivery.ACCEPTED: "complete",
    Delivery.REJECTED: "dead-letter",
    Delivery.RELEASED: "release",
    Delivery.MODIFIED: "abandon or defer",
}


@dataclass(eq=False)
class Consumer:
    """A client's receiver on an entity (the broker's sender link): the holder of the
    locks it was given. `lost` once its session lock expired."""

    link: Link
    entity: Entity
    session_id: str | None
    receive_and_delete: bool
    # proton hands delivery tags back as text, and a lock token is binary: the broker keeps
    # its own map from each unsettled delivery to its token.
    tokens: dict[Delivery, uuid.UUID] = field(default_factory=dict)
    lost: bool = False


@dataclass(eq=False)
class PendingAccept:
    """An attach asking for the next available session, not answered yet."""

    link: Link
    entity: Entity
    receive_and_delete: bool
    deadline: float


class Receivers:
    """Every receiver link the broker serves, and the attaches still waiting for a session."""

    def __init__(self, namespace: Namespace, tally: Tally | None = None) -> None:
        self.namespace = namespace
        self.tally = tally or Tally()
        self._consumers: dict[Link, Consumer] = {}
        self._pending: list[PendingAccept] = []

    def __contains__(self, link: Link) -> bool:
        return link in self._consumers

    def holder(self, connection: Any, link_name: str) -> Consumer | None:
        """The receiver of this name on this connection (`associated-link-name`)."""
        for consumer in self._consumers.values():
            if consumer.link.connection == connection and consumer.link.name == link_name:
                return consumer
        return None

    # ---- attach and detach -----------------------------------------------------------------
    def attach(self, link: Link, entity: Entity) -> None:
        """A client attached a receiver to an entity: accept it, or wait for a session."""
        self.tally.note("attach receive queue")
        receive_and_delete = link.remote_snd_settle_mode == Link.SND_SETTLED
        filters = source_filters(link)
        if SESSION_FILTER not in filters:
            if entity.settings.requires_session:
                refuse(link, management.NOT_ALLOWED, f"{entity.path} requires a session")
                return
            open_link(link)
            self._consumers[link] = Consumer(link, entity, None, receive_and_delete)
            return
        if not entity.settings.requires_session:
            refuse(link, management.NOT_ALLOWED, f"{entity.path} has no sessions")
            return
        wanted = filters[SESSION_FILTER]
        if wanted is None:
            wait = remote_property(link, OPERATION_TIMEOUT)
            seconds = DEFAULT_ACCEPT_WAIT if wait is None else int(wait) / 1000
            self._pending.append(
                PendingAccept(link, entity, receive_and_delete, time.monotonic() + seconds)
            )
            return
        consumer = Consumer(link, entity, str(wanted), receive_and_delete)
        try:
            record = entity.accept_session(str(wanted), consumer, self.namespace.clock.now())
        except SessionCannotBeLocked as taken:
            refuse(link, management.SESSION_CANNOT_BE_LOCKED, str(taken))
            return
        self.tally.note("accept session (named)")
        self._open_session(consumer, record.until)

    def _open_session(self, consumer: Consumer, until: float) -> None:
        consumer.link.properties = {LOCKED_UNTIL_UTC: wire_message.dotnet_ticks(until)}
        open_link(consumer.link, session_id=consumer.session_id)
        self._consumers[consumer.link] = consumer

    def forget(self, link: Link) -> None:
        """The link is gone: its session (if still held) returns, uncounted."""
        consumer = self._consumers.pop(link, None)
        if consumer is not None and consumer.entity.settings.requires_session and not consumer.lost:
            consumer.entity.close_session(consumer)
        self._pending = [p for p in self._pending if p.link != link]

    def drop(self, connection: Any) -> None:
        """The connection is gone: forget all its receivers."""
        for link in [lk for lk in self._consumers if lk.connection == connection]:
            self.forget(link)
        self._pending = [p for p in self._pending if p.link.connection != connection]

    # ---- time and credit -------------------------------------------------------------------
    def lose(self, holders: list[object]) -> None:
        """These receivers' session locks expired."""
        for holder in holders:
            if isinstance(holder, Consumer):
                holder.lost = True

    def serve(self) -> None:
        """Answer waiting session requests, then use every receiver's credit."""
        now, waiting = self.namespace.clock.now(), []
        for pending in self._pending:
            session_id = pending.entity.next_available_session(now)
            if session_id is not None:
                consumer = Consumer(
                    pending.link, pending.entity, session_id, pending.receive_and_delete
                )
                record = pending.entity.accept_session(session_id, consumer, now)
                self.tally.note("accept session (next available)")
                self._open_session(consumer, record.until)
            elif time.monotonic() >= pending.deadline:
                self.tally.note("accept session timed out")
                refuse(pending.link, "com.microsoft:timeout", "no session was available")
            else:
                waiting.append(pending)
        self._pending = waiting
        for consumer in list(self._consumers.values()):
            self._pump(consumer, now)

    def _pump(self, consumer: Consumer, now: float) -> None:
        link = consumer.link
        if not link.state & Endpoint.LOCAL_ACTIVE:
            return
        if consumer.session_id is not None and not consumer.entity.holds(
            consumer.session_id, consumer, now
        ):
            consumer.lost = True
        if consumer.lost:
            if link.credit > 0:  # the client is receiving: tell it the session is gone
                self.forget(link)
                link.condition = error(management.SESSION_LOCK_LOST, "session lock expired")
                link.close()
            return
        while link.credit > 0:
            stored = consumer.entity.next_deliverable(consumer.session_id)
            if stored is None:
                break
            if consumer.receive_and_delete:
                consumer.entity.remove(stored)
                delivery = link.delivery(uuid.uuid4().bytes_le)
                encoded = wire_message.outgoing(stored)
                self.tally.note(f"deliver {consumer.entity.path}", len(encoded))
                link.send(encoded)
                link.advance()
                delivery.settle()
                continue
            lock = consumer.entity.lock(stored, consumer, now)
            delivery = link.delivery(lock.token.bytes_le)
            encoded = wire_message.outgoing(stored, lock_token=lock.token, locked_until=lock.until)
            self.tally.note(f"deliver {consumer.entity.path}", len(encoded))
            link.send(encoded)
            link.advance()
            consumer.tokens[delivery] = lock.token
        if link.drain_mode and link.credit > 0:
            link.drained()

    # ---- dispositions ------------------------------------------------------------------------
    def disposition(self, link: Link, delivery: Delivery) -> None:
        """The client settled (or asks to settle) a delivery: apply it and confirm."""
        consumer = self._consumers.get(link)
        token = consumer.tokens.pop(delivery, None) if consumer else None
        if consumer is None or token is None:
            delivery.settle()
            return
        if delivery.remote_state not in TERMINAL:
            consumer.tokens[delivery] = token  # not an outcome yet
            return
        self.tally.note(f"settle {_OUTCOMES.get(delivery.remote_state, 'other')}")
        outcome = self._settle(consumer, token, delivery)
        if not delivery.settled:  # the client waits for the outcome
            delivery.update(outcome)
        delivery.settle()

    def _settle(self, consumer: Consumer, token: uuid.UUID, delivery: Delivery) -> Any:
        """Apply the client's outcome; the outcome to echo (or a rejection with the reason)."""
        entity, now = consumer.entity, self.namespace.clock.now()
        remote, state = delivery.remote, delivery.remote_state
        try:
            if consumer.lost:
                raise LockLost(f"session {consumer.session_id} lock expired", session=True)
            if state == Delivery.ACCEPTED:
                entity.complete(token, consumer, now)
            elif state == Delivery.REJECTED:
                reason, description = _dead_letter_details(remote.condition)
                entity.dead_letter(token, consumer, now, reason, description)
            elif state == Delivery.RELEASED:
                entity.release(token, consumer, now)
            elif remote.undeliverable:
                entity.defer(token, consumer, now)
                delivery.local.undeliverable = True
                delivery.local.failed = remote.failed
            elif remote.failed:
                entity.abandon(token, consumer, now)
                delivery.local.failed = True
            else:
                entity.release(token, consumer, now)
        except LockLost as lost:
            condition = (
                management.SESSION_LOCK_LOST if lost.session else management.MESSAGE_LOCK_LOST
            )
            delivery.local.condition = error(condition, str(lost))
            return Delivery.REJECTED
        except NotAllowed as refused:
            delivery.local.condition = error(management.NOT_ALLOWED, str(refused))
            return Delivery.REJECTED
        return state


def _dead_letter_details(condition: Condition | None) -> tuple[str | None, str | None]:
    """Reason and description from a `rejected` outcome's `com.microsoft:dead-letter`."""
    if condition is None:
        return None, None
    info = {str(k): v for k, v in (condition.info or {}).items()}
    reason = info.get("DeadLetterReason")
    description = info.get("DeadLetterErrorDescription", condition.description)
    return (
        None if reason is None else str(reason),
        None if description is None else str(description),
    )
