"""How the last failed try of an adapter's own retries ended reaches whoever watches the call
(`worker.ports.watching_tries`): the adapters' guard for its deadline's text, the readiness
check for a dependency's error."""

from __future__ import annotations

import asyncio

from worker.ports import note_failed_try, watching_tries


def test_a_watch_sees_the_last_failed_try_noted_inside_it_and_every_open_watch_sees_it() -> None:
    with watching_tries() as outer:
        note_failed_try("connection refused")
        with watching_tries() as inner:
            error = ConnectionResetError(104, "reset")
            note_failed_try("connection reset", error)
        assert (inner.last, inner.error) == ("connection reset", error)
        note_failed_try("HTTP 503")  # after the inner watch closed: the outer's alone
    assert (outer.last, outer.error) == ("HTTP 503", None)
    assert inner.last == "connection reset"


def test_a_closed_watch_hears_nothing_more_and_a_note_with_none_open_goes_nowhere() -> None:
    with watching_tries() as closed:
        pass
    note_failed_try("connection refused")
    assert (closed.last, closed.error) == (None, None)


def test_a_task_started_inside_a_watch_notes_on_it() -> None:
    # the readiness check's reads run under asyncio.wait_for, in tasks of their own
    async def main() -> str | None:
        async def retrying() -> None:
            note_failed_try("host name not resolved")

        with watching_tries() as tries:
            await asyncio.wait_for(asyncio.ensure_future(retrying()), 1.0)
        return tries.last

    assert asyncio.run(main()) == "host name not resolved"
