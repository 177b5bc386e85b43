"""Connecting to the broker: the emulator connection string, claims-based security,
unknown entities, refused sends, and a clean stop (in-process and as a subprocess)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import (
    MessagingEntityNotFoundError,
    ServiceBusAuthenticationError,
    ServiceBusError,
    SessionLockLostError,
)

from .broker import ServiceBusBroker
from .conftest import ENTITIES, WAIT

pytestmark = pytest.mark.servicebus_broker

REPO = Path(__file__).resolve().parents[2]
PROCESS_TIMEOUT = 20.0


def test_a_token_signed_with_another_key_is_refused(broker: ServiceBusBroker) -> None:
    wrong = broker.connection_string.replace(broker.key.key, "d3Jvbmcta2V5")
    with ServiceBusClient.from_connection_string(wrong, retry_total=0) as client:
        sender = client.get_queue_sender("plain", keep_alive=None)
        with pytest.raises(ServiceBusAuthenticationError):
            sender.send_messages(ServiceBusMessage(b"x"))
        sender.close()
    assert broker.counts("plain").active == 0


def test_an_unknown_entity_is_not_found(client: ServiceBusClient) -> None:
    sender = client.get_queue_sender("no-such-queue", keep_alive=None)
    with pytest.raises(MessagingEntityNotFoundError):
        sender.send_messages(ServiceBusMessage(b"x"))
    sender.close()


def test_a_session_queue_refuses_a_message_without_a_session_id(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    with (
        client.get_queue_sender("sessions", keep_alive=None) as sender,
        pytest.raises(ServiceBusError, match="requires sessions"),
    ):
        sender.send_messages(ServiceBusMessage(b"x"))
    assert broker.counts("sessions").active == 0


def test_open_connections_are_counted_until_the_client_closes(broker: ServiceBusBroker) -> None:
    client = ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0)
    receiver = client.get_queue_receiver("plain", max_wait_time=WAIT)
    receiver.__enter__()
    browsing = client.get_queue_receiver("plain", max_wait_time=WAIT)
    browsing.peek_messages(max_message_count=1)
    assert broker.open_connections(expected=2) == 2
    receiver.close()
    client.close()
    assert broker.open_connections(expected=0) == 0


def test_stop_closes_the_port_and_ends_the_thread() -> None:
    broker = ServiceBusBroker(ENTITIES).start()
    port = broker.port
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("plain", keep_alive=None) as sender,
    ):
        sender.send_messages(ServiceBusMessage(b"x"))
    broker.stop()
    assert not any(t.name == "servicebus-broker" for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass


def test_the_subprocess_prints_its_connection_string_and_stops_on_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.servicebus_broker", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        connection_string = process.stdout.readline().strip()
        assert connection_string.startswith("Endpoint=sb://127.0.0.1:")
        assert connection_string.endswith("UseDevelopmentEmulator=true")
        with ServiceBusClient.from_connection_string(connection_string, retry_total=0) as client:
            with client.get_queue_sender("turn-completed", keep_alive=None) as sender:
                sender.send_messages(ServiceBusMessage(b"turn", session_id="conv-1"))
            with client.get_queue_receiver(
                "turn-completed", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
            ) as receiver:
                [message] = receiver.receive_messages(max_wait_time=WAIT)
                receiver.complete_message(message)
        process.terminate()
        assert process.wait(PROCESS_TIMEOUT) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(PROCESS_TIMEOUT)


def test_a_forced_detach_ends_a_session_receivers_link_and_frees_its_session(
    client: ServiceBusClient, broker: ServiceBusBroker
) -> None:
    with client.get_queue_sender("sessions", keep_alive=None) as sender:
        sender.send_messages(ServiceBusMessage(b"x", session_id="s1"))
    with client.get_queue_receiver("sessions", session_id="s1", max_wait_time=WAIT) as receiver:
        [held] = receiver.receive_messages(max_wait_time=WAIT)
        assert broker.force_detach("sessions") == 1  # the receiver's link; the sender's is closed
        with pytest.raises(SessionLockLostError):  # settled over management: 410
            receiver.complete_message(held)
    # Freed, and its message returned uncounted, as when the client detaches.
    with client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
    ) as again:
        [message] = again.receive_messages(max_wait_time=WAIT)
        assert (again.session.session_id, message.delivery_count) == ("s1", 0)
        again.complete_message(message)
    assert broker.counts("sessions").active == 0


def test_a_forced_close_closes_every_client_connection(broker: ServiceBusBroker) -> None:
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("plain", keep_alive=None) as sender,
    ):
        sender.send_messages(ServiceBusMessage(b"before"))
        assert broker.open_connections(expected=1) == 1
        assert broker.force_close() == 1
        assert broker.open_connections(expected=0) == 0
        sender.send_messages(ServiceBusMessage(b"after"))  # the SDK connects again
    assert broker.counts("plain").active == 2
