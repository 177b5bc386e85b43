"""A long run: does a serving worker's memory, threads or open files grow with its turns?

    .venv/bin/python benchmarks/soak.py --output benchmarks/soak.md     # both backends
    .venv/bin/python benchmarks/soak.py --backend local --turns 50000   # one, more turns
    .venv/bin/python benchmarks/soak.py --backend azure --trace         # and the Python heap
    .venv/bin/python benchmarks/soak.py --quick                         # a smoke run

A replica runs for days and serves every conversation that reaches it, one Service Bus
session each; `run_all.py` measures a worker over 100 turns, too few for a slow leak to
show. This seeds TURNS copies of the headline fixture (one conversation each, so every turn
is a session of its own: a receiver opened and closed per turn on Service Bus), runs the
real worker on them and samples the process from /proc every INTERVAL seconds: its resident
set (VmRSS), threads and open file descriptors, beside the turns it has published so far
(its `turn_published` log lines, read as they are written).

- Local backend (10,000 turns by default): all seeded first, then `export-worker run --drain`.
- Azure backend (4,000 by default): on the stand-ins `azure_turns.py` finds or starts,
  `export-worker run` serves while the turns are seeded a wave at a time (`--wave`, 500);
  once a wave is served its messages are deleted (cosmosdb-server reads every stored message
  for each history query, so without it a turn would cost more with every conversation
  kept); after the last wave the worker is stopped with SIGTERM and must exit 0.

It prints the samples at each tenth of the turns, then the resident set's growth per 1,000
turns over the second half (a least-squares slope): start-up, the first message's code and
the allocator's warm-up land in the first half, so a slope that stays above zero there is
memory kept per turn. Every turn must be published, each from its two winning artifacts
(on the Azure backend also its export blob, its event and an empty queue); otherwise the
run fails. `--trace` runs the worker under tracemalloc and names the lines whose Python
heap grew across three snapshots over the second half (SIGUSR1 takes one).

The last line of stdout is one JSON object (what `tests/benchmarks` reads); `--output`
also writes the Markdown report.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO, Any

from azure_turns import (
    StandIns,
    Unavailable,
    check_outcome,
    create_resources,
    creating,
    stand_ins,
)
from run_all import (
    PYTHON,
    Failed,
    code_commit,
    commit_moved,
    delete_scratch,
    worker_env,
    workload,
)
from stopping import stoppable, stops_held

WORKER = str(Path(PYTHON).with_name("export-worker"))
ROOT = Path(__file__).resolve().parents[1]
REPORT = "benchmarks/soak.md"  # the committed report, as `code_commit` names it
PUBLISHED = b'"turn_published"'
TENTHS = 10


@dataclass(frozen=True)
class Sample:
    """One look at the worker process."""

    seconds: float  # since the worker was started
    published: int  # turns published so far
    rss_kb: int
    threads: int
    fds: int
    stopping: bool = False  # taken after the worker was sent SIGTERM


@dataclass(frozen=True)
class Soak:
    """What one soak run saw."""

    backend: str
    turns: int
    wall: float
    samples: tuple[Sample, ...]
    notes: tuple[str, ...]
    heap: tuple[float, list[HeapLine]] | None = None  # with --trace: the second half's growth
    command: str = "export-worker run --drain"

    def at_tenths(self) -> list[Sample]:
        """The first sample at or past each tenth of the turns (and the first one with any),
        none taken while the worker was stopping."""
        serving = [s for s in self.samples if not s.stopping]
        picked: list[Sample] = []
        for tenth in range(1, TENTHS + 1):
            goal = self.turns * tenth // TENTHS
            found = next((s for s in serving if s.published >= goal), None)
            if found is not None and found not in picked:
                picked.append(found)
        first = next((s for s in serving if s.published > 0), None)
        if first is not None and first not in picked:
            picked.insert(0, first)
        return picked

    def second_half(self) -> list[Sample]:
        """The samples taken while the second half of the turns was being served."""
        half = self.turns / 2
        return [s for s in self.samples if half <= s.published <= self.turns and not s.stopping]

    def growth_kb_per_1000(self) -> float | None:
        """The resident set's least-squares slope over the second half, per 1,000 turns."""
        return slope([(s.published, s.rss_kb) for s in self.second_half()], per=1000)


def slope(points: Sequence[tuple[float, float]], per: float) -> float | None:
    """Least-squares slope of y over x, times `per`; None without two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in points)
    variance = sum((x - mean_x) ** 2 for x, _ in points)
    return covariance / variance * per


# --------------------------------------------------------------------------------------
# Watching the worker
# --------------------------------------------------------------------------------------
def look(pid: int) -> tuple[int, int, int] | None:
    """VmRSS (KiB), threads and open descriptors of PID; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        return int(fields["VmRSS"].split()[0]), int(fields["Threads"]), fds
    except (KeyError, ValueError):
        return None  # a zombie has no VmRSS


def _count_published(stream: IO[bytes], log: IO[bytes], count: list[int]) -> None:
    """Copy the worker's log to LOG, counting its published turns in COUNT[0]."""
    for line in stream:
        log.write(line)
        if PUBLISHED in line:
            count[0] += 1


@dataclass(frozen=True)
class Watch:
    """How a run is watched."""

    turns: int
    interval: float  # seconds between samples
    trace: bool  # run the worker under tracemalloc, with heap snapshots over the second half
    scratch: Path  # where the worker's log and the snapshots go
    wave: int = 500  # turns seeded at a time on the Azure backend


# The worker's CLI under tracemalloc: SIGUSR1 dumps a snapshot of the Python heap (after a
# collection) into the folder named first; the CLI's `main` then runs as the console script's
# with the arguments after it.
TRACED = (
    "import gc, signal, sys, tracemalloc\n"
    "tracemalloc.start(16)\n"
    "folder, taken = sys.argv[1], []\n"
    "def snapshot(signum, frame):\n"
    "    gc.collect()\n"
    "    tracemalloc.take_snapshot().dump(f'{folder}/{len(taken)}.snapshot')\n"
    "    taken.append(signum)\n"
    "signal.signal(signal.SIGUSR1, snapshot)\n"
    "from worker.cli import main\n"
    "sys.argv = ['export-worker', *sys.argv[2:]]\n"
    "main()\n"
)
SNAPSHOT_AT = (0.5, 0.725, 0.95)  # of the turns: the second half's start, middle and end


class Watched:
    """A running `export-worker run`, sampled from /proc while the caller waits on it. Each
    tenth of the turns reached is told on stderr as it happens (a long run shows it moves)."""

    def __init__(self, home: Path, env: dict[str, str], watch: Watch, *arguments: str) -> None:
        self.watch = watch
        self.published = [0]
        self.samples: list[Sample] = []
        command = [WORKER, "run", *arguments]
        if watch.trace:
            (watch.scratch / "snapshots").mkdir()
            command = [PYTHON, "-c", TRACED, str(watch.scratch / "snapshots"), "run", *arguments]
        self._snapshots = list(SNAPSHOT_AT) if watch.trace else []
        self._told = 0
        self._stopping = False
        self._log = open(watch.scratch / "worker.log", "wb")  # noqa: SIM115 (closed in finish)
        self.started = time.perf_counter()
        try:
            self.worker = subprocess.Popen(
                command,
                cwd=home,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except BaseException:
            self._log.close()
            raise
        assert self.worker.stderr is not None
        self._reader = threading.Thread(
            target=_count_published, args=(self.worker.stderr, self._log, self.published)
        )
        self._reader.start()

    def sample_while(self, waiting: Callable[[], bool]) -> None:
        """Sample the worker every interval while it runs and `waiting()` holds."""
        while self.worker.poll() is None and waiting():
            self._sample()
            time.sleep(self.watch.interval)

    def _sample(self) -> None:
        seen = look(self.worker.pid)
        if seen is None:
            return
        done, turns = self.published[0], max(self.watch.turns, 1)
        seconds = time.perf_counter() - self.started
        self.samples.append(Sample(seconds, done, *seen, stopping=self._stopping))
        if done * TENTHS // turns > self._told:
            self._told = done * TENTHS // turns
            print(f"soak: {self.samples[-1]}", file=sys.stderr, flush=True)
        if self._snapshots and done >= self._snapshots[0] * turns:
            self._snapshots.pop(0)
            self.worker.send_signal(signal.SIGUSR1)

    def finish(self, stop: bool) -> tuple[int, float, list[Sample]]:
        """Wait for the worker to exit (after a SIGTERM if `stop`); its exit code, wall and
        samples, the last one with the count of turns as it ended."""
        if stop:
            self._sample()
            self.worker.send_signal(signal.SIGTERM)
            self._stopping = True
        self.sample_while(lambda: True)
        code = self.worker.wait()
        wall = time.perf_counter() - self.started
        self._reader.join()
        self._log.close()
        if self.samples:
            self.samples[-1] = replace(self.samples[-1], published=self.published[0])
        return code, wall, self.samples


@contextlib.contextmanager
def watching(home: Path, env: dict[str, str], watch: Watch, *arguments: str) -> Iterator[Watched]:
    """Start `export-worker run ARGUMENTS` in HOME, watched; if the block ends in an exception
    (an error, a stop), the worker is stopped, not left running. A stop that comes as the
    worker starts is held until it can be stopped."""
    watched: Watched | None = None
    try:
        with stops_held():
            watched = Watched(home, env, watch, *arguments)
        yield watched
    except BaseException:
        if watched is not None:
            watched.finish(stop=True)
        raise


def watched_run(home: Path, env: dict[str, str], watch: Watch) -> tuple[int, float, list[Sample]]:
    """Run `export-worker run --drain` in HOME; its exit code, wall and samples."""
    with watching(home, env, watch, "--drain") as watched:
        watched.sample_while(lambda: True)
    return watched.finish(stop=False)


@dataclass(frozen=True)
class HeapLine:
    """Python heap kept between the two snapshots, by the line that allocated it."""

    kb: float
    blocks: int
    where: str  # the allocating line
    via: str | None  # the project's line nearest to it on its largest call path, if another


def heap_growth(folder: Path, top: int = 8) -> tuple[float, list[HeapLine]] | None:
    """The traced heap's growth from the first snapshot to the last (KiB), and the lines that
    held more at each snapshot than at the one before, largest first: memory a turn in
    flight holds comes and goes between snapshots, memory kept per turn only grows."""
    import tracemalloc

    paths = [folder / f"{k}.snapshot" for k in range(len(SNAPSHOT_AT))]
    if not all(path.exists() for path in paths):
        return None
    snapshots = [tracemalloc.Snapshot.load(str(path)) for path in paths]
    first, last = snapshots[0], snapshots[-1]
    total = sum(s.size_diff for s in last.compare_to(first, "filename")) / 1024
    grew: set[Any] = set.intersection(
        *(
            {s.traceback[-1] for s in after.compare_to(before, "lineno") if s.size_diff > 0}
            for before, after in itertools.pairwise(snapshots)
        )
    )
    paths_by_size = last.compare_to(first, "traceback")
    lines = []
    for stat in last.compare_to(first, "lineno"):
        line = stat.traceback[-1]
        if line not in grew:
            continue
        path = next((p.traceback for p in paths_by_size if p.traceback[-1] == line), None)
        via = _nearest_own(path) if path is not None else None
        lines.append(HeapLine(stat.size_diff / 1024, stat.count_diff, _short(line), via))
        if len(lines) == top:
            break
    return total, lines


def _nearest_own(traceback: Any) -> str | None:
    """The most recent frame of the project's own code on a call path, if not the last."""
    own = [f for f in traceback if Path(f.filename).is_relative_to(ROOT)]
    if not own or own[-1] == traceback[-1]:
        return None
    return _short(own[-1])


def _short(frame: Any) -> str:
    """A frame as `package/module.py:line`, from the site packages or the project's root."""
    path = Path(frame.filename)
    if path.is_relative_to(ROOT):
        return f"{path.relative_to(ROOT)}:{frame.lineno}"
    parts = path.parts
    for anchor in ("site-packages", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        if anchor in parts:
            parts = parts[parts.index(anchor) + 1 :]
            break
    return f"{'/'.join(parts[-3:])}:{frame.lineno}"


# --------------------------------------------------------------------------------------
# The two backends
# --------------------------------------------------------------------------------------
def soak_local(watch: Watch) -> Soak:
    """The turns on the local backend."""
    home = watch.scratch / "home"
    home.mkdir()
    env = worker_env(home)
    manifest = workload("seed-headline", home, "--turns", str(watch.turns), env=env)
    code, wall, samples = watched_run(home, env, watch)
    if code != 0:
        raise Failed(f"the worker exited {code}; its log: {watch.scratch / 'worker.log'}")
    notes = check_outcome(workload("outcome", home, env=env), manifest, watch.turns, None, Failed)
    return _soak("local", watch, wall, samples, notes)


def _soak(
    backend: str,
    watch: Watch,
    wall: float,
    samples: list[Sample],
    notes: list[str],
    command: str = "export-worker run --drain",
) -> Soak:
    heap = heap_growth(watch.scratch / "snapshots") if watch.trace else None
    return Soak(backend, watch.turns, wall, tuple(samples), tuple(notes), heap, command)


def soak_azure(watch: Watch) -> Soak:
    """The turns on the Azure backend's stand-ins (or a namespace's)."""
    with stand_ins(watch.scratch) as found:
        return _soak_on(found, watch)


def _soak_on(found: StandIns, watch: Watch) -> Soak:
    """The worker serves (`run`, stopped with SIGTERM at the end) while the turns are seeded
    a wave at a time; a served wave's messages are deleted before the next is seeded."""
    turns, home = watch.turns, watch.scratch / "home"
    home.mkdir()
    create_resources(home, found.env, watch.scratch, Failed)
    setup, run_env = creating(found.env, True), creating(found.env, False)
    seeded: list[dict[str, Any]] = []
    with watching(home, run_env, watch) as watched, ThreadPoolExecutor(1) as pool:
        for start in range(0, turns, watch.wave):
            count, served = min(watch.wave, turns - start), min(start + watch.wave, turns)
            wave = ("--turns", str(count), "--start", str(start))
            seeding = pool.submit(workload, "seed-headline", home, *wave, "--backend", "azure",
                                  env=setup)  # fmt: skip
            watched.sample_while(
                lambda s=seeding, n=served: not s.done() or watched.published[0] < n
            )
            seeded += seeding.result()["turns"]
            if watched.published[0] < served:
                break  # the worker has exited: its code says why
            forgetting = pool.submit(workload, "forget-messages", home, *wave, env=setup)
            watched.sample_while(lambda f=forgetting: not f.done())
            forgetting.result()
    code, wall, samples = watched.finish(stop=True)
    if code != 0:
        raise Failed(f"the worker exited {code}; its log: {watch.scratch / 'worker.log'}")
    outcome = workload("outcome", home, "--backend", "azure", env=setup)
    notes = check_outcome(outcome, {"turns": seeded}, turns, found.environment, Failed)
    notes.append(
        f"`run` served while the turns were seeded {watch.wave} at a time, each wave's "
        "messages deleted once it was served (cosmosdb-server reads every stored message for "
        "each history query: with 3,000 conversations stored, one took 1.7 s); stopped with "
        "SIGTERM, exit code 0"
    )
    return _soak("azure", watch, wall, samples, notes, "export-worker run")


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------
def report(run: Soak) -> list[str]:
    """The Markdown report of one run."""
    growth = run.growth_kb_per_1000()
    half = run.second_half()
    lines = [
        f"## {run.backend} backend: {run.turns:,} headline turns, one conversation each",
        "",
        f"`{run.command}`: {run.wall:.1f} s, "
        f"{run.turns / run.wall:.1f} turns/s; {len(run.samples)} samples.",
        "",
        "| turns published | s | VmRSS MiB | threads | open fds |",
        "|---|---|---|---|---|",
    ]
    for s in run.at_tenths():
        lines.append(
            f"| {s.published:,} | {s.seconds:.1f} | {s.rss_kb / 1024:.1f} | {s.threads} | {s.fds} |"
        )
    lines.append("")
    if growth is None or not half:
        lines.append("Too few samples in the second half for a slope: run more turns.")
    else:
        low, high = min(s.rss_kb for s in half), max(s.rss_kb for s in half)
        lines.append(
            f"Second half ({len(half)} samples): VmRSS {low / 1024:.1f}-{high / 1024:.1f} MiB, "
            f"slope {growth:+.0f} KiB per 1,000 turns; threads {_span(s.threads for s in half)}, "
            f"open fds {_span(s.fds for s in half)}."
        )
    if run.heap is not None:
        total, top = run.heap
        lines.extend([
            "",
            f"Under tracemalloc: the Python heap grew {total:+,.0f} KiB from the snapshot at "
            f"{SNAPSHOT_AT[0]:.0%} of the turns to the one at {SNAPSHOT_AT[-1]:.0%} (the resident "
            "set above holds tracemalloc's own records and snapshots too). The lines whose "
            "memory grew from each snapshot to the next, largest first:",
            "",
            "| KiB | blocks | allocated at |",
            "|---|---|---|",
            *(
                f"| {line.kb:+,.1f} | {line.blocks:+,} | `{line.where}`"
                f"{f' (from `{line.via}`)' if line.via else ''} |"
                for line in top
            ),
        ])  # fmt: skip
    lines.extend(["", *(f"- {note}" for note in run.notes)])
    return lines


def _span(values: Any) -> str:
    seen = list(values)
    low, high = min(seen), max(seen)
    return str(low) if low == high else f"{low}-{high}"


SOAKS: dict[str, Callable[[Watch], Soak]] = {"local": soak_local, "azure": soak_azure}
TURNS = {"local": 10_000, "azure": 4_000}


def figures(run: Soak) -> dict[str, Any]:
    """One run as JSON: what the tests and a reader's own analysis take."""
    return {
        "turns": run.turns,
        "wall": run.wall,
        "published": run.samples[-1].published if run.samples else 0,
        "growth_kb_per_1000": run.growth_kb_per_1000(),
        "samples": [asdict(s) for s in run.samples],
        "heap": None
        if run.heap is None
        else {"kb": run.heap[0], "lines": [asdict(line) for line in run.heap[1]]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("local", "azure", "both"), default=None,
                        help="default: both (with --quick: local)")  # fmt: skip
    parser.add_argument(
        "--turns", type=int, default=None, help="default: local 10,000, azure 4,000"
    )
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument(
        "--wave", type=int, default=500, help="azure: turns seeded at a time (default 500)"
    )
    parser.add_argument("--quick", action="store_true", help="200 turns, 20 samples a second")
    parser.add_argument("--output", type=Path, default=None, help="also write the report here")
    parser.add_argument("--scratch", type=Path, default=None, help="a fresh folder (kept)")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="run the worker under tracemalloc and report its Python heap's growth over the "
        "second half (slower; its resident set then includes tracemalloc's own)",
    )
    args = parser.parse_args(argv)
    backend = args.backend or ("local" if args.quick else "both")
    backends = ["local", "azure"] if backend == "both" else [backend]
    interval = 0.05 if args.quick else args.interval
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="export-soak-"))
    scratch.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    commit = code_commit(REPORT)
    sections: list[str] = []
    answer: dict[str, Any] = {}
    try:
        for name in backends:
            turns = args.turns or (200 if args.quick else TURNS[name])
            (scratch / name).mkdir()
            try:
                run = SOAKS[name](Watch(turns, interval, args.trace, scratch / name, args.wave))
            except Unavailable as exc:
                sections.append(f"## {name} backend: not run: {exc}\n")
                answer[name] = {"skipped": str(exc)}
                continue
            sections.append("\n".join(report(run)) + "\n")
            answer[name] = figures(run)
    finally:
        if args.scratch is None:  # leaving run_all's mark: a later timed run waits for the disk
            with contextlib.suppress(OSError):
                delete_scratch(scratch)
    header = (
        f"# Soak\n\nWritten by `benchmarks/soak.py` on {time.strftime('%Y-%m-%d')} at commit "
        f"{commit_moved(REPORT, commit)}: python "
        f"{sys.version.split()[0]}, {os.cpu_count()} cpus, 1-minute load {load:.1f} at the start "
        f"and {os.getloadavg()[0]:.1f} at the end.\n\n"
    )
    text = header + "\n".join(sections)
    print(text)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    sys.stdout.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(stoppable(main))  # a stop unwinds: the worker and the servers it started stop too
