"""The AMQP side of the broker: proton's reactor events (connections, sessions, links,
transfers) turned into namespace operations, and their results into attaches, transfers,
dispositions and detaches. Receivers of entity messages are `receivers.Receivers`.

- SASL ANONYMOUS, then claims-based security on `$cbs` before any entity link (protocol
  guide, "Connections and sessions", "Claims-based authorization"): an attach to an
  entity or its management node without a token for it is refused with
  `amqp:unauthorized-access`; an unknown entity with `amqp:not-found`.
- A sender link to a queue or topic: every transfer is stored and settled `accepted`, or
  `rejected` with an error (protocol guide, "Send (success)", "Send (error)"): one a
  session queue cannot take, or `amqp:resource-limit-exceeded` when the entity is at its
  maximum size. The link states the Standard tier's 256 KB max message size.
- Request links to `$cbs` and `<entity>/$management`: each request is accepted and its
  response sent on the client's response link, the one whose target is the request's
  `reply-to` (or, without one, the one on the same session reading from the same node),
  per the protocol guide ("AMQP management").
- What the service does on its own, when a test asks (`ServiceBusBroker.force_detach`,
  `force_close`): detach an entity's client links with `amqp:link:detach-forced`, or
  close every client connection with `amqp:connection:forced`.

Each reactor event is one turn under `guard`: locks that ran out expire first, then the
event is handled, then waiting session requests and receiver credit are served.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from proton import Delivery, Endpoint, Handler, Link

from . import cbs, management, wire_message
from .entity import NotAllowed, QuotaExceeded
from .links import error, links_of, open_link, refuse
from .namespace import Namespace, Node
from .receivers import Receivers
from .tally import Tally

ASSOCIATED_LINK = "associated-link-name"
# Standard tier: 256 KB messages (protocol guide, "Connections and sessions").
MAX_MESSAGE_SIZE = 262144
# A send to a queue or topic at its maximum size (the SDK: ServiceBusQuotaExceededError).
RESOURCE_LIMIT_EXCEEDED = "amqp:resource-limit-exceeded"
INCOMING_CREDIT = 500
# What Service Bus does on its own to a link or a connection (protocol guide, "Connections
# and sessions", "Links"): a link idle for 10 minutes, or one on a gateway being upgraded,
# is detached with `detach-forced`; a connection, closed with `connection:forced`.
DETACH_FORCED = "amqp:link:detach-forced"
CONNECTION_FORCED = "amqp:connection:forced"
# How often time is looked at while no event comes (lock expiry, session wait deadlines).
TICK_SECONDS = 0.05


@dataclass
class Forced:
    """An act of the service's own, asked from another thread and done by the reactor:
    detach the client links on an entity (`path`), or close every client connection."""

    what: Literal["detach", "close"]
    description: str
    path: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    count: int = 0


class AmqpEndpoint(Handler):
    """The reactor handler; every namespace access happens under `guard`."""

    def __init__(self, namespace: Namespace, key: cbs.SharedAccessKey) -> None:
        super().__init__()
        self.namespace = namespace
        self.key = key
        self.guard = threading.RLock()
        self._connections_changed = threading.Condition(self.guard)
        self.port: int | None = None
        self.listening = threading.Event()
        self.tally = Tally()
        self.receivers = Receivers(namespace, self.tally)
        self._host = "127.0.0.1"
        self._requested_port = 0
        self._acceptor: Any = None
        self._container: Any = None
        self._request_nodes: dict[Link, Node] = {}
        self._granted: dict[Any, set[str]] = {}
        self.forced: list[Forced] = []

    def open_connections(self, expected: int | None = None, timeout: float = 5.0) -> int:
        """How many client connections are open; with `expected`, first wait (up to
        `timeout`) for that many, since a client's close reaches the broker a moment later."""
        with self._connections_changed:
            if expected is not None:
                self._connections_changed.wait_for(lambda: len(self._granted) == expected, timeout)
            return len(self._granted)

    def bind(self, host: str, port: int) -> None:
        """Where to listen once the reactor starts."""
        self._host, self._requested_port = host, port

    def let_time_pass(self) -> None:
        """Expire the locks that ran out (for callers outside the reactor thread)."""
        with self.guard:
            self.receivers.lose(self.namespace.expire())

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """One reactor event: time passes first, then the event, then deliveries."""
        with self.guard:
            self.receivers.lose(self.namespace.expire())
            yield
            self.receivers.serve()

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

    def on_broker_force(self, event: Any) -> None:
        """Do what `ServiceBusBroker.force_detach` or `force_close` asked (injected)."""
        with self.guard:
            orders, self.forced = self.forced, []
        for order in orders:
            if order.what == "close":
                order.count = self._force_close(order.description)
            else:
                assert order.path is not None
                order.count = self._force_detach(order.path, order.description)
            order.done.set()

    def _force_detach(self, path: str, description: str) -> int:
        """Detach, with `detach-forced`, every client link that sends to or receives from
        the entity or topic at `path`. A session receiver's session returns, uncounted, as
        when its client detaches."""
        links = [
            link
            for connection in list(self._granted)
            for link in links_of(connection)
            if link.state & Endpoint.LOCAL_ACTIVE and self._entity_path(link) == path.lower()
        ]
        with self._turn():
            for link in links:
                self.receivers.forget(link)
                self._request_nodes.pop(link, None)
                link.condition = error(DETACH_FORCED, description)
                link.close()
        return len(links)

    def _entity_path(self, link: Link) -> str | None:
        """The path, lower-cased, of the queue, subscription or topic a client link sends to
        or receives from; None for `$cbs`, a management node or an unknown address."""
        terminus = link.remote_target if link.is_receiver else link.remote_source
        node = self.namespace.resolve(terminus.address)
        return node.path.lower() if node is not None and node.kind in ("entity", "topic") else None

    def _force_close(self, description: str) -> int:
        """Close every client connection with `connection:forced`."""
        connections = list(self._granted)
        for connection in connections:
            connection.condition = error(CONNECTION_FORCED, description)
            connection.close()
            self._drop(connection)
        return len(connections)

    def on_timer_task(self, event: Any) -> None:
        with self._turn():
            pass
        event.container.schedule(TICK_SECONDS, self)

    def on_connection_bound(self, event: Any) -> None:
        # Service Bus offers ANONYMOUS for clients that authorize through $cbs.
        event.transport.sasl().allowed_mechs("ANONYMOUS")

    def on_connection_remote_open(self, event: Any) -> None:
        if event.connection.state & Endpoint.LOCAL_UNINIT:
            self.tally.note("connection")
            with self._connections_changed:
                self._granted[event.connection] = set()
                self._connections_changed.notify_all()
            event.connection.open()

    def on_session_remote_open(self, event: Any) -> None:
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()

    def on_session_remote_close(self, event: Any) -> None:
        event.session.close()

    def on_connection_remote_close(self, event: Any) -> None:
        self._drop(event.connection)
        event.connection.close()

    def on_transport_closed(self, event: Any) -> None:
        if event.connection is not None:
            self._drop(event.connection)

    def _drop(self, connection: Any) -> None:
        with self._turn():
            self.receivers.drop(connection)
            for link in [lk for lk in self._request_nodes if lk.connection == connection]:
                self._request_nodes.pop(link, None)
            self._granted.pop(connection, None)
            self._connections_changed.notify_all()

    # ---- attach and detach ----------------------------------------------------------------
    def on_link_remote_open(self, event: Any) -> None:
        link = event.link
        if not link.state & Endpoint.LOCAL_UNINIT:
            return
        with self._turn():
            if link.is_receiver:
                self._attach_incoming(link)
            else:
                self._attach_outgoing(link)

    def _attach_incoming(self, link: Link) -> None:
        """The client sends: to `$cbs`, a management node, a queue or a topic."""
        node = self.namespace.resolve(link.remote_target.address)
        if node is None:
            refuse(link, "amqp:not-found", f"no entity {link.remote_target.address}")
            return
        if node.kind != "cbs" and not self._authorized(link, node):
            return
        if node.kind in ("entity", "topic"):
            link.max_message_size = MAX_MESSAGE_SIZE
        open_link(link)
        self.tally.note(f"attach send {_kind(node)}")
        self._request_nodes[link] = node
        link.flow(INCOMING_CREDIT)

    def _attach_outgoing(self, link: Link) -> None:
        """The client receives: responses of `$cbs`/management, or an entity's messages."""
        node = self.namespace.resolve(link.remote_source.address)
        if node is None:
            refuse(link, "amqp:not-found", f"no entity {link.remote_source.address}")
        elif node.kind == "cbs":
            open_link(link)
            self.tally.note("attach receive cbs")
        elif not self._authorized(link, node):
            return
        elif node.kind == "management":
            open_link(link)
            self.tally.note("attach receive management")
        elif node.entity is None:
            refuse(link, management.NOT_ALLOWED, f"{node.path} cannot be received from")
        else:
            self.receivers.attach(link, node.entity)

    def _authorized(self, link: Link, node: Node) -> bool:
        if cbs.authorizes(self._granted.get(link.connection, set()), node.path):
            return True
        refuse(link, "amqp:unauthorized-access", f"no token was put for {node.path}")
        return False

    def on_link_remote_close(self, event: Any) -> None:
        self.tally.note("detach")
        with self._turn():
            self.receivers.forget(event.link)
            self._request_nodes.pop(event.link, None)
        if not event.link.state & Endpoint.LOCAL_CLOSED:
            event.link.close()

    # ---- transfers --------------------------------------------------------------------------
    def on_link_flow(self, event: Any) -> None:
        with self._turn():
            if event.link in self.receivers:
                self.tally.note("flow (credit)")

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        link = delivery.link
        with self._turn():
            if not link.is_receiver:
                if delivery.updated:
                    self.receivers.disposition(link, delivery)
            elif delivery.readable and not delivery.partial:
                data = link.recv(delivery.pending)
                link.advance()
                self._received(link, delivery, data)
                if link.credit < INCOMING_CREDIT // 2:
                    link.flow(INCOMING_CREDIT - link.credit)

    def _received(self, link: Link, delivery: Delivery, data: bytes) -> None:
        node = self._request_nodes.get(link)
        message = wire_message.decode(data)
        if node is None:
            delivery.update(Delivery.RELEASED)
        elif node.kind == "cbs":
            self.tally.note("cbs put-token")
            reply, granted = cbs.put_token(message, self.key)
            if granted is not None:
                self._granted.setdefault(link.connection, set()).add(granted)
            self._reply(link, message, reply)
            delivery.update(Delivery.ACCEPTED)
        elif node.kind == "management":
            name = (message.properties or {}).get(ASSOCIATED_LINK)
            holder = None if name is None else self.receivers.holder(link.connection, str(name))
            operation = str((message.properties or {}).get("operation", "")).split(":")[-1]
            self.tally.note(f"management {operation}")
            reply = management.answer(message, node, holder, self.namespace.clock.now())
            self._reply(link, message, reply)
            delivery.update(Delivery.ACCEPTED)
        else:
            self.tally.note(f"send {node.path}", len(data))
            try:
                self.namespace.send(
                    node, data, wire_message.message_id(message), wire_message.session_id(message)
                )
            except NotAllowed as refused:
                delivery.local.condition = error(management.NOT_ALLOWED, str(refused))
                delivery.update(Delivery.REJECTED)
            except QuotaExceeded as full:
                delivery.local.condition = error(RESOURCE_LIMIT_EXCEEDED, str(full))
                delivery.update(Delivery.REJECTED)
            else:
                delivery.update(Delivery.ACCEPTED)
        delivery.settle()

    def _reply(self, request_link: Link, request: Any, reply: Any) -> None:
        """Send on the client's response link: the one whose target is the request's
        reply-to, else the one on the same session reading from the same node."""
        wanted = request.reply_to
        address = request_link.remote_target.address
        for link in links_of(request_link.connection):
            if link.is_receiver or link in self.receivers:
                continue
            if not link.state & Endpoint.LOCAL_ACTIVE:
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


def _kind(node: Node) -> str:
    """How the tally names a node: queue (or subscription), topic, management, cbs."""
    return "queue" if node.kind == "entity" else node.kind
