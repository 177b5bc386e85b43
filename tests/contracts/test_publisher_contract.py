"""Publisher contract: export.published out; the same message id twice is one event."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from worker.ports import Publisher


def run(body: Callable[[Publisher], Awaitable[None]], factory: Any) -> None:
    """Open a fresh publisher from the factory and run `body` on it."""

    async def main() -> None:
        async with factory.open() as publisher:
            await body(publisher)

    asyncio.run(main())


def event(export_id: str, **extra: Any) -> bytes:
    return json.dumps({"type": "export.published", "export_id": export_id, **extra}).encode()


def test_publishing_the_same_message_id_twice_is_accepted(publisher_factory: Any) -> None:
    async def body(publisher: Publisher) -> None:
        export_id = f"exp_{uuid.uuid4().hex[:20]}"
        await publisher.publish(export_id, event(export_id))
        await publisher.publish(export_id, event(export_id))  # a redelivery's resend

    run(body, publisher_factory)


def test_consumers_get_each_message_id_once_oldest_first(publisher_factory: Any) -> None:
    published = publisher_factory.published
    if published is None:
        pytest.skip(f"{publisher_factory.name}: nothing can tell what consumers got")

    async def body(publisher: Publisher) -> None:
        assert await published(publisher) == []
        await publisher.publish("exp_b", event("exp_b", n=1))
        await publisher.publish("exp_a", event("exp_a", n=2))
        await publisher.publish("exp_b", event("exp_b", n=3))  # duplicate: dropped
        assert await published(publisher) == [
            {"type": "export.published", "export_id": "exp_b", "n": 1},
            {"type": "export.published", "export_id": "exp_a", "n": 2},
        ]

    run(body, publisher_factory)


def test_publishes_from_several_session_workers_at_once_are_all_accepted(
    publisher_factory: Any,
) -> None:
    # The runtime's session workers share one publisher: its first sends may race.
    async def body(publisher: Publisher) -> None:
        ids = [f"exp_{uuid.uuid4().hex[:20]}" for _ in range(5)]
        await asyncio.gather(*(publisher.publish(i, event(i)) for i in ids))
        if publisher_factory.published is not None:
            got = await publisher_factory.published(publisher)
            assert sorted(e["export_id"] for e in got) == sorted(ids)

    run(body, publisher_factory)


def test_properties_travel_beside_the_body_which_is_listed_as_sent(
    publisher_factory: Any,
) -> None:
    async def body(publisher: Publisher) -> None:
        properties = {"type": "export.published", "version": 1, "format": "csv"}
        await publisher.publish("exp_p", event("exp_p"), properties)
        if publisher_factory.published is not None:  # bodies only, as consumers get them
            got = await publisher_factory.published(publisher)
            assert got == [{"type": "export.published", "export_id": "exp_p"}]

    run(body, publisher_factory)


# ---- local adapter only --------------------------------------------------------------
def test_local_outbox_keeps_the_properties_of_the_first_send(tmp_path: Any) -> None:
    from worker.local.outbox import LocalOutbox

    async def main() -> None:
        outbox = LocalOutbox(tmp_path / "outbox.db")
        await outbox.publish("exp_1", event("exp_1"), {"format": "csv", "traceparent": "00-a"})
        await outbox.publish("exp_1", event("exp_1"), {"format": "xml"})  # duplicate: dropped
        await outbox.publish("exp_2", event("exp_2"))
        assert await outbox.sent_properties("exp_1") == {"format": "csv", "traceparent": "00-a"}
        assert await outbox.sent_properties("exp_2") == {}
        assert await outbox.sent_properties("exp_unknown") == {}
        await outbox.close()

    asyncio.run(main())


def test_local_outbox_refuses_to_publish_once_closed(tmp_path: Any) -> None:
    from worker.local.outbox import LocalOutbox

    async def main() -> None:
        outbox = LocalOutbox(tmp_path / "outbox.db")
        await outbox.publish("exp_1", event("exp_1"))
        await outbox.close()
        with pytest.raises(RuntimeError, match="closed"):
            await outbox.publish("exp_2", event("exp_2"))
        reopened = LocalOutbox(tmp_path / "outbox.db")
        assert [body["export_id"] for body in await reopened.sent()] == ["exp_1"]
        await reopened.close()

    asyncio.run(main())
