"""Port calls tried again in place (worker/call_retries.py): what a wrapped port hands out,
what passes through it, and streams opened again after a transient failure part-way.

The effects themselves (which calls are repeated at all) are pinned in test_ports.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Protocol

import pytest

from worker import call_retries
from worker.call_retries import retried
from worker.ports import Effect, TransientError, port_call
from worker.retry_policy import RetryPolicy

ITEMS = 5


class Reads(Protocol):
    @port_call(Effect.READ)
    async def look(self) -> int: ...

    @port_call(Effect.READ)
    def items(self) -> AsyncIterator[int]: ...


class Opens(Protocol):
    @port_call(Effect.ACQUIRE, opens=Reads)
    async def open(self) -> Reads | None: ...


class Opened:
    """Each stream of `items` fails at the index its opening is scripted with (None: never);
    `look` fails its first try. Every call, opening and closing is written to `events`."""

    def __init__(self, failures: list[int | None] | None = None, *, closes: bool = True) -> None:
        self.failures = list(failures or [])
        self.closes = closes
        self.events: list[str] = []
        self.tries = 0

    def look(self) -> Coroutine[Any, Any, int]:
        self.events.append("look")  # the call itself, before anything awaits it
        return self._look()

    async def _look(self) -> int:
        self.tries += 1
        if self.tries == 1:
            raise TransientError("503")
        return 7

    def items(self) -> Stream:
        opening = len([e for e in self.events if e.startswith("open")])
        fail_at = self.failures[opening] if opening < len(self.failures) else None
        self.events.append(f"open {opening}")
        return Stream(self, opening, fail_at)


class Stream:
    """An iterator that stays open after a failure until it is closed, as a paged query
    with a connection behind it does (an async generator would close itself)."""

    def __init__(self, owner: Opened, opening: int, fail_at: int | None) -> None:
        self._owner, self._opening, self._fail_at, self._next = owner, opening, fail_at, 0
        if owner.closes:
            self.aclose = self._aclose

    def __aiter__(self) -> Stream:
        return self

    async def __anext__(self) -> int:
        if self._next == self._fail_at:
            raise TransientError("connection reset part-way")
        if self._next == ITEMS:
            raise StopAsyncIteration
        self._next += 1
        return self._next - 1

    async def _aclose(self) -> None:
        self._owner.events.append(f"close {self._opening}")


class Opener:
    def __init__(self, opened: Opened | None) -> None:
        self.opened = opened
        self.name = "opener"  # not a call: passes through the wrapper as it is

    async def open(self) -> Opened | None:
        return self.opened

    async def poke(self) -> None:
        """A method no role of the wrapper declares."""


def policy(call_attempts: int = 4) -> RetryPolicy:
    return RetryPolicy.no_waiting(call_attempts=call_attempts)


async def read_all(port: Any) -> list[int]:
    return [item async for item in port.items()]


def test_a_stream_failing_part_way_is_opened_again_after_closing_and_skips_what_it_gave() -> None:
    opened = Opened([3, 1, None])
    items = asyncio.run(read_all(retried(opened, policy(), Reads)))
    assert items == list(range(ITEMS))
    assert opened.events == ["open 0", "close 0", "open 1", "close 1", "open 2"]


def test_a_stream_resumes_after_call_attempts_minus_one_failures_in_a_row() -> None:
    opened = Opened([2, 0, 0, None])  # three failures on the same item, then it reads
    assert asyncio.run(read_all(retried(opened, policy(4), Reads))) == list(range(ITEMS))


def test_a_stream_that_keeps_failing_gives_up_after_call_attempts_openings() -> None:
    opened = Opened([0] * 10)
    with pytest.raises(TransientError, match="part-way"):
        asyncio.run(read_all(retried(opened, policy(3), Reads)))
    assert [e for e in opened.events if e.startswith("open")] == ["open 0", "open 1", "open 2"]


def test_a_stream_waits_the_call_delay_before_each_opening_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(call_retries.asyncio, "sleep", sleep)
    waiting = RetryPolicy(base_seconds=0.4, max_seconds=30.0, call_attempts=4)
    opened = Opened([1, 1, 3, None])  # item 1 fails twice in a row, then item 3 once
    assert asyncio.run(read_all(retried(opened, waiting, Reads))) == list(range(ITEMS))
    assert waits == [waiting.call_delay(1), waiting.call_delay(2), waiting.call_delay(1)]
    assert 0 < waits[0] < waits[1]


def test_a_stream_without_aclose_is_opened_again_all_the_same() -> None:
    opened = Opened([2, None], closes=False)
    assert asyncio.run(read_all(retried(opened, policy(), Reads))) == list(range(ITEMS))
    assert opened.events == ["open 0", "open 1"]


def test_a_stream_whose_close_fails_is_opened_again_all_the_same() -> None:
    opened = Opened([2, None])

    async def broken_close() -> None:
        raise ConnectionResetError("already gone")

    original = opened.items

    def items() -> Stream:
        stream = original()
        stream.aclose = broken_close
        return stream

    opened.items = items  # type: ignore[method-assign]
    assert asyncio.run(read_all(retried(opened, policy(), Reads))) == list(range(ITEMS))


def test_closing_a_wrapped_stream_closes_the_one_being_read() -> None:
    opened = Opened([1, None])

    async def main() -> None:
        stream = retried(opened, policy(), Reads).items()
        assert [await anext(stream), await anext(stream)] == [0, 1]
        await stream.aclose()

    asyncio.run(main())
    assert opened.events == ["open 0", "close 0", "open 1", "close 1"]


def test_a_call_is_made_again_only_after_its_first_try_failed() -> None:
    opened = Opened()
    assert asyncio.run(retried(opened, policy(), Reads).look()) == 7
    assert (opened.events, opened.tries) == (["look", "look"], 2)


def test_what_a_call_opens_is_wrapped_for_the_role_it_declares() -> None:
    opened = Opened([2, None])

    async def main() -> None:
        port = await retried(Opener(opened), policy(), Opens).open()
        assert port is not opened
        assert await port.look() == 7  # its first try failed: tried again, as Reads declares
        assert await read_all(port) == list(range(ITEMS))
        assert await retried(Opener(None), policy(), Opens).open() is None  # nothing opened

    asyncio.run(main())


def test_attributes_that_are_no_call_pass_through_and_undeclared_methods_do_not() -> None:
    port = retried(Opener(None), policy(), Opens)
    assert port.name == "opener"
    with pytest.raises(AttributeError, match="poke is not a call of the roles"):
        port.poke  # noqa: B018
