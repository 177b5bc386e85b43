"""Watching the processes a benchmark starts, for the tests: which live processes work
inside a folder (from /proc), and the children `subprocess.Popen` starts, recorded, or
stopped with SIGTERM as each starts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def wait_until(condition: Callable[[], object], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def processes_in(folder: Path) -> list[int]:
    """Processes (other than this one) whose working directory is inside FOLDER."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(int(entry.name))
    return found


def command_line(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def state(pid: int) -> str:
    """The process's state letter (R, S, D, Z, ...), or "gone"."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def alive(pid: int) -> bool:
    return state(pid) not in ("gone", "Z")


def draining_in(folder: Path) -> bool:
    """Whether a `run --drain` (or a launcher of one) is working inside FOLDER."""
    return any(b"--drain" in command_line(pid) for pid in processes_in(folder) if alive(pid))


def left_in(folder: Path) -> list[str]:
    """The live processes working inside FOLDER: pid, state and command line of each."""
    found = []
    for pid in processes_in(folder):
        if alive(pid):
            command = command_line(pid).replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{pid} {state(pid)} {command[:300]}")
    return found


def children_started(
    monkeypatch: pytest.MonkeyPatch, *, stopping_each: bool = False
) -> list[subprocess.Popen[Any]]:
    """Record each child `subprocess.Popen` starts, as it is. With STOPPING_EACH, also send
    this process SIGTERM as each child starts, before `Popen` has returned."""
    started: list[subprocess.Popen[Any]] = []

    class Recorded(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)
            if stopping_each:
                os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    return started


def assert_stopped_and_waited_for(started: list[subprocess.Popen[Any]]) -> None:
    """The one child started ended on SIGTERM and was reaped (it is killed either way)."""
    (proc,) = started
    try:
        assert proc.poll() == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
