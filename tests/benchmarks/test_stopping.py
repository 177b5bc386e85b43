"""A benchmark stopped with SIGTERM (or Ctrl-C) leaves no measured worker or server behind.

Before, SIGTERM ended a benchmark at once: `run_all.py` and `azure_turns.py` left the
emulators they had started running (in sessions of their own), and `subprocess.run`
SIGKILLed `launch.py`, whose worker ran on alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.processes import (
    assert_stopped_and_waited_for,
    children_started,
    draining_in,
    left_in,
    wait_until,
)
from tests.benchmarks.script_runs import BENCHMARKS, benchmark_module, script_env

# A benchmark in miniature: `stoppable(main)` measuring a worker through `launch.py` with
# `run_stoppably`, and a `finally` that must run. The "worker" says when it is waiting and
# what it did with the SIGTERM it was passed.
BENCHMARK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from stopping import run_stoppably, stoppable

    here = Path.cwd()
    WORKER = (
        "import signal, sys, time\\n"
        "from pathlib import Path\\n"
        "def stop(signum, frame):\\n"
        "    time.sleep(0.3)\\n"  # a worker's grace period, in miniature
        "    Path('worker-stopped').write_text('stopped')\\n"
        "    sys.exit(0)\\n"
        "signal.signal(signal.SIGTERM, stop)\\n"
        "Path('worker-waiting').write_text('waiting')\\n"
        "time.sleep(120)\\n"
    )

    def main():
        try:
            run_stoppably([
                sys.executable, "-S", sys.argv[1] + "/launch.py", "out", "err", str(here), "--",
                sys.executable, "-c", WORKER,
            ])
        finally:
            Path("benchmark-unwound").write_text("unwound")
        return 0

    sys.exit(stoppable(main))
    """
)


@pytest.mark.parametrize(
    ("stop", "exit_code"),
    [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)],  # Ctrl-C
    ids=["SIGTERM", "SIGINT"],
)
def test_a_stopped_benchmark_passes_the_stop_to_its_worker_and_waits_for_it(
    tmp_path: Path, stop: signal.Signals, exit_code: int
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", BENCHMARK, str(BENCHMARKS)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until((tmp_path / "worker-waiting").exists, 30, "the worker")
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == exit_code, err
    # The worker had stopped (after its grace) by the time the benchmark exited.
    assert (tmp_path / "worker-stopped").exists(), err
    assert (tmp_path / "benchmark-unwound").exists(), err
    assert left_in(tmp_path) == []


def test_run_all_stopped_mid_measurement_stops_its_worker_and_deletes_its_homes(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "run_all.py"), "--quick"],
        cwd=tmp_path,
        env=script_env(tmp_path),  # its scratch homes, in here
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: draining_in(tmp_path), 120, "a measured worker")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert left_in(tmp_path) == []
    assert [p for p in tmp_path.glob("export-bench-*") if p.is_dir()] == [], err[-2000:]
    # ... and left the mark a later timed run reads, as after any run's deletion.
    assert (tmp_path / "export-bench-deleted").exists()


def test_a_stop_that_comes_as_the_child_starts_still_stops_the_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A SIGTERM that came while `Popen` was setting up a child it had already started
    # unwound out of `Popen`: nothing named the child, so it was never stopped.
    stopping = benchmark_module("stopping")
    started = children_started(monkeypatch, stopping_each=True)
    child = [sys.executable, "-c", "import time; time.sleep(60)"]
    code = stopping.stoppable(lambda: stopping.run_stoppably(child).returncode)
    assert code == 128 + signal.SIGTERM
    assert_stopped_and_waited_for(started)


# launch.py run with its fork made to deliver a SIGTERM to the launcher in the moment after
# the child is forked, before the launcher could know it.
LAUNCH_STOPPED_AT_FORK = textwrap.dedent(
    """
    import importlib.util, os, signal, sys
    spec = importlib.util.spec_from_file_location("launch", sys.argv[1])
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    fork = os.fork

    def fork_then_stop():
        pid = fork()
        if pid:
            os.kill(os.getpid(), signal.SIGTERM)
        return pid

    os.fork = fork_then_stop
    sys.argv = ["launch.py", "out", "err", ".", "--", "/bin/sleep", "60"]
    sys.exit(launch.main())
    """
)


def test_a_stop_that_comes_as_the_launcher_forks_reaches_its_child(tmp_path: Path) -> None:
    # It used to end the launcher before its handler knew the child, which then ran on
    # alone: 60 workers of 500 under load.
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH_STOPPED_AT_FORK, str(BENCHMARKS / "launch.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout)["exit"] == -signal.SIGTERM  # passed on, and reaped
    finally:
        for line in left_in(tmp_path):
            os.kill(int(line.split()[0]), signal.SIGKILL)


def test_a_child_that_runs_to_its_end_is_returned_as_subprocess_run_returns_it() -> None:
    stopping = benchmark_module("stopping")
    child = [
        sys.executable,
        "-c",
        "import os, sys; print('out'); print('err', file=sys.stderr);"
        " sys.exit(3 if os.getsid(0) == os.getpid() else 4)",
    ]
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    done = stopping.run_stoppably(child)
    # Exit 3: the child leads a session of its own, so a terminal's Ctrl-C reaches only us.
    assert (done.args, done.returncode, done.stdout, done.stderr) == (child, 3, "out\n", "err\n")
    # The stops held while it started are handed back.
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_a_stopped_child_that_ignores_sigterm_is_killed_after_its_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stopping = benchmark_module("stopping")
    monkeypatch.setattr(stopping, "CHILD_STOP_SECONDS", 0.5)
    started = children_started(monkeypatch)
    ready = tmp_path / "ignoring"
    child = [
        sys.executable,
        "-c",
        "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " pathlib.Path(sys.argv[1]).touch(); time.sleep(60)",
        str(ready),
    ]

    def stop_when_ready() -> None:
        wait_until(ready.exists, 30, "the child to ignore SIGTERM")
        os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop_when_ready)
    stopper.start()
    began = time.monotonic()
    try:
        code = stopping.stoppable(lambda: stopping.run_stoppably(child).returncode)
    finally:
        stopper.join(timeout=30)
        for proc in started:
            proc.kill()
            proc.wait()
    assert code == 128 + signal.SIGTERM
    (proc,) = started
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - began < 30


def test_a_benchmark_that_ends_hands_sigterm_back_to_the_handler_before_it() -> None:
    stopping = benchmark_module("stopping")
    before = signal.getsignal(signal.SIGTERM)
    assert stopping.stoppable(lambda: 7) == 7
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_child_run_from_another_thread_runs_with_the_handlers_left_alone() -> None:
    # Only the main thread may set signal handlers (and only it runs them): called from
    # another thread, run_stoppably holds no stop and the child runs.
    stopping = benchmark_module("stopping")
    done: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            done.append(stopping.run_stoppably([sys.executable, "-c", "print('ran')"]))
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert errors == [] and [d.stdout for d in done] == ["ran\n"]
