"""`ServiceBusBroker`: a namespace served over AMQP on 127.0.0.1, in a background thread.

    with ServiceBusBroker(entities=[QueueConfig("orders", requires_session=True)]) as broker:
        client = ServiceBusClient.from_connection_string(broker.connection_string)

The connection string is the development-emulator form the SDK knows
(`UseDevelopmentEmulator=true`: plain AMQP on the endpoint's port, no TLS). The port is
chosen by the kernel. `stop()` (or leaving the `with`) closes every connection and ends
the thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from proton.reactor import ApplicationEvent, Container, EventInjector

from .cbs import SharedAccessKey
from .clock import Clock, SystemClock
from .config import EntityConfig
from .endpoint import AmqpEndpoint, Forced
from .namespace import Namespace

HOST = "127.0.0.1"
KEY_NAME = "RootManageSharedAccessKey"
# A development key, like the emulator's well-known one: not a secret.
KEY = "U2VydmljZUJ1c1Rlc3RCcm9rZXJEZXZlbG9wbWVudEtleQ=="
START_TIMEOUT = 10.0
# Descriptions of what the service does on its own (the conditions are in endpoint.py).
IDLE_DETACH = "the link was idle for 10 minutes and is force detached"
GATEWAY_CLOSE = "the connection was closed by the service: its gateway is being upgraded"
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class EntityCounts:
    """What an entity holds, as the runtime properties count it."""

    active: int
    dead_letter: int
    deferred: int
    scheduled: int = 0


class ServiceBusBroker:
    """A Service Bus namespace for tests: entities configured up front (or added while it
    runs), time from `clock`."""

    def __init__(
        self,
        entities: Iterable[EntityConfig] = (),
        *,
        clock: Clock | None = None,
        host: str = HOST,
        port: int = 0,
        key_name: str = KEY_NAME,
        key: str = KEY,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        self.key = SharedAccessKey(key_name, key)
        self.namespace = Namespace(self.clock, tuple(entities))
        self._endpoint = AmqpEndpoint(self.namespace, self.key)
        self._endpoint.bind(host, port)
        self._host = host
        self._container: Container | None = None
        self._thread: threading.Thread | None = None
        self._injector: EventInjector | None = None
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        """The AMQP port (known once started)."""
        if self._endpoint.port is None:
            raise RuntimeError("the broker is not started")
        return self._endpoint.port

    @property
    def connection_string(self) -> str:
        """A connection string the Service Bus SDK connects with (plain AMQP, this port)."""
        return self.connection_string_through(self.port)

    def connection_string_through(self, port: int) -> str:
        """The connection string with `port` for the broker's: a proxy in front of it on
        this host (tests/held_network.py)."""
        return (
            f"Endpoint=sb://{self._host}:{port};SharedAccessKeyName={self.key.name};"
            f"SharedAccessKey={self.key.key};UseDevelopmentEmulator=true"
        )

    def start(self) -> ServiceBusBroker:
        """Listen and serve in a background thread; returns once the port is bound."""
        if self._thread is not None:
            raise RuntimeError("the broker is already started")
        self._injector = EventInjector()
        self._container = Container(self._endpoint)
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._run, name="servicebus-broker", daemon=True)
        self._thread.start()
        if not self._endpoint.listening.wait(START_TIMEOUT):
            raise RuntimeError(f"the broker did not start: {self._failure!r}")
        return self

    def _run(self) -> None:
        assert self._container is not None
        try:
            self._container.run()
        except BaseException as exc:  # kept for start()/stop() to report
            self._failure = exc
            raise

    def stop(self) -> None:
        """Close every connection, stop listening and end the thread."""
        if self._thread is None or self._injector is None:
            return
        self._injector.trigger(ApplicationEvent("broker_stop"))
        self._thread.join(STOP_TIMEOUT)
        if self._thread.is_alive():
            raise RuntimeError("the broker thread did not stop")
        self._injector.close()
        self._thread = None
        if self._failure is not None:
            raise RuntimeError("the broker failed while running") from self._failure

    def add(self, config: EntityConfig) -> None:
        """Create a queue or topic while the broker runs."""
        with self._endpoint.guard:
            self.namespace.add(config)

    def counts(self, path: str) -> EntityCounts:
        """Active (queued or locked), dead-lettered and deferred messages of an entity."""
        with self._endpoint.guard:
            self._endpoint.let_time_pass()
            entity = self.namespace.entity(path)
            messages = list(entity.messages())
            dead = list(entity.dead_letters.messages()) if entity.dead_letters else []
        return EntityCounts(
            active=sum(1 for m in messages if not m.deferred),
            dead_letter=len(dead),
            deferred=sum(1 for m in messages if m.deferred),
        )

    def operations(self) -> dict[str, dict[str, int]]:
        """What clients asked so far, by kind, with message bytes (`tally.py`)."""
        return self._endpoint.tally.snapshot()

    def force_detach(self, path: str, description: str = IDLE_DETACH) -> int:
        """Detach every client link on the queue, subscription or topic at `path` with
        `amqp:link:detach-forced`, as Service Bus does to a link idle for 10 minutes or on a
        gateway being upgraded; how many were detached."""
        return self._force(Forced("detach", description, path))

    def force_close(self, description: str = GATEWAY_CLOSE) -> int:
        """Close every client connection with `amqp:connection:forced`, as Service Bus
        does when a gateway restarts; how many were closed."""
        return self._force(Forced("close", description))

    def _force(self, order: Forced) -> int:
        if self._injector is None:
            raise RuntimeError("the broker is not started")
        with self._endpoint.guard:
            self._endpoint.forced.append(order)
        self._injector.trigger(ApplicationEvent("broker_force"))
        if not order.done.wait(STOP_TIMEOUT):
            raise RuntimeError(f"the broker did not {order.what} in time")
        return order.count

    def open_connections(self, expected: int | None = None, timeout: float = 5.0) -> int:
        """Client connections open (to see a client leak one); with `expected`, waits up to
        `timeout` seconds for that count first, as closes arrive asynchronously."""
        return self._endpoint.open_connections(expected, timeout)

    def __enter__(self) -> ServiceBusBroker:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
