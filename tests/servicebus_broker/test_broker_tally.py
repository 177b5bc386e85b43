"""The broker's tally of client operations (what the Service Bus benchmark counts per turn):
each kind is counted where its frame is handled, with the bytes of the messages."""

from __future__ import annotations

import pytest
from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage

from .broker import ServiceBusBroker
from .conftest import WAIT

pytestmark = pytest.mark.servicebus_broker


def test_tally_counts_a_send_a_session_accept_a_delivery_and_its_completion(
    broker: ServiceBusBroker, client: ServiceBusClient
) -> None:
    with client.get_queue_sender("sessions", keep_alive=None) as sender:
        sender.send_messages(ServiceBusMessage(b"x" * 100, session_id="s1"))
    sent = broker.operations()
    with client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=WAIT
    ) as receiver:
        (message,) = receiver.receive_messages(max_message_count=1, max_wait_time=WAIT)
        receiver.complete_message(message)
        receiver.session.renew_lock()
    done = broker.operations()

    assert sent["send sessions"]["count"] == 1
    assert sent["send sessions"]["bytes"] > 100  # the body and its AMQP sections
    assert sent["attach send queue"]["count"] == 1
    assert "deliver sessions" not in sent
    assert done["accept session (next available)"]["count"] == 1
    assert done["deliver sessions"]["count"] == 1
    assert done["deliver sessions"]["bytes"] > 100
    assert done["settle complete"]["count"] == 1
    assert done["management renew-session-lock"]["count"] == 1
    assert done["flow (credit)"]["count"] >= 1
    assert done["cbs put-token"]["count"] >= 2  # the sender's path, then the receiver's


def test_tally_counts_a_session_accept_that_found_no_session(
    broker: ServiceBusBroker, client: ServiceBusClient
) -> None:
    from azure.servicebus.exceptions import OperationTimeoutError

    receiver = client.get_queue_receiver(
        "sessions", session_id=NEXT_AVAILABLE_SESSION, max_wait_time=0.2
    )
    with pytest.raises(OperationTimeoutError), receiver:
        pass
    counted = broker.operations()
    assert counted["accept session timed out"]["count"] == 1
    assert "accept session (next available)" not in counted
