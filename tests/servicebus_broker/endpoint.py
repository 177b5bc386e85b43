"""The AMQP side of the broker: proton's reactor events (connections, sessions, links,
deliveries, dispositions) turned into namespace operations, and their results turned
back into attaches, transfers, dispositions and detaches.

How each gesture maps, with the documentation it follows:
- SASL ANONYMOUS, then claims-based security on `$cbs` before any entity link (protocol
  guide, "Connections and sessions", "Claims-based authorization").
- A sender link to a queue or topic: every transfer is stored and settled `accepted`, or
  `rejected` with an error (protocol guide, "Send (success)", "Send (error)").
- A receiver link: the broker sends one locked message per unit of credit (protocol
  guide, "Flow control"); the delivery tag is the lock token. `accepted` completes,
  `modified` with delivery-failed abandons (with undeliverable-here: defers), `rejected`
  with `com.microsoft:dead-letter` dead-letters, `released` returns the message
  uncounted. The broker settles with the outcome it applied, or `rejected` with
  `com.microsoft:message-lock-lost` / `com.microsoft:session-lock-lost` when the lock
  is gone ("Message transfers, locks, and settlement").
- `com.microsoft:session-filter` on a receiver's source names a session (a string) or
  asks for the next available one (null); the attach reply echoes the accepted session
  id and states the lock in `com.microsoft:locked-until-utc` (.NET ticks). A session held
  elsewhere is refused with `com.microsoft:session-cannot-be-locked`; when no session
  comes within the link's `com.microsoft:timeout` (ms) the attach is answered and closed
  with `com.microsoft:timeout`.
- A refused attach is answered with a null terminus and closed with the error (protocol
  guide, "Create message sender (error)"), for receivers too.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from proton import Condition, Delivery, Described, Endpoint, Handler, Link, Terminus, symbol, uint

from . import cbs, management, wire_message
from .entity import Entity, LockLost, NotAllowed, SessionCannotBeLocked
from .namespace import Namespace, Node

SESSION_FILTER = symbol("com.microsoft:session-filter")
LOCKED_UNTIL_UTC = symbol("com.microsoft:locked-until-utc")
OPERATION_TIMEOUT = symbol("com.microsoft:timeout")
ASSOCIATED_LINK = "associated-link-name"
TRACKING_ID = symbol("com.microsoft:tracking-id")
# Standard tier: 256 KB messages (protocol guide, "Connections and sessions").
MAX_MESSAGE_SIZE = 262144
# Without a `com.microsoft:timeout` an attach for the next available session waits this long.
DEFAULT_ACCEPT_WAIT = 60.0
INCOMING_CREDIT = 500
TICK_SECONDS = 0.05


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


class AmqpEndpoint(Handler):
    """The reactor handler; every namespace access happens under `guard`."""

    def __init__(self, namespace: Namespace, key: cbs.SharedAccessKey) -> None:
        super().__init__()
        self.namespace = namespace
        self.key = key
        self.guard = threading.RLock()
        self.port: int | None = None
        self.listening = threading.Event()
        self._host = "127.0.0.1"
        self._requested_port = 0
        self._acceptor: Any = None
        self._container: Any = None
        self._consumers: dict[Link, Consumer] = {}
        self._pending: list[PendingAccept] = []
        self._request_nodes: dict[Link, Node] = {}
        self._granted: dict[Any, set[str]] = {}

    def bind(self, host: str, port: int) -> None:
        """Where to listen once the reactor starts."""
        self._host, self._requested_port = host, port

    # ---- reactor and connection life ----------------------------------------------------
    def on_reactor_init(self, event: Any) -> None:
        self._container = event.container
        self._acceptor = event.container.listen(f"{self._host}:{self._requested_port}")
        # proton keeps the listening socket private; the port the kernel chose is on it.
        self.port = int(self._acceptor._selectable._delegate.getsockname()[1])
        event.container.schedule(TICK_SECONDS, self)
        self.listening.set()

    def on_broker_stop(self, event: Any) -> None:
        """Stop serving (injected by `ServiceBusBroker.stop`): close every connection."""
        if self._acceptor is not None:
            self._acceptor.close()
        if self._container is not None:
            self._container.stop()

    def on_timer_task(self, event: Any) -> None:
        with self.guard:
            self._step()
        event.container.schedule(TICK_SECONDS, self)

    def on_connection_bound(self, event: Any) -> None:
        # Service Bus offers ANONYMOUS for clients that authorize through $cbs.
        event.transport.sasl().allowed_mechs("ANONYMOUS")

    def on_connection_remote_open(self, event: Any) -> None:
        if event.connection.state & Endpoint.LOCAL_UNINIT:
            self._granted[event.connection] = set()
            event.connection.open()

    def on_session_remote_open(self, event: Any) -> None:
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()

    def on_connection_remote_close(self, event: Any) -> None:
        self._drop_connection(event.connection)
        event.connection.close()

    def on_transport_closed(self, event: Any) -> None:
        if event.connection is not None:
            self._drop_connection(event.connection)

    def on_session_remote_close(self, event: Any) -> None:
        event.session.close()

    def _drop_connection(self, connection: Any) -> None:
        with self.guard:
            for link in [lk for lk in self._consumers if lk.connection == connection]:
                self._forget(link)
            for link in [lk for lk in self._request_nodes if lk.connection == connection]:
                self._request_nodes.pop(link, None)
            self._pending = [p for p in self._pending if p.link.connection != connection]
            self._granted.pop(connection, None)
            self._step()

    # ---- attach ---------------------------------------------------------------------------
    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        with self.guard:
            if link.is_receiver:
                self._attach_incoming(link)
            else:
                self._attach_outgoing(link)
            self._step()

    def _attach_incoming(self, link: Link) -> None:
        """The client sends: to `$cbs`, a management node, a queue or a topic."""
        node = self.namespace.resolve(link.remote_target.address)
        if node is None:
            self._refuse(link, "amqp:not-found", f"no entity {link.remote_target.address}")
            return
        if node.kind != "cbs" and not self._authorized(link, node):
            return
        self._open(link)
        if node.kind in ("entity", "topic"):
            link.max_message_size = MAX_MESSAGE_SIZE
        self._request_nodes[link] = node
        link.flow(INCOMING_CREDIT)

    def _attach_outgoing(self, link: Link) -> None:
        """The client receives: responses of `$cbs`/management, or an entity's messages."""
        node = self.namespace.resolve(link.remote_source.address)
        if node is None:
            self._refuse(link, "amqp:not-found", f"no entity {link.remote_source.address}")
            return
        if node.kind == "cbs":
            self._open(link)
            return
        if not self._authorized(link, node):
            return
        if node.kind == "management":
            self._open(link)
            return
        if node.entity is None:
            self._refuse(link, "amqp:not-allowed", f"{node.path} cannot be received from")
            return
        self._attach_consumer(link, node.entity)

    def _attach_consumer(self, link: Link, entity: Entity) -> None:
        receive_and_delete = link.remote_snd_settle_mode == Link.SND_SETTLED
        filters = _filters(link)
        if SESSION_FILTER not in filters:
            if entity.settings.requires_session:
                self._refuse(link, "amqp:not-allowed", f"{entity.path} requires a session")
                return
            self._open(link)
            self._consumers[link] = Consumer(link, entity, None, receive_and_delete)
            return
        if not entity.settings.requires_session:
            self._refuse(link, "amqp:not-allowed", f"{entity.path} has no sessions")
            return
        wanted = filters[SESSION_FILTER]
        if wanted is None:
            wait = _remote_property(link, OPERATION_TIMEOUT)
            seconds = DEFAULT_ACCEPT_WAIT if wait is None else int(wait) / 1000
            self._pending.append(
                PendingAccept(link, entity, receive_and_delete, time.monotonic() + seconds)
            )
            return
        consumer = Consumer(link, entity, str(wanted), receive_and_delete)
        try:
            record = entity.accept_session(str(wanted), consumer, self.namespace.clock.now())
        except SessionCannotBeLocked as taken:
            self._refuse(link, management.SESSION_CANNOT_BE_LOCKED, str(taken))
            return
        self._open_session_link(consumer, record.until)

    def _open_session_link(self, consumer: Consumer, until: float) -> None:
        link = consumer.link
        link.properties = {LOCKED_UNTIL_UTC: wire_message.dotnet_ticks(until)}
        self._open(link, session_id=consumer.session_id)
        self._consumers[link] = consumer

    def _authorized(self, link: Link, node: Node) -> bool:
        if cbs.authorizes(self._granted.get(link.connection, set()), node.path):
            return True
        self._refuse(link, "amqp:unauthorized-access", f"no token was put for {node.path}")
        return False

    @staticmethod
    def _open(link: Link, session_id: str | None = None) -> None:
        """Attach our end, echoing the client's terminus (and the accepted session)."""
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        if session_id is not None:
            link.source.filter.clear()
            link.source.filter.put_dict({SESSION_FILTER: session_id})
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        link.open()

    @staticmethod
    def _refuse(link: Link, condition: str, description: str) -> None:
        """Protocol guide, "Create message sender (error)": attach with a null terminus,
        then detach (closed) with the error."""
        link.source.type = Terminus.UNSPECIFIED
        link.target.type = Terminus.UNSPECIFIED
        link.open()
        link.condition = error(condition, description)
        link.close()

    # ---- detach -----------------------------------------------------------------------------
    def on_link_remote_close(self, event: Any) -> None:
        with self.guard:
            self._forget(event.link)
            self._step()
        if not event.link.state & Endpoint.LOCAL_CLOSED:
            event.link.close()

    def _forget(self, link: Link) -> None:
        consumer = self._consumers.pop(link, None)
        if consumer is not None and consumer.entity.settings.requires_session and not consumer.lost:
            consumer.entity.close_session(consumer)
        self._request_nodes.pop(link, None)
        self._pending = [p for p in self._pending if p.link != link]

    # ---- transfers in -----------------------------------------------------------------------
    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        link = delivery.link
        with self.guard:
            if link.is_receiver:
                if delivery.readable and not delivery.partial:
                    data = link.recv(delivery.pending)
                    link.advance()
                    self._received(link, delivery, data)
                    if link.credit < INCOMING_CREDIT // 2:
                        link.flow(INCOMING_CREDIT - link.credit)
            elif delivery.updated:
                self._disposition(link, delivery)
            self._step()

    def _received(self, link: Link, delivery: Delivery, data: bytes) -> None:
        node = self._request_nodes.get(link)
        message = wire_message.decode(data)
        if node is None:
            delivery.update(Delivery.RELEASED)
        elif node.kind == "cbs":
            reply, granted = cbs.put_token(message, self.key)
            if granted is not None:
                self._granted.setdefault(link.connection, set()).add(granted)
            self._reply(link, node, message, reply)
            delivery.update(Delivery.ACCEPTED)
        elif node.kind == "management":
            holder = self._holder(link, (message.properties or {}).get(ASSOCIATED_LINK))
            reply = management.answer(message, node, holder, self.namespace.clock.now())
            self._reply(link, node, message, reply)
            delivery.update(Delivery.ACCEPTED)
        else:
            try:
                self.namespace.send(
                    node, data, wire_message.message_id(message), wire_message.session_id(message)
                )
            except NotAllowed as refused:
                delivery.local.condition = error(management.NOT_ALLOWED, str(refused))
                delivery.update(Delivery.REJECTED)
            else:
                delivery.update(Delivery.ACCEPTED)
        delivery.settle()

    def _holder(self, link: Link, name: Any) -> Consumer | None:
        if name is None:
            return None
        for consumer in self._consumers.values():
            if consumer.link.connection == link.connection and consumer.link.name == str(name):
                return consumer
        return None

    def _reply(self, request_link: Link, node: Node, request: Any, reply: Any) -> None:
        """Send on the client's response link: the one whose target is the request's
        reply-to, else the one on the same session reading from the same node."""
        wanted = request.reply_to
        address = request_link.remote_target.address
        for link in _links(request_link.connection):
            if (
                link.is_receiver
                or link in self._consumers
                or not link.state & Endpoint.LOCAL_ACTIVE
            ):
                continue
            by_reply_to = wanted is not None and link.remote_target.address == wanted
            by_node = (
                wanted is None
                and link.session == request_link.session
                and link.remote_source.address == address
            )
            if by_reply_to or by_node:
                delivery = link.delivery(uuid.uuid4().bytes)
                link.send(reply.encode())
                link.advance()
                delivery.settle()  # responses go pre-settled: nothing to confirm
                return

    # ---- dispositions -------------------------------------------------------------------------
    def _disposition(self, link: Link, delivery: Delivery) -> None:
        consumer = self._consumers.get(link)
        token = consumer.tokens.pop(delivery, None) if consumer else None
        if consumer is None or token is None:
            delivery.settle()
            return
        state = delivery.remote_state
        if state not in (
            Delivery.ACCEPTED,
            Delivery.REJECTED,
            Delivery.RELEASED,
            Delivery.MODIFIED,
        ):
            consumer.tokens[delivery] = token  # not a terminal outcome yet
            return
        outcome = self._settle(consumer, token, delivery)
        if not delivery.settled:  # the client waits for the outcome
            delivery.update(outcome)
        delivery.settle()

    def _settle(self, consumer: Consumer, token: uuid.UUID, delivery: Delivery) -> Any:
        """Apply the client's outcome; the outcome to echo (or a rejection with the reason)."""
        entity, now = consumer.entity, self.namespace.clock.now()
        remote = delivery.remote
        state = delivery.remote_state
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

    # ---- transfers out ------------------------------------------------------------------------
    def on_link_flow(self, event: Any) -> None:
        with self.guard:
            self._step()

    def _step(self) -> None:
        """Let time pass, answer session requests, and use every receiver's credit."""
        for holder in self.namespace.expire():
            if isinstance(holder, Consumer):
                holder.lost = True
        self._serve_pending()
        for consumer in list(self._consumers.values()):
            self._pump(consumer)

    def _serve_pending(self) -> None:
        now, waiting = self.namespace.clock.now(), []
        for pending in self._pending:
            session_id = pending.entity.next_available_session(now)
            if session_id is not None:
                consumer = Consumer(
                    pending.link, pending.entity, session_id, pending.receive_and_delete
                )
                record = pending.entity.accept_session(session_id, consumer, now)
                self._open_session_link(consumer, record.until)
            elif time.monotonic() >= pending.deadline:
                self._refuse(pending.link, "com.microsoft:timeout", "no session was available")
            else:
                waiting.append(pending)
        self._pending = waiting

    def _pump(self, consumer: Consumer) -> None:
        link = consumer.link
        if not link.state & Endpoint.LOCAL_ACTIVE:
            return
        if consumer.lost:
            if link.credit > 0:  # the client is receiving: tell it the session is gone
                self._forget(link)
                link.condition = error(management.SESSION_LOCK_LOST, "session lock expired")
                link.close()
            return
        now = self.namespace.clock.now()
        while link.credit > 0:
            stored = consumer.entity.next_deliverable(consumer.session_id)
            if stored is None:
                break
            if consumer.receive_and_delete:
                consumer.entity.remove(stored)
                delivery = link.delivery(uuid.uuid4().bytes_le)
                link.send(wire_message.outgoing(stored))
                link.advance()
                delivery.settle()
                continue
            lock = consumer.entity.lock(stored, consumer, now)
            delivery = link.delivery(lock.token.bytes_le)
            link.send(wire_message.outgoing(stored, lock_token=lock.token, locked_until=lock.until))
            link.advance()
            consumer.tokens[delivery] = lock.token
        if link.drain_mode and link.credit > 0:
            link.drained()


def error(condition: str, description: str) -> Condition:
    """An AMQP error as Service Bus sends it: with an `info` map (a tracking id). The
    Python SDK reads a rejected outcome's error as three fields and fails without one."""
    return Condition(condition, description, {TRACKING_ID: str(uuid.uuid4())})


def _links(connection: Any) -> Iterator[Link]:
    link = connection.link_head(0)
    while link is not None:
        yield link
        link = link.next(0)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Described) else value


def _filters(link: Link) -> dict[Any, Any]:
    data = link.remote_source.filter
    data.rewind()
    if not data.next():
        return {}
    found = data.get_object()
    return {k: _plain(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _remote_property(link: Link, key: symbol) -> Any:
    properties = link.remote_properties or {}
    value = properties.get(key)
    return int(value) if isinstance(value, int | uint) else value


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
