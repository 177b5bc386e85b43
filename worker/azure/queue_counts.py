"""How much the Service Bus queue holds, for `is_drained` (`run --drain`) and `stats`
(`status`), by one of two paths:

- **runtime counts** from the administration client (ATOM over HTTPS): exact active and
  scheduled counts, cheap, but they need Manage rights (or the Data Owner role) and an
  HTTPS endpoint, which a development emulator does not serve. A 401/403 or an endpoint
  that cannot be reached turns this path off for good (logged once); so does a
  `UseDevelopmentEmulator=true` connection string from the start.
- **AMQP**, with the rights the worker has anyway: the session browser lists the
  sessions holding messages; for `stats`, each of them is opened by name for a moment and
  its messages peeked (counted, oldest enqueue time). A session another receiver holds
  cannot be opened: it counts as one message (the one in flight; what waits behind it is
  not seen) and the oldest age is then unknown (None). One link per session: fine for an
  operator's command, not for a dashboard polling a queue of thousands of sessions.

The session browser runs on a client of its own, closed after each listing: an iterator
left part-way (a full first page) otherwise keeps its AMQP connection open until the
client closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import msgspec
from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import HttpResponseError, ServiceRequestError
from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.exceptions import SessionCannotBeLockedError

from worker.azure.credentials import is_development_emulator, servicebus_admin, servicebus_client
from worker.azure.sessions import MIN_WAIT_SECONDS, close_quietly
from worker.azure.timeouts import BACKSTOP_SECONDS, SERVICE_BUS, guarded, refused
from worker.logs import get_logger
from worker.ports import TransientError
from worker.ports.queue import utc_text
from worker.settings import Settings

PEEK_PAGE = 100

log = get_logger()


class ActiveMessages(msgspec.Struct, frozen=True):
    """Messages queued, scheduled or locked, and the oldest enqueue time when known."""

    count: int
    oldest_enqueued_at: str | None


class QueueCounts:
    """Counts of the queue `settings.queue_name` (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        credential: AsyncTokenCredential | None,
        sessions_client: ServiceBusClient,
        *,
        use_admin_counts: bool | None,
        admin_options: Mapping[str, Any] | None = None,
    ) -> None:
        """`use_admin_counts` None: on unless the connection string names a development
        emulator; `admin_options` go to the administration client (a test's transport)."""
        self._settings = settings
        self._queue = settings.queue_name
        self._timeout = settings.sdk_timeout_seconds
        self._credential = credential
        self._sessions_client = sessions_client
        if use_admin_counts is None:
            use_admin_counts = not is_development_emulator(settings)
        self._use_admin = use_admin_counts
        self._admin_options = dict(admin_options or {})
        self._checking: asyncio.Future[bool] | None = None

    async def any_active(self) -> bool:
        """Whether anything is queued, scheduled or locked. Callers asking at the same time
        (every session worker of a draining run) share one check."""
        if self._checking is None or self._checking.done():
            self._checking = asyncio.ensure_future(self._any_active())
        return await asyncio.shield(self._checking)

    async def _any_active(self) -> bool:
        counts = await self._runtime_counts()
        if counts is not None and counts > 0:
            return True
        for session_id in await self._session_ids():
            # The browser also lists a session holding only state: a worker's delivery
            # count (`sessions.py`) left by a worker killed between a verdict and clearing it.
            peeked = await self._peek_session(session_id, whole=False)
            if peeked is None or peeked:  # held by a receiver, or holding messages
                return True
        return False

    async def active(self) -> ActiveMessages:
        """How many messages are queued, scheduled or locked (see the module docstring)."""
        counts = await self._runtime_counts()
        if counts is not None:
            return ActiveMessages(counts, None)
        total, oldest, complete = 0, None, True
        for session_id in await self._session_ids():
            peeked = await self._peek_session(session_id)
            if peeked is None:  # held by another receiver: its message in flight
                total, complete = total + 1, False
                continue
            total += len(peeked)
            times = [raw.enqueued_time_utc for raw in peeked if raw.enqueued_time_utc]
            if times and (oldest is None or min(times) < oldest):
                oldest = min(times)
        return ActiveMessages(total, utc_text(oldest) if oldest and complete else None)

    async def _runtime_counts(self) -> int | None:
        """Active plus scheduled messages from the runtime counts; None when that path is
        off (or has just been turned off)."""
        if not self._use_admin:
            return None
        admin = servicebus_admin(self._settings, self._credential, **self._admin_options)
        try:
            async with admin:
                props = await guarded(
                    admin.get_queue_runtime_properties(self._queue),
                    self._timeout + BACKSTOP_SECONDS,
                    SERVICE_BUS,
                )
        except TransientError as exc:
            # A refusal comes out as a TransientError (retried on the data plane); here it
            # means the identity lacks Manage rights, which waiting does not grant.
            if isinstance(exc.__cause__, ServiceRequestError):
                self._give_up_admin("unreachable")
            elif refused(exc.__cause__):
                self._give_up_admin("not_authorized")
            else:
                raise
            return None
        except HttpResponseError as exc:
            if not refused(exc):
                raise
            self._give_up_admin("not_authorized")
            return None
        return (props.active_message_count or 0) + (props.scheduled_message_count or 0)

    def _give_up_admin(self, why: str) -> None:
        self._use_admin = False
        log.warning("servicebus_runtime_counts_unavailable", reason=why, fallback="amqp")

    async def _session_ids(self) -> list[str]:
        """Sessions holding messages or state, from a session browser on a client of its
        own."""
        client, _ = servicebus_client(self._settings, self._credential, try_timeout=self._timeout)
        timeout = self._timeout
        # The client holds its session browser by a weak reference only: the listing (which
        # holds the browser) stays referenced here until the client has closed it, or a
        # browser collected first would leave its connection open.
        sessions = client.list_queue_sessions(self._queue, timeout=timeout)

        async def listing() -> list[str]:
            found: list[str] = []
            async for session_id in sessions:
                found.append(session_id)
            return found

        try:
            return await guarded(listing(), timeout + BACKSTOP_SECONDS, SERVICE_BUS)
        finally:
            await close_quietly(client, timeout)

    async def _peek_session(
        self, session_id: str, *, whole: bool = True
    ) -> list[ServiceBusReceivedMessage] | None:
        """Every message of one session, peeked (`whole` False: its first page only, enough
        to tell whether it holds any); None when another receiver holds it."""
        receiver = self._sessions_client.get_queue_receiver(
            self._queue, session_id=session_id, max_wait_time=MIN_WAIT_SECONDS
        )
        try:
            try:
                await guarded(receiver.__aenter__(), self._timeout + BACKSTOP_SECONDS, SERVICE_BUS)
            except TransientError as exc:
                if isinstance(exc.__cause__, SessionCannotBeLockedError):
                    return None
                raise
            return await self._pages(receiver.peek_messages, whole=whole)
        finally:
            await close_quietly(receiver, self._timeout)

    async def _pages(
        self, peek: Callable[..., Awaitable[list[ServiceBusReceivedMessage]]], *, whole: bool
    ) -> list[ServiceBusReceivedMessage]:
        found: list[ServiceBusReceivedMessage] = []
        start = 1
        while True:
            page = await guarded(
                peek(max_message_count=PEEK_PAGE, sequence_number=start, timeout=self._timeout),
                self._timeout + BACKSTOP_SECONDS,
                SERVICE_BUS,
            )
            if not page:
                return found
            found.extend(page)
            if not whole:
                return found
            start = (page[-1].sequence_number or start) + 1
