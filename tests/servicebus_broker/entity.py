"""One queue or subscription (or its dead-letter sub-queue): every rule about its messages,
their locks and its sessions lives here, with no I/O.

The rules, and the documentation each follows ("protocol guide" is "AMQP 1.0 in Azure
Service Bus and Event Hubs protocol guide"):
- Messages keep the sequence number the entity gave them, also in the dead-letter
  sub-queue (the number changes only when a scheduled message becomes active).
- Peek-lock: a delivered message is locked for the entity's lock duration; complete
  removes it, abandon unlocks it and counts a failed delivery, dead-letter moves it to
  the dead-letter sub-queue with `DeadLetterReason`/`DeadLetterErrorDescription`, defer
  keeps it aside for receive-by-sequence-number ("Message transfers, locks, and
  settlement"; "Message deferral"). A release (AMQP `released`) unlocks it without
  counting a failed delivery: the AMQP core spec counts only `modified` with
  `delivery-failed` as a failed attempt.
- The AMQP header's `delivery-count` is the number of failed deliveries (0 on the first
  delivery); an expired lock counts as one. When it reaches the max delivery count the
  message moves to the dead-letter sub-queue with reason `MaxDeliveryCountExceeded`
  ("Dead-letter queues: maximum delivery count").
- Sessions ("Message sessions"): one holder per session; the session lock covers the
  messages delivered under it; closing the session returns them without counting a
  failed delivery, an expired session lock counts one for each.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_DELIVERY_REASON = "MaxDeliveryCountExceeded"
DEAD_LETTER_REASON = "DeadLetterReason"
DEAD_LETTER_DESCRIPTION = "DeadLetterErrorDescription"


class LockLost(Exception):
    """The message (or session) lock is gone: expired, settled, or held by someone else."""

    def __init__(self, description: str, *, session: bool) -> None:
        super().__init__(description)
        self.session = session


class SessionCannotBeLocked(Exception):
    """The session is held by another receiver."""


class NotAllowed(Exception):
    """The operation makes no sense on this entity (e.g. dead-lettering a dead letter)."""


class QuotaExceeded(Exception):
    """The queue or topic holds its maximum size: a message sent to it is refused."""


@dataclass(frozen=True)
class EntitySettings:
    """How an entity treats its messages."""

    lock_duration: float
    max_delivery_count: int
    requires_session: bool


@dataclass
class MessageLock:
    """A peek-lock on one message; `holder` is the receiver that got it (None when it came
    through receive-by-sequence-number on the management node)."""

    token: uuid.UUID
    holder: object | None
    until: float


@dataclass
class StoredMessage:
    """A message as the entity keeps it. `payload` is the message as sent (opaque here);
    `added_properties` are application properties the broker adds (dead-letter reason)."""

    sequence_number: int
    payload: Any
    message_id: str | None
    session_id: str | None
    enqueued_at: float
    failed_deliveries: int = 0
    deferred: bool = False
    lock: MessageLock | None = None
    added_properties: dict[str, str] = field(default_factory=dict)


@dataclass
class SessionRecord:
    """A session's lock (holder and expiry) and its state."""

    session_id: str
    holder: object | None = None
    until: float = 0.0
    state: bytes | None = None
    state_updated_at: float | None = None


@dataclass(frozen=True)
class Expired:
    """What a step of time expired: session holders whose links must be told."""

    session_holders: tuple[object, ...]


class Entity:
    """A queue, a subscription, or a dead-letter sub-queue (`dead_letters` is None then)."""

    def __init__(self, path: str, settings: EntitySettings, *, dead_letter: bool = False) -> None:
        self.path = path
        self.settings = settings
        self.is_dead_letter_queue = dead_letter
        self.dead_letters: Entity | None = None
        if not dead_letter:
            dlq_settings = EntitySettings(
                settings.lock_duration, settings.max_delivery_count, False
            )
            self.dead_letters = Entity(f"{path}/$DeadLetterQueue", dlq_settings, dead_letter=True)
        # Arrival order: the order the entity delivers in.
        self._messages: dict[int, StoredMessage] = {}
        self._locks: dict[uuid.UUID, StoredMessage] = {}
        self._sessions: dict[str, SessionRecord] = {}
        self._last_sequence = 0

    # ---- sending -------------------------------------------------------------------
    def enqueue(
        self, payload: Any, message_id: str | None, session_id: str | None, now: float
    ) -> StoredMessage:
        """Store a sent message with the entity's next sequence number."""
        if self.settings.requires_session and not session_id:
            raise NotAllowed(
                f"{self.path} requires sessions: a message without a session id is refused"
            )
        self._last_sequence += 1
        stored = StoredMessage(self._last_sequence, payload, message_id, session_id, now)
        self._messages[stored.sequence_number] = stored
        return stored

    def _receive_dead_letter(self, stored: StoredMessage) -> None:
        """Take a message moved here from the parent entity, keeping its number."""
        stored.lock = None
        stored.deferred = False
        self._messages[stored.sequence_number] = stored

    # ---- what a receiver gets ----------------------------------------------------------
    def next_deliverable(self, session_id: str | None) -> StoredMessage | None:
        """The message a receiver of this session (None: no session) gets next."""
        for stored in self._messages.values():
            if stored.lock is not None or stored.deferred:
                continue
            if not self.settings.requires_session or stored.session_id == session_id:
                return stored
        return None

    def lock(self, stored: StoredMessage, holder: object | None, now: float) -> MessageLock:
        """Peek-lock a message for a holder; a new token on every delivery."""
        until = now + self.settings.lock_duration
        if self.settings.requires_session and stored.session_id is not None:
            until = self.session(stored.session_id).until
        stored.lock = MessageLock(uuid.uuid4(), holder, until)
        self._locks[stored.lock.token] = stored
        return stored.lock

    def remove(self, stored: StoredMessage) -> None:
        """Take a message out (receive-and-delete, or complete)."""
        self._unlock(stored)
        self._messages.pop(stored.sequence_number, None)

    # ---- settlement ----------------------------------------------------------------------
    def locked(self, token: uuid.UUID, holder: object | None, now: float) -> StoredMessage:
        """The message locked under `token`; LockLost when the lock is not valid any more
        (or belongs to another holder, when `holder` is given)."""
        stored = self._locks.get(token)
        if stored is None or stored.lock is None:
            raise LockLost(f"lock token {token} is not valid", session=self._session_locks)
        if holder is not None and stored.lock.holder is not holder:
            raise LockLost(f"lock token {token} is held elsewhere", session=self._session_locks)
        if self._session_locks and stored.session_id is not None:
            record = self._sessions.get(stored.session_id)
            if record is None or record.holder is not stored.lock.holder or record.until <= now:
                raise LockLost(f"session {stored.session_id} is not locked", session=True)
        elif stored.lock.until <= now:
            raise LockLost(f"lock token {token} expired", session=False)
        return stored

    def complete(self, token: uuid.UUID, holder: object | None, now: float) -> None:
        """The work is done: remove the message."""
        self.remove(self.locked(token, holder, now))

    def abandon(self, token: uuid.UUID, holder: object | None, now: float) -> None:
        """Unlock the message and count a failed delivery."""
        self._fail(self.locked(token, holder, now))

    def release(self, token: uuid.UUID, holder: object | None, now: float) -> None:
        """Unlock the message without counting a failed delivery."""
        self._unlock(self.locked(token, holder, now))

    def defer(self, token: uuid.UUID, holder: object | None, now: float) -> None:
        """Set the message aside: only receive-by-sequence-number gets it again."""
        stored = self.locked(token, holder, now)
        self._unlock(stored)
        stored.deferred = True

    def dead_letter(
        self,
        token: uuid.UUID,
        holder: object | None,
        now: float,
        reason: str | None,
        description: str | None,
    ) -> None:
        """Move the message to the dead-letter sub-queue with a reason and a description."""
        if self.dead_letters is None:
            raise NotAllowed("a message in a dead-letter queue cannot be dead-lettered")
        self._move_to_dead_letters(self.locked(token, holder, now), reason, description)

    def renew(self, token: uuid.UUID, holder: object | None, now: float) -> float:
        """Extend a message lock (not for session entities: the session lock covers them)."""
        if self._session_locks:
            raise NotAllowed("messages of a session are renewed with the session lock")
        stored = self.locked(token, holder, now)
        assert stored.lock is not None
        stored.lock.until = now + self.settings.lock_duration
        return stored.lock.until

    # ---- sessions --------------------------------------------------------------------
    def session(self, session_id: str) -> SessionRecord:
        """The record of a session (created on first use, as sessions exist implicitly)."""
        return self._sessions.setdefault(session_id, SessionRecord(session_id))

    def accept_session(self, session_id: str, holder: object, now: float) -> SessionRecord:
        """Lock a named session for a holder; SessionCannotBeLocked when someone holds it."""
        record = self.session(session_id)
        if record.holder is not None and record.holder is not holder and record.until > now:
            raise SessionCannotBeLocked(f"session {session_id} is locked by another receiver")
        record.holder = holder
        record.until = now + self.settings.lock_duration
        return record

    def holds(self, session_id: str, holder: object, now: float) -> bool:
        """Whether `holder` has the session locked right now."""
        record = self._sessions.get(session_id)
        return record is not None and record.holder is holder and record.until > now

    def next_available_session(self, now: float) -> str | None:
        """An unheld session with a deliverable message: the one whose head arrived first."""
        for stored in self._messages.values():
            if stored.session_id is None or stored.deferred or stored.lock is not None:
                continue
            record = self._sessions.get(stored.session_id)
            if record is None or record.holder is None or record.until <= now:
                return stored.session_id
        return None

    def renew_session(self, session_id: str, holder: object | None, now: float) -> float:
        """Extend a held session's lock; LockLost when it is not held (by `holder`)."""
        record = self._sessions.get(session_id)
        if (
            record is None
            or record.holder is None
            or record.until <= now
            or (holder is not None and record.holder is not holder)
        ):
            raise LockLost(f"session {session_id} is not locked by this receiver", session=True)
        record.until = now + self.settings.lock_duration
        for stored in self._messages.values():
            if stored.session_id == session_id and stored.lock is not None:
                stored.lock.until = record.until
        return record.until

    def close_session(self, holder: object) -> None:
        """The holder closed: its session and the messages it held return, uncounted."""
        for record in self._sessions.values():
            if record.holder is holder:
                record.holder = None
                record.until = 0.0
        self._release_held_by(holder)

    def session_ids(self, updated_after: float | None) -> list[str]:
        """Sessions with active messages or state (`updated_after` None), or those whose
        state was set after a time."""
        if updated_after is not None:
            return [
                r.session_id
                for r in self._sessions.values()
                if r.state_updated_at is not None and r.state_updated_at > updated_after
            ]
        with_messages = {
            m.session_id for m in self._messages.values() if m.session_id and not m.deferred
        }
        with_state = {r.session_id for r in self._sessions.values() if r.state is not None}
        ordered = [m.session_id for m in self._messages.values() if m.session_id]
        ordered += [r.session_id for r in self._sessions.values()]
        return list(dict.fromkeys(s for s in ordered if s in with_messages | with_state))

    # ---- time ----------------------------------------------------------------------------
    def expire(self, now: float) -> Expired:
        """Let locks that ran out expire: each counts a failed delivery."""
        holders: list[object] = []
        for record in self._sessions.values():
            if record.holder is not None and record.until <= now:
                holders.append(record.holder)
                self._fail_held_by(record.holder, record.session_id)
                record.holder = None
        if not self._session_locks:
            for stored in [m for m in self._locks.values() if m.lock and m.lock.until <= now]:
                self._fail(stored)
        return Expired(tuple(holders))

    # ---- browsing --------------------------------------------------------------------------
    def peek(self, from_sequence: int, count: int, session_id: str | None) -> list[StoredMessage]:
        """Up to `count` messages from a sequence number on, locked or not, in number order."""
        found = sorted(
            (
                m
                for m in self._messages.values()
                if m.sequence_number >= from_sequence
                and (session_id is None or m.session_id == session_id)
            ),
            key=lambda m: m.sequence_number,
        )
        return found[:count]

    def by_sequence_number(self, sequence_number: int) -> StoredMessage | None:
        """The message with this number, if the entity holds it."""
        return self._messages.get(sequence_number)

    def messages(self) -> Iterator[StoredMessage]:
        """Every message held, in arrival order."""
        return iter(list(self._messages.values()))

    def size_bytes(self) -> int:
        """What the messages held take, as sent, dead letters included (Service Bus counts
        an entity's dead-letter queue in its size)."""
        held = sum(len(m.payload) for m in self._messages.values() if _sized(m.payload))
        return held + (0 if self.dead_letters is None else self.dead_letters.size_bytes())

    # ---- inner workings ------------------------------------------------------------------
    @property
    def _session_locks(self) -> bool:
        return self.settings.requires_session

    def _unlock(self, stored: StoredMessage) -> None:
        if stored.lock is not None:
            self._locks.pop(stored.lock.token, None)
            stored.lock = None

    def _fail(self, stored: StoredMessage) -> None:
        """One failed delivery: unlock, count, and dead-letter at the max delivery count."""
        self._unlock(stored)
        stored.failed_deliveries += 1
        if self.dead_letters is not None and (
            stored.failed_deliveries >= self.settings.max_delivery_count
        ):
            self._move_to_dead_letters(
                stored,
                MAX_DELIVERY_REASON,
                f"Message could not be consumed after {stored.failed_deliveries} delivery"
                " attempts.",
            )

    def _move_to_dead_letters(
        self, stored: StoredMessage, reason: str | None, description: str | None
    ) -> None:
        assert self.dead_letters is not None
        self.remove(stored)
        if reason is not None:
            stored.added_properties[DEAD_LETTER_REASON] = reason
        if description is not None:
            stored.added_properties[DEAD_LETTER_DESCRIPTION] = description
        self.dead_letters._receive_dead_letter(stored)

    def _held_by(self, holder: object, session_id: str | None = None) -> list[StoredMessage]:
        return [
            m
            for m in self._locks.values()
            if m.lock is not None
            and m.lock.holder is holder
            and (session_id is None or m.session_id == session_id)
        ]

    def _release_held_by(self, holder: object) -> None:
        for stored in self._held_by(holder):
            self._unlock(stored)

    def _fail_held_by(self, holder: object, session_id: str) -> None:
        for stored in self._held_by(holder, session_id):
            self._fail(stored)


def _sized(payload: Any) -> bool:
    return isinstance(payload, bytes | bytearray | memoryview)
