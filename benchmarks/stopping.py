"""Stopping a benchmark without leaving its servers or measured workers behind.

A benchmark starts processes that outlive it unless told: Azurite and cosmosdb-server in
sessions of their own (`scripts/emulators.py`), `launch.py` and the worker it forks. By
default SIGTERM ends a Python process at once, with no `finally` run, and
`subprocess.run` answers an exception with SIGKILL, which a child cannot pass on. Here
SIGTERM unwinds the benchmark like an error (`Stopped`), and a child run through
`run_stoppably` is sent SIGTERM and waited for, so each `finally` on the way stops what it
started (`launch.py` passes the signal on to the worker it measures and waits for it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
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
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's Ctrl-C reaches only us; we stop the child
        **options,
    ) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            _stop(proc)
            raise
        return subprocess.CompletedProcess(proc.args, proc.wait(), out, err)


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to the child; SIGKILL to its process group if it has not ended in time."""
    proc.terminate()
    try:
        proc.communicate(timeout=CHILD_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
