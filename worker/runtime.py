"""The worker runtime: receive, lock, settle, retry, dead-letter, shut down.

N session workers share one queue. Each accepts the next available session (one holder at a
time, FIFO inside it), serves what is queued on it, then releases it at once: a session with
nothing to deliver is never held while another conversation's turn waits. Each message's
fate is decided from the handler's outcome by `worker/settlement.py` and performed here.
SIGTERM/SIGINT stop taking sessions; work in flight gets the grace period, then is
abandoned (redelivered later).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from structlog.contextvars import bound_contextvars, get_contextvars

from worker.logs import get_logger
from worker.observer import NO_OBSERVER, Handling, RuntimeObserver
from worker.ports import Consumer, LockLost, QueueMessage, Session
from worker.retry_policy import RetryPolicy, doubling
from worker.settlement import Abandon, Complete, DeadLetter, settle, where_raised

if TYPE_CHECKING:  # the record's struct is imported by the turns that build one
    from schemas.records import TurnRecord

# How long an accept waits for a session. On Service Bus every accept is a new receiver and
# AMQP connection (the SDK's), so an idle session worker pays one a wait: at 1 s, an idle
# replica of 4 made 4 connections and 4 billed operations a second. The Azure adapter asks
# the service for at most half the SDK's timeout (15 s at its default): this asks for all of
# it. A stop cuts a waiting accept short (`_accept`), so the wait never delays a shutdown.
ACCEPT_WAIT_SECONDS = 15.0
# A failed accept (Service Bus unreachable) is tried again after 1 s, then 2, 4, … up to
# this: an outage costs a session worker a log line a minute, not one a second, and the
# worker is back within this long of Service Bus.
ACCEPT_RETRY_MAX_SECONDS = 60.0
# While draining, how long a worker that found no session pauses before it looks again
# (something is still in flight, locked or scheduled for later).
DRAIN_POLL_SECONDS = 0.05
# A session that failed (its receive, or a settlement) is let go, then the worker waits this
# long before its next accept, doubled at each failure in a row up to ACCEPT_RETRY_MAX_SECONDS:
# a receive that always fails costs a log line a minute, not five a second (each a new AMQP
# connection on Service Bus).
SESSION_RETRY_SECONDS = 0.2

# The queue's calls a drain gives up on, each timed on its own (`Runtime._failing_left`).
ACCEPT = "session accept"
RECEIVE = "receive"
DRAINED_CHECK = "empty-queue check"


class RunStats(msgspec.Struct):
    """Counters for one run, printed by `run` on exit."""

    completed: int = 0
    dead_lettered: int = 0
    retried: int = 0
    lock_lost: int = 0
    by_decision: dict[str, int] = msgspec.field(default_factory=dict)


class DrainGaveUp(Exception):
    """`run --drain` found one of its queue's calls (accepts, receives or empty-queue checks)
    failing every time for the give-up time: the drain ends (exit 1), and what is still
    queued waits for the next worker."""


class LockLostEvent(asyncio.Event):
    """Set by the renewer when a renewal reports the session's lock lost, with why."""

    def __init__(self) -> None:
        super().__init__()
        self.error: LockLost | None = None

    def lost(self, error: LockLost) -> None:
        self.error = error
        self.set()

    def described(self) -> str | None:
        """Where and why the lock was lost (`where_raised`), once it was."""
        return None if self.error is None else where_raised(self.error)


def _lapsed(lock_duration: float, failure: Exception) -> LockLost:
    """The lock of a session no renewal extended for `lock_duration`, raised here from the
    last renewal's `failure`: the log says where, and from what."""
    try:
        raise LockLost(
            f"no renewal succeeded for {lock_duration:g} s: the lock lapsed"
        ) from failure
    except LockLost as lapsed:
        return lapsed


class MessageHandler(Protocol):
    """What the runtime needs of a handler: a message in, its turn record out, or an error
    whose kind decides the message's fate (`worker/settlement.py`)."""

    async def handle(self, message: QueueMessage) -> TurnRecord:
        """Process one message to the end."""
        ...


class Runtime:
    """Serves sessions from `queue` with `handler` until stopped (or drained)."""

    def __init__(
        self,
        handler: MessageHandler,
        queue: Consumer,
        *,
        concurrency: int,
        retry: RetryPolicy,
        lock_duration: float,
        session_idle: float,
        shutdown_grace: float,
        observer: RuntimeObserver = NO_OBSERVER,
        on_stop: Callable[[], None] | None = None,
        drain_give_up: float = math.inf,
    ) -> None:
        """`on_stop`: called once when the runtime stops taking sessions (SIGTERM, drained,
        given up), before the grace period: readiness says `closed` from then on.
        `drain_give_up`: how long a drain tries a queue call that fails every time (`run`'s
        is DRAIN_GIVE_UP_SECONDS): it cannot learn that the queue is empty, or cannot take
        what is in it, and a batch job must end. Without `drain` the runtime tries for as
        long as it runs."""
        self.handler = handler
        self.queue = queue
        self.concurrency = concurrency
        self.retry = retry
        self.lock_duration = lock_duration
        self.session_idle = session_idle
        self.shutdown_grace = shutdown_grace
        self.observer = observer  # metrics, liveness and spans hear of each step
        self.stats = RunStats()
        self._on_stop = on_stop
        self._stopping = asyncio.Event()
        self._in_flight = 0
        self._log = get_logger()
        self.drain_give_up = drain_give_up
        self._draining = False  # `run(drain=True)`: the run ends once the queue is empty
        # While draining: per kind of queue call, since when every one has failed (the
        # loop's clock). Timed apart, so that one kind working does not hide another that
        # never does: empty-queue checks answering "not yet" while every accept fails, or a
        # session worker's empty accept while another's every receive fails.
        self._failing_since: dict[str, float] = {}
        self._gave_up: DrainGaveUp | None = None

    def stop(self) -> None:
        """Stop taking sessions; what is in flight finishes within the grace period."""
        if not self._stopping.is_set():
            self._log.info("worker_stopping")
            if self._on_stop is not None:
                self._on_stop()
        self._stopping.set()

    async def run(self, *, drain: bool = False) -> RunStats:
        """Serve until stopped; with `drain`, until the queue is empty and nothing is in flight."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        self._draining = drain
        self._log.info("worker_started", concurrency=self.concurrency, drain=drain)
        self.observer.loop_started()
        workers = [asyncio.create_task(self._serve()) for _ in range(self.concurrency)]
        try:
            await asyncio.gather(*workers)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        self._log.info("worker_stopped", **_stats_fields(self.stats))
        if self._gave_up is not None:
            raise self._gave_up
        return self.stats

    async def _serve(self) -> None:
        # With --drain, an empty queue is seen before an accept waits (an accept that finds
        # nothing takes its whole wait, and more on Service Bus), and an accept does not
        # wait at all: what is queued is already there.
        drain = self._draining
        accept_wait = 0.0 if drain else ACCEPT_WAIT_SECONDS
        idle = True
        failed_accepts = 0
        failed_sessions = 0
        while not self._stopping.is_set():
            if drain and idle and self._in_flight == 0 and await self._drained():
                self.stop()
                return
            if self._stopping.is_set():
                return  # stopped while it asked: a signal, or a drain that gave up
            try:
                with self.observer.waiting(accept_wait):
                    session = await self._accept(accept_wait)
            except Exception as exc:  # a port's error, or an SDK's the adapter let through
                left = self._failing_left(ACCEPT)
                retry_in = min(doubling(failed_accepts, 1.0, ACCEPT_RETRY_MAX_SECONDS), left)
                failed_accepts += 1
                self._log.warning(
                    "session_accept_failed",
                    error=where_raised(exc),
                    failures=failed_accepts,
                    retry_in=retry_in,
                )
                if left <= 0:
                    self._give_up(ACCEPT, exc)
                await self._pause(retry_in)
                continue
            failed_accepts = 0
            self._worked(ACCEPT)
            idle = session is None
            if session is None:
                if drain:
                    if self._in_flight == 0 and await self._drained():
                        self.stop()
                        return
                    # Something is queued but not deliverable yet (a retry's backoff, a
                    # session a killed worker held): look again shortly, not at once.
                    await self._pause(DRAIN_POLL_SECONDS)
                continue
            self._in_flight += 1
            self.observer.session_acquired()
            retry_in = 0.0
            try:
                await self._serve_session(session)
                failed_sessions = 0
            except Exception as exc:
                # A receive, or a store or queue failure while settling: a received message's
                # lock lapses and it is redelivered; this worker keeps serving other sessions.
                retry_in = min(
                    doubling(failed_sessions, SESSION_RETRY_SECONDS, ACCEPT_RETRY_MAX_SECONDS),
                    self._time_left(RECEIVE),
                )
                failed_sessions += 1
                self._log.warning(
                    "session_failed",
                    session_id=session.session_id,
                    error=where_raised(exc),
                    failures=failed_sessions,
                    retry_in=retry_in,
                )
            finally:
                self._in_flight -= 1
                with contextlib.suppress(Exception):
                    await session.close()
                self.observer.session_released()
            if retry_in:
                # After the close: a session is not held, locked, through the wait.
                await self._pause(retry_in)

    async def _serve_session(self, session: Session) -> None:
        # Every line logged while the session is held names it, the renewer's included.
        with bound_contextvars(session_id=session.session_id):
            # The session lock is renewed for as long as the session is held, not only while
            # a message is handled: receiving does not extend it (Service Bus semantics).
            lock_lost = LockLostEvent()
            renewer = asyncio.create_task(self._renew(session, lock_lost))
            # The first receive waits for the head that made the session available; after
            # a settled message the session is released at once unless its next message is
            # already queued (a later one makes the session available again).
            wait = self.session_idle
            try:
                while not self._stopping.is_set():
                    with self.observer.waiting(wait):
                        message = await self._receive(session, wait)
                    if message is None:
                        return
                    await self._process(session, message, lock_lost)
                    if lock_lost.is_set():
                        return  # the session is over; its turn was cancelled and counted
                    wait = 0.0
            except LockLost as exc:
                self.stats.lock_lost += 1
                self.observer.session_lock_lost()
                self._log.warning("session_lock_lost", error=where_raised(exc))
            finally:
                renewer.cancel()
                with contextlib.suppress(BaseException):
                    await renewer

    async def _process(
        self, session: Session, message: QueueMessage, lock_lost: LockLostEvent
    ) -> None:
        with (
            bound_contextvars(**_message_ids(message)),
            self.observer.handling(message) as handling,
        ):
            # The handler runs in a context of its own and binds the event's ids there once
            # it has parsed them; they join the message's ids for the settlement's lines.
            handled = contextvars.copy_context()
            work = asyncio.create_task(self.handler.handle(message), context=handled)
            finished = await self._until_done_or_grace(work, lock_lost)
            handling.handled()
            if not finished:
                work.cancel()
                with contextlib.suppress(BaseException):
                    await work
            with bound_contextvars(**handled.run(get_contextvars)):
                try:
                    if not finished and lock_lost.is_set():
                        # Another holder may take the turn now: this one stopped before its
                        # next effect. The abandon only counts the delivery if the lock was
                        # still ours (a renewal cap); a lock truly gone refuses it.
                        self._log.warning(
                            "turn_cancelled_on_lock_lost", error=lock_lost.described()
                        )
                        with contextlib.suppress(Exception):
                            await session.abandon(message)
                        self.stats.lock_lost += 1
                        handling.lock_lost()
                        return
                    if not finished:
                        self._log.warning("turn_abandoned_on_shutdown")
                        with contextlib.suppress(Exception):
                            await session.abandon(message)
                        handling.abandoned()
                        return
                    await self._settle(session, message, work, handling)
                except LockLost as exc:
                    if lock_lost.is_set():
                        raise  # the session is over: _serve_session counts it
                    self.stats.lock_lost += 1
                    handling.lock_lost()
                    self._log.warning("message_lock_lost", error=where_raised(exc))

    async def _receive(self, session: Session, wait: float) -> QueueMessage | None:
        """The session's next message, or None; while draining, a receive that fails is
        timed as the queue's other calls are, and a message received ends every failing
        time (the queue delivers)."""
        try:
            message = await session.receive(wait)
        except LockLost:
            raise
        except Exception as exc:
            if self._failing_left(RECEIVE) <= 0:
                self._give_up(RECEIVE, exc)
            raise
        if message is None:
            self._worked(RECEIVE)
        else:
            self._failing_since.clear()
        return message

    async def _until_done_or_grace(self, work: asyncio.Task[Any], lock_lost: asyncio.Event) -> bool:
        """Wait for `work`; once stopping, at most the grace period; not past a lost lock.
        Whether it finished."""
        stopping = asyncio.create_task(self._stopping.wait())
        lost = asyncio.create_task(lock_lost.wait())
        try:
            await asyncio.wait({work, stopping, lost}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done() and not lock_lost.is_set():
                await asyncio.wait(
                    {work, lost}, timeout=self.shutdown_grace, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            stopping.cancel()
            lost.cancel()
        return work.done()

    async def _settle(
        self,
        session: Session,
        message: QueueMessage,
        work: asyncio.Task[TurnRecord],
        handling: Handling,
    ) -> None:
        """Perform the fate `settlement.settle` gives the handler's outcome."""
        failure = work.exception()
        if isinstance(failure, LockLost):
            raise failure
        try:
            await self._perform(session, message, work, failure, handling)
        except LockLost:
            raise
        except Exception:
            # The verdict could not be stored (the queue refused it, or failed). Closing the
            # session would release the message uncounted, and a verdict that always fails
            # would come back for ever, holding up the conversation's later turns. Abandoned,
            # the delivery counts: the queue dead-letters it after its maximum.
            with contextlib.suppress(Exception):
                await session.abandon(message)
            raise

    async def _perform(
        self,
        session: Session,
        message: QueueMessage,
        work: asyncio.Task[TurnRecord],
        failure: BaseException | None,
        handling: Handling,
    ) -> None:
        match settle(failure, message.delivery_count, self.retry):
            case Complete():
                decision = work.result().decision
                await session.complete(message)
                self.stats.completed += 1
                self.stats.by_decision[decision] = self.stats.by_decision.get(decision, 0) + 1
                handling.completed(decision)
            case Abandon(delay=delay, reason=reason):
                self._log.info(
                    "turn_retry_scheduled",
                    reason=reason,
                    attempt=message.delivery_count,
                    delay_seconds=delay,
                )
                await session.abandon(message, delay)
                self.stats.retried += 1
                handling.retried()
            case DeadLetter(reason=reason, description=description):
                if reason == "handler_error":
                    # A bug: the log renders its type and frames, never its message (row
                    # data may be in it: worker/logs.py).
                    self._log.error("handler_failed", error=description, exc_info=failure)
                await session.dead_letter(message, reason, description)
                self.stats.dead_lettered += 1
                handling.dead_lettered(reason)
                self._log.warning("message_dead_lettered", reason=reason)

    async def _renew(self, session: Session, lock_lost: LockLostEvent) -> None:
        """Renew the session lock well before it lapses, for as long as the session is held;
        a lock reported lost sets `lock_lost`, which stops the turn in flight. So does a
        lock no renewal extended for a whole lock duration (each failed, as on a network
        that stopped answering): it has lapsed at the queue whatever the failures said."""
        interval = max(0.05, self.lock_duration / 3)
        extended_at = self._now()  # the accept's lock, then each renewal's (sent at)
        while True:
            await asyncio.sleep(interval)
            sent_at = self._now()
            try:
                await session.renew_lock()
            except LockLost as exc:
                lock_lost.lost(exc)
                return
            except Exception as exc:  # tried again at the next interval, while the lock lasts
                self._log.warning("lock_renewal_failed", error=where_raised(exc))
                if self._now() - extended_at >= self.lock_duration:
                    lock_lost.lost(_lapsed(self.lock_duration, exc))
                    return
            else:
                extended_at = sent_at

    async def _drained(self) -> bool:
        """Whether the queue is drained; a check that failed says no (asked again later)."""
        try:
            drained = await self.queue.is_drained()
        except Exception as exc:
            self._log.warning("drain_check_failed", error=where_raised(exc))
            left = self._failing_left(DRAINED_CHECK)
            if left <= 0:
                self._give_up(DRAINED_CHECK, exc)
            await self._pause(min(1.0, left))
            return False
        self._worked(DRAINED_CHECK)
        return drained

    def _failing_left(self, call: str) -> float:
        """After a failed queue `call`: how long calls of its kind may go on failing before
        the drain gives up (0: now; without `--drain`, for ever). One that works starts it
        over (`_worked`), and so does a message received."""
        if self._draining:
            self._failing_since.setdefault(call, self._now())
        return self._time_left(call)

    def _time_left(self, call: str) -> float:
        """How long calls of this kind, failing since `_failing_since`, may go on failing
        (for ever if they are not failing, or the run is not a drain)."""
        since = self._failing_since.get(call)
        if since is None:
            return math.inf
        return max(self.drain_give_up - (self._now() - since), 0.0)

    def _worked(self, call: str) -> None:
        self._failing_since.pop(call, None)

    def _give_up(self, call: str, exc: Exception) -> None:
        """End a drain whose `call` has failed every time for `drain_give_up` seconds: what
        is in flight gets the grace period, then `run` raises DrainGaveUp (exit 1)."""
        if self._stopping.is_set():
            return  # stopping already (SIGTERM, drained): that stop is the run's end
        failing = self._now() - self._failing_since[call]
        error = where_raised(exc)
        self._log.error("drain_gave_up", call=call, failing_seconds=round(failing, 1), error=error)
        self._gave_up = DrainGaveUp(
            f"every {call} failed for {failing:.0f} s while draining (its last error: {error})"
        )
        self.stop()

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    async def _accept(self, wait: float) -> Session | None:
        """The queue's next session, or None; a stop ends a waiting accept at once.

        The accept is cancelled, and waited for while it cleans up: an adapter gives back
        what it opened (on Service Bus, the receiver and its connection, which also lets
        go of a session locked in that instant; no message was received on it)."""
        if wait <= 0:
            return await self.queue.accept_session(wait)
        accept = asyncio.ensure_future(self.queue.accept_session(wait))
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait((accept, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not accept.done():
                accept.cancel()
                await asyncio.wait((accept,))
        if accept.cancelled():
            return None
        return accept.result()

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds`, less if the worker stops. `asyncio.timeout`, not `wait_for`: before
        Python 3.12, `wait_for` drops a cancellation that arrives as the stop does (gh-86296)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stopping.wait()


def _message_ids(message: QueueMessage) -> dict[str, Any]:
    """What every line logged about a message names, bound once per message."""
    return {
        "session_id": message.session_id,
        "message_id": message.message_id,
        "sequence_number": message.sequence_number,
        "delivery_count": message.delivery_count,
    }


def _stats_fields(stats: RunStats) -> dict[str, Any]:
    return {
        "completed": stats.completed,
        "dead_lettered": stats.dead_lettered,
        "retried": stats.retried,
        "lock_lost": stats.lock_lost,
    }
