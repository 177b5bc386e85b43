"""Stopping a benchmark without leaving its servers or measured workers behind.

A benchmark starts processes that outlive it unless told: Azurite and cosmosdb-server in
sessions of their own (`scripts/emulators.py`), `launch.py` and the worker it forks. By
default SIGTERM ends a Python process at once, with no `finally` run, and
`subprocess.run` answers an exception with SIGKILL, which a child cannot pass on. Here
SIGTERM unwinds the benchmark like an error (`Stopped`), and a child run through
`run_stoppably` is sent SIGTERM and waited for, so each `finally` on the way stops what it
started (`launch.py` passes the signal on to the worker it measures and waits for it). A
stop that comes while a child is being started waits until the child can be stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# How long a stopped child has to stop what it started (the stand-ins stop within ~5 s).
CHILD_STOP_SECONDS = 30.0


class Stopped(BaseException):
    """SIGTERM reached the benchmark. A BaseException, so that handlers of errors (a
    stand-in that failed to start is reported, not raised) let it through."""


def stoppable(main: Callable[[], int]) -> int:
    """Run `main` with SIGTERM raising `Stopped` where the process is; exit 128 + SIGTERM,
    as a process ended by the signal does, once everything has unwound."""

    def stopped(signum: int, frame: object) -> None:
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, stopped)
    try:
        return main()
    except Stopped:
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_stoppably(command: Sequence[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, capture_output=True, text=True, **options)`, except that when
    the wait ends in an exception (SIGTERM, Ctrl-C) the child gets SIGTERM, not SIGKILL, and
    is waited for before the exception goes on, so it can stop what it started."""
    proc: subprocess.Popen[str] | None = None
    try:
        # A stop that came while `Popen` was still starting the child would leave it unknown
        # to us, running: it is held until `proc` names the child, then raised here.
        with stops_held():
            proc = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,  # a terminal's Ctrl-C reaches only us; we stop the child
                **options,
            )
        out, err = proc.communicate()
    except BaseException:
        if proc is not None:
            _stop(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.wait(), out, err)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Record SIGTERM and SIGINT instead of acting on them; on leaving, give each one seen
    to the handler there was (which raises `Stopped` or KeyboardInterrupt, or ends the
    process). For starting a child: leave the block where the child, now named, is stopped
    on an exception."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers, and signals are run there
        return
    seen: list[int] = []
    held = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, lambda n, _: seen.append(n)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for stop in dict.fromkeys(seen):
            signal.raise_signal(stop)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the child; SIGKILL to its process group if it has not ended in time."""
    proc.terminate()
    try:
        proc.communicate(timeout=CHILD_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
