"""The goals of issue 10, measured in one run on the real `export-worker run --drain` process.

    .venv/bin/python benchmarks/run_all.py          # full size: writes benchmarks/results.md
    .venv/bin/python benchmarks/run_all.py --quick  # CI smoke size: writes only to --output

Every measured process is started by `launch.py` (a few-MB parent run with `python -S`, so
its resident set does not leak into the child's peak RSS), and its wall time, CPU time and
peak RSS come from `os.wait4`. Homes are seeded beforehand by `workloads.py` in a process of
their own. The limit of each case (`bare.py`) runs in the same run over the same artifact
files, and each goal is a ratio of the two, so the shared machine's load mostly cancels.
How each case is built and measured: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from azure_report import AzureRun, operations_section, summary_cells
from azure_turns import azure_case as measure_azure
from stopping import Stopped, run_stoppably, stoppable

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PYTHON = sys.executable
WORKER = str(Path(sys.executable).with_name("export-worker"))
RESULTS = BENCH / "results.md"
RESULTS_REPORT = str(RESULTS.relative_to(ROOT))  # as `code_commit` names it
# The worker's packages: what an installed wheel holds, byte-compiled.
PACKAGES = ("worker", "handlers", "schemas")
# When a run deletes its scratch it leaves this mark (its time, and how many files went):
# on ext4 without a journal, files made in the minutes after many deletions cost several
# times more (PROFILE.md, twenty-second round), so the next run says when it starts too soon.
DELETED_MARK = Path(tempfile.gettempdir()) / "export-bench-deleted"
SETTLE_SECONDS = 420
MB = 1024  # ru_maxrss is in kB


class Failed(Exception):
    """A measured run failed or left a wrong outcome: the figures would mean nothing."""


@dataclass(frozen=True)
class Usage:
    """What wait4 said of one process: wall seconds, CPU seconds, peak RSS."""

    wall: float
    cpu: float
    rss_mb: float

    @staticmethod
    def of(answer: dict[str, Any]) -> Usage:
        return Usage(answer["wall"], answer["user"] + answer["system"], answer["maxrss_kb"] / MB)


def median(usages: Sequence[Usage]) -> Usage:
    """Median wall, CPU and RSS of repeated runs (each taken on its own)."""
    return Usage(
        statistics.median(u.wall for u in usages),
        statistics.median(u.cpu for u in usages),
        statistics.median(u.rss_mb for u in usages),
    )


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------
@dataclass
class Bench:
    """Where this run keeps its homes and process logs."""

    scratch: Path
    logs: Path
    opens: str  # how artifact opens are counted: strace or audit
    loads: list[tuple[str, tuple[float, float, float]]] = field(default_factory=list)
    _homes: int = 0

    def home(self, name: str) -> Path:
        """A fresh, empty worker home."""
        self._homes += 1
        path = self.scratch / f"{self._homes:02d}-{name}"
        path.mkdir()
        return path

    def launch(
        self, name: str, command: Sequence[str], cwd: Path, env: dict[str, str] | None = None
    ) -> tuple[Usage, str]:
        """Run COMMAND under the small launcher; its usage and its stdout."""
        out, err = self.logs / f"{name}.out", self.logs / f"{name}.err"
        launcher = [PYTHON, "-S", str(BENCH / "launch.py"), str(out), str(err), str(cwd), "--"]
        proc = run_stoppably(  # stopped, the launcher passes SIGTERM on to the worker
            [*launcher, *command],
            env=env if env is not None else clean_env(),
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode != 0:
            raise Failed(f"launcher for {name} failed: {proc.stderr[-1000:]}")
        answer = json.loads(proc.stdout)
        if answer["exit"] != 0:
            tail = err.read_text(encoding="utf-8", errors="replace")[-1500:]
            raise Failed(f"{name} exited {answer['exit']}: {tail}")
        return Usage.of(answer), out.read_text(encoding="utf-8")

    def worker(self, name: str, home: Path, env: dict[str, str] | None = None) -> Usage:
        """`export-worker run --drain` on HOME at default settings: what a user runs."""
        usage, _ = self.launch(name, [WORKER, "run", "--drain"], home, env or worker_env(home))
        return usage

    def bare(self, name: str, mode: str, target: Path, manifest: dict[str, Any]) -> Usage:
        """The bare pipeline (`bare.py MODE`) over the artifact files of a manifest."""
        path = self.logs / f"{name}.manifest.json"
        path.write_text(json.dumps(manifest), encoding="utf-8")
        command = [PYTHON, str(BENCH / "bare.py"), mode, str(target), str(path)]
        usage, _ = self.launch(name, command, target if target.is_dir() else target.parent)
        return usage

    def note_load(self, label: str) -> None:
        """Record the load average (the machine is shared: a busy one shows here)."""
        self.loads.append((label, os.getloadavg()))


def clean_env() -> dict[str, str]:
    """This environment without any EXPORT_WORKER_ setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}


def worker_env(home: Path) -> dict[str, str]:
    """The local backend on HOME; every other setting at its default."""
    return {**clean_env(), "EXPORT_WORKER_HOME": str(home), "EXPORT_WORKER_BACKEND": "local"}


def workload(mode: str, home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    """Seed HOME or read its outcome in a process of its own (`workloads.py`)."""
    proc = subprocess.run(
        [PYTHON, str(BENCH / "workloads.py"), mode, str(home), *args],
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise Failed(f"workloads {mode} failed: {proc.stderr[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def file_sha256(path: Path | str) -> str:
    """The sha256 of a file."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RowsRun:
    """One large export (cases a, b, c, g) and, for csv, its bare pipeline."""

    label: str
    fmt: str
    pages: int
    rows_per_page: int
    project: Usage  # csv: of the pair whose wall ratio is the median
    bare: Usage | None  # csv: the bare run just before that project run
    file_mb: float
    same_bytes: bool | None  # bare csv == the project's export, byte for byte
    pair_ratios: tuple[float, ...]  # csv: project wall / bare wall of each adjacent pair

    @property
    def rows(self) -> int:
        return self.pages * self.rows_per_page


PAIRS = 5  # adjacent (bare, worker) runs of each large csv case


def _pair_ratio(project: Usage, bare: Usage | None) -> float:
    return project.wall / bare.wall if bare is not None else project.wall


def rows_case(bench: Bench, label: str, fmt: str, pages: int, rows: int) -> RowsRun:
    """Seed one turn of PAGES artifacts, run the worker, run the bare pipeline around it."""
    home = bench.home(f"{label}-{fmt}-{pages}x{rows}")
    seeded = workload(
        "seed-rows", home, "--pages", str(pages), "--rows", str(rows), "--format", fmt
    )
    bench.note_load(f"before {label}")
    bare_csv = home / "bare.csv"
    manifest = {"artifacts": seeded["artifacts"]}
    pairs: list[tuple[Usage, Usage | None]] = []
    hashes = set()
    # csv: the bare pipeline and the worker take turns, PAIRS times, and the pair whose
    # wall ratio is the median counts: the host's speed moves by a third within minutes,
    # a pair's two runs are seconds apart. xlsx: one worker run.
    for n in range(PAIRS if fmt == "csv" else 1):
        bare = bench.bare(f"{label}-bare-{n}", "rows", bare_csv, manifest) if fmt == "csv" else None
        run_home = home.with_name(f"{home.name}-run-{n}")
        shutil.copytree(home, run_home)  # the seeded turn, unconsumed
        pairs.append((bench.worker(f"{label}-worker-{n}", run_home), bare))
        (export,) = _published(workload("outcome", run_home), 1)
        shutil.rmtree(run_home)  # a full-size case leaves ~150 MB behind
        if export["export"]["row_count"] != pages * rows:
            raise Failed(
                f"{label}: {export['export']['row_count']} rows exported, not {pages * rows}"
            )
        hashes.add(export["export"]["sha256"])
    if len(hashes) != 1:
        raise Failed(f"{label}: the runs exported different bytes")
    same = file_sha256(bare_csv) == export["export"]["sha256"] if fmt == "csv" else None
    ratios = tuple(p.wall / b.wall for p, b in pairs if b is not None)
    project, bare = sorted(pairs, key=lambda pair: _pair_ratio(*pair))[len(pairs) // 2]
    run = RowsRun(
        label,
        fmt,
        pages,
        rows,
        project,
        bare,
        export["export"]["bytes"] / 1e6,
        same,
        ratios,
    )
    shutil.rmtree(home)
    return run


# Case e's floor: the libraries `run` cannot start without, imported, and one event loop
# run; their objects frozen out of the collector as the CLI's entry does (else teardown's
# collections are most of the difference). The start-up goal has no bare pipeline; this is
# what stands below it on this machine at this moment (the host's speed moves).
LIBRARIES_ALONE = (
    "import asyncio, gc, sqlite3, click, structlog; gc.freeze(); asyncio.run(asyncio.sleep(0))"
)


@dataclass(frozen=True)
class EmptyRun:
    """Case e: start-up and shutdown on an empty queue, and the libraries alone beside it."""

    runs: tuple[Usage, ...]
    libraries: tuple[Usage, ...]

    @property
    def typical(self) -> Usage:
        return median(self.runs)

    @property
    def libraries_typical(self) -> Usage:
        return median(self.libraries)


def empty_case(bench: Bench, repeats: int) -> EmptyRun:
    """`run --drain` on a home whose stores exist and whose queue is empty, REPEATS times,
    each run followed by the libraries alone (`LIBRARIES_ALONE`)."""
    runs, libraries = [], []
    for n in range(repeats):
        home = bench.home("empty")
        workload("seed-empty", home)
        runs.append(bench.worker(f"e-empty-{n}", home))
        usage, _ = bench.launch(f"e-libraries-{n}", [PYTHON, "-c", LIBRARIES_ALONE], home)
        libraries.append(usage)
    return EmptyRun(tuple(runs), tuple(libraries))


@dataclass(frozen=True)
class TurnsRun:
    """Case d: small turns through the worker, and the bare per-turn work on the same files,
    measured as adjacent groups; the figures are those of the group whose ratio is the
    median."""

    turns: int
    project: Usage  # `run --drain` of the turns
    bare: Usage  # the bare per-turn work over the same files, just before it
    bare_empty: Usage  # the bare process with no turn: its start-up
    bare_loop_seconds: float  # the bare work loop timed inside it
    files_identical: bool  # every turn's export of every group has the same bytes
    repeats: int  # groups measured
    one_turn: Usage  # `run --drain` on a home holding one headline turn
    # `run --drain` on an empty queue: start-up and shutdown in the same minute as the turns.
    empty: Usage
    group_ratios: tuple[float, ...] = ()  # project_ms / bare_ms of each group, in order
    # The decision core's pure work on the same turn, warm, no I/O (`core_decision.py`), in
    # ms: measured just after the bare work, in a process of its own.
    decision_ms: float = 0.0

    @property
    def project_ms(self) -> float:
        return (self.project.wall - self.empty.wall) / self.turns * 1000

    @property
    def project_cpu_ms(self) -> float:
        return (self.project.cpu - self.empty.cpu) / self.turns * 1000

    @property
    def later_turns_ms(self) -> float:
        """Wall per turn past the first: the code a turn needs is loaded by the first
        message (not at start-up, which an empty queue would pay), once per process."""
        return (self.project.wall - self.one_turn.wall) / (self.turns - 1) * 1000

    @property
    def first_message_load_ms(self) -> float:
        """The first message's one-off loading: one turn's run past start-up and its turn."""
        return (self.one_turn.wall - self.empty.wall) * 1000 - self.later_turns_ms

    @property
    def bare_ms(self) -> float:
        return (self.bare.wall - self.bare_empty.wall) / self.turns * 1000

    @property
    def with_decision_ratio(self) -> float:
        """The bare turn with the decision core's warm work added, over the bare turn: where
        a worker with no runtime and no cache misses past the bare turn's would stand."""
        return (self.bare_ms + self.decision_ms) / self.bare_ms

    @property
    def bare_cpu_ms(self) -> float:
        return (self.bare.cpu - self.bare_empty.cpu) / self.turns * 1000


def measure_decision_ms(quick: bool) -> float:
    """The decision core's pure work on one headline turn, warm, in ms (`core_decision.py`
    in a process of its own: importing the core here would grow this process, whose peak
    RSS every measured child inherits)."""
    proc = subprocess.run(
        [PYTHON, str(BENCH / "core_decision.py"), "--headline-json", *(["--quick"] * quick)],
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise Failed(f"core_decision failed: {proc.stderr[-1500:]}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["ms"])


def turns_case(bench: Bench, turns: int, repeats: int, quick: bool = False) -> TurnsRun:
    """TURNS headline copies, one conversation each, drained at default settings, in
    REPEATS adjacent groups: the bare per-turn work over the group's files and its start-up,
    then the worker on the turns, on one turn and on an empty queue. Everything a ratio
    needs is measured in the same minute (the host's speed drifts: eight such groups of the
    same code within twenty minutes gave 1.46x-2.06x), and the median group counts."""
    groups: list[TurnsRun] = []
    shas: set[str] = set()
    # Its homes (a few MB) are left to the run's own cleanup of its scratch folder, not
    # deleted between groups: on a filesystem without a journal (this machine's), each inode
    # made within a minute or more of a deletion is allocated past every inode just freed,
    # ~0.2-0.6 ms each after ~3,000 deletions against ~30 us (PROFILE.md, twenty-second
    # round), which loaded both sides of the ratio, and the timed cases after it, with the
    # benchmark's own cleanup.
    for n in range(repeats):
        home = bench.home("d-headline")
        manifest = workload("seed-headline", home, "--turns", str(turns))
        bench.note_load(f"before d group {n + 1}")
        bare = bench.bare(f"d-bare-{n}", "turns", home, manifest)
        bare_empty = bench.bare(f"d-bare-empty-{n}", "turns", home, {"turns": []})
        loop = json.loads((bench.logs / f"d-bare-{n}.out").read_text(encoding="utf-8"))
        decision = measure_decision_ms(quick)
        project = bench.worker(f"d-worker-{n}", home)
        outcome = workload("outcome", home)
        exports = _published(outcome, turns)
        winners = {t["turn_id"]: sorted(t["blobs"]) for t in manifest["turns"]}
        for export in exports:
            if sorted(export["export"]["source_artifacts"]) != winners[export["turn_id"]]:
                raise Failed(f"d: {export['turn_id']} read other artifacts than the winning two")
            shas.add(export["export"]["sha256"])
        single = bench.home("d-one-turn")
        workload("seed-headline", single, "--turns", "1")
        one_turn = bench.worker(f"d-one-turn-{n}", single)
        _published(workload("outcome", single), 1)  # Failed unless its turn was published
        nothing = bench.home("d-empty")
        workload("seed-empty", nothing)
        empty = bench.worker(f"d-empty-{n}", nothing)
        groups.append(
            TurnsRun(
                turns,
                project,
                bare,
                bare_empty,
                loop["seconds"],
                True,
                1,
                one_turn,
                empty,
                decision_ms=decision,
            )
        )
    ratios = tuple(group.project_ms / group.bare_ms for group in groups)
    middle = sorted(range(len(groups)), key=lambda at: ratios[at])[len(groups) // 2]
    return replace(
        groups[middle], files_identical=len(shas) == 1, repeats=repeats, group_ratios=ratios
    )


@dataclass(frozen=True)
class ReachBackRun:
    """Case f: which artifact files the worker opened for a reach-back turn."""

    window_messages: int
    artifacts: int
    winners: tuple[str, ...]
    opened: tuple[str, ...]
    method: str

    @property
    def exact(self) -> bool:
        return sorted(self.opened) == sorted(self.winners)


_OPENAT = re.compile(r'openat\([^,]+, "([^"]+)", [^)]*\) = (-?\d+)')
_AUDIT_RUNNER = """
import sys
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str):
        opened.append(args[0])
sys.addaudithook(hook)
from worker.cli import main
sys.argv = ["export-worker", "run", "--drain"]
try:
    main()
finally:
    with open(%r, "w") as log:
        log.write("\\n".join(opened))
"""


def reach_back_case(bench: Bench) -> ReachBackRun:
    """Seed the 40-message window with 21 artifacts, run the worker, count the opens."""
    home = bench.home("f-reach-back")
    seeded = workload("seed-reach-back", home)
    log = bench.logs / "f-opens.log"
    if bench.opens == "strace":
        trace = [
            shutil.which("strace") or "strace",
            "-f",
            "-qq",
            "-e",
            "trace=openat",
            "-o",
            str(log),
        ]
        bench.launch("f-worker", [*trace, WORKER, "run", "--drain"], home, worker_env(home))
        opened = [
            m.group(1)
            for m in map(_OPENAT.search, log.read_text(encoding="utf-8").splitlines())
            if m is not None and int(m.group(2)) >= 0
        ]
    else:
        code = _AUDIT_RUNNER % str(log)
        bench.launch("f-worker", [PYTHON, "-c", code], home, worker_env(home))
        opened = log.read_text(encoding="utf-8").splitlines()
    artifacts_root = str(home.resolve() / "blobs" / "artifacts") + "/"
    seen = tuple(p for p in opened if p.startswith(artifacts_root))
    (export,) = _published(workload("outcome", home), 1)
    if export["export"]["row_source"] != "prior_turn":
        raise Failed(f"f: row source {export['export']['row_source']}, not prior_turn")
    shutil.rmtree(home)
    return ReachBackRun(
        seeded["window_messages"],
        len(seeded["artifacts"]),
        tuple(seeded["winners"]),
        seen,
        bench.opens,
    )


@dataclass(frozen=True)
class WideRun:
    """Case w: one turn combining GROUPS actions, each with 3 columns of its own, into one
    xlsx file (3 × GROUPS + 1 columns, a sparse sheet), at two sizes, the second twice the
    first: its cost should grow with the groups' own cells, not with groups × columns."""

    groups: tuple[int, int]
    runs: tuple[Usage, Usage]
    file_kb: tuple[float, float]

    def net(self, empty: Usage) -> tuple[float, float]:
        """Each run's wall net of start-up and shutdown (an empty run's)."""
        small, large = (run.wall - empty.wall for run in self.runs)
        return small, large


def wide_case(bench: Bench, groups: int) -> WideRun:
    """Seed GROUPS and 2 × GROUPS groups in their homes, and run the worker on each."""
    runs, sizes = [], []
    for count in (groups, 2 * groups):
        home = bench.home(f"w-{count}")
        seeded = workload("seed-wide", home, "--groups", str(count), "--format", "xlsx")
        bench.note_load(f"before w {count}")
        runs.append(bench.worker(f"w-worker-{count}", home))
        (export,) = _published(workload("outcome", home), 1)
        if export["export"]["row_count"] != seeded["rows"]:
            raise Failed(f"w: {export['export']['row_count']} rows, not {seeded['rows']}")
        if len(export["export"]["columns"]) != seeded["columns"]:
            raise Failed(f"w: {len(export['export']['columns'])} columns, not {seeded['columns']}")
        sizes.append(export["export"]["bytes"] / 1e3)
        shutil.rmtree(home)
    return WideRun((groups, 2 * groups), (runs[0], runs[1]), (sizes[0], sizes[1]))


def azure_case(bench: Bench, turns: int) -> AzureRun:
    """Case az: case d's turns on the Azure backend's stand-ins (`azure_turns.py`)."""
    return measure_azure(bench, turns, Failed)


def _published(outcome: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """The published exports of a run; Failed unless exactly COUNT and nothing else."""
    exports = outcome["exports"]
    problems = []
    if len(exports) != count or any(e["decision"] != "published" for e in exports):
        problems.append(f"{len(exports)} exports published, expected {count}")
    if outcome["dead_letters"]:
        problems.append(f"{len(outcome['dead_letters'])} dead letters")
    if outcome["unexported_decisions"]:
        problems.append(f"decisions without export: {outcome['unexported_decisions']}")
    if problems:
        raise Failed("; ".join(problems))
    exports_list: list[dict[str, Any]] = exports
    return exports_list


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sizes:
    """The size of every case (full, or --quick)."""

    rows_pages: int
    rows_per_page: int
    many_pages: int
    flat_pages: int
    turns: int
    turn_repeats: int
    empty_repeats: int
    wide_groups: int


FULL = Sizes(10, 100_000, 100, 2, 100, 5, 5, 2_000)
QUICK = Sizes(10, 2_000, 100, 2, 5, 1, 2, 100)


@dataclass
class Report:
    """Every case of one run."""

    sizes: Sizes
    a: RowsRun
    b: RowsRun
    flat: RowsRun
    g: RowsRun
    d: TurnsRun
    e: EmptyRun
    f: ReachBackRun
    w: WideRun
    az: AzureRun


def _ratio(x: float, y: float, digits: int = 1) -> str:
    return f"{x / y:.{digits}f}x" if y > 0 else "n/a"


def _goal_ratio(x: float, y: float) -> str:
    """A ratio held against a goal: two decimals, so 1.13x does not read as a 1.1x goal met."""
    return _ratio(x, y, 2)


def _holds(ok: bool) -> str:
    return "**yes**" if ok else "no"


def summary(r: Report) -> list[str]:
    """The issue's table: this project, the limit from the same run, the ratio, the goal."""
    e = r.e.typical
    lines = [
        "| case | what | this project | the limit, same run | ratio | goal | holds |",
        "|---|---|---|---|---|---|---|",
    ]

    def row(case: str, what: str, ours: str, limit: str, ratio: str, goal: str, ok: Any) -> None:
        held = ok if isinstance(ok, str) else _holds(bool(ok))
        lines.append(f"| {case} | {what} | {ours} | {limit} | {ratio} | {goal} | {held} |")

    for case, run in (("a", r.a), ("b", r.b)):
        assert run.bare is not None
        what = (
            f"{run.rows:,} rows in {run.pages} artifacts of {run.rows_per_page:,} → csv: "
            "`run --drain` wall"
        )
        row(
            case,
            what,
            f"{run.project.wall:.2f} s",
            f"{run.bare.wall:.2f} s (bare pipeline)",
            f"**{_goal_ratio(run.project.wall, run.bare.wall)}**",
            "≤ 1.5x",
            run.project.wall <= 1.5 * run.bare.wall,
        )
    for run in (r.a, r.b):
        assert run.bare is not None
        row(
            "c",
            f"peak RSS of `run`, {run.pages} artifacts ({run.rows:,} rows)",
            f"{run.project.rss_mb:.0f} MB",
            f"{run.bare.rss_mb:.0f} MB (bare pipeline)",
            _goal_ratio(run.project.rss_mb, run.bare.rss_mb),
            "≤ 1.5x",
            run.project.rss_mb <= 1.5 * run.bare.rss_mb,
        )
    row(
        "c",
        f"peak RSS flat in row count: {r.flat.rows:,} → {r.a.rows:,} rows "
        f"({r.flat.pages} → {r.a.pages} artifacts of {r.a.rows_per_page:,})",
        f"{r.flat.project.rss_mb:.0f} → {r.a.project.rss_mb:.0f} MB",
        "—",
        _goal_ratio(r.a.project.rss_mb, r.flat.project.rss_mb),
        "≤ 1.1x",
        r.a.project.rss_mb <= 1.1 * r.flat.project.rss_mb,
    )
    row(
        "d",
        f"{r.d.turns} headline turns (one conversation each), default settings, "
        "ms/turn net of start-up (an empty run's, beside it)",
        f"{r.d.project_ms:.1f} ms",
        f"{r.d.bare_ms:.1f} ms (bare per-turn work)",
        f"**{_goal_ratio(r.d.project_ms, r.d.bare_ms)}**",
        "≤ 1.5x",
        r.d.project_ms <= 1.5 * r.d.bare_ms,
    )
    row(
        "d",
        "the same, CPU ms/turn (user + system, net of start-up's): the bare turn waits on "
        "3 fsyncs, so its wall moves with the shared disk's latency",
        f"{r.d.project_cpu_ms:.1f} ms",
        f"{r.d.bare_cpu_ms:.1f} ms",
        _ratio(r.d.project_cpu_ms, r.d.bare_cpu_ms),
        "reported",
        "—",
    )
    row(
        "d",
        "the same past the first turn: ms/turn of the other "
        f"{r.d.turns - 1} ({r.d.turns} turns' run minus one turn's, over {r.d.turns - 1}); the "
        "first message loads the code a turn needs (the decision core, the serialisers), once "
        f"per process: {r.d.first_message_load_ms:.0f} ms",
        f"{r.d.later_turns_ms:.1f} ms",
        f"{r.d.bare_ms:.1f} ms",
        _ratio(r.d.later_turns_ms, r.d.bare_ms),
        "reported",
        "—",
    )
    row(
        "d",
        "the decision core's pure work on the same turn, in memory, warm (`core_decision.py`: "
        "the turn's story, its 900 rows fed (clean, digest, de-dup), the selection): what the "
        "worker adds to the bare turn before any I/O, runtime or cache miss; the ratio is the "
        "bare turn with it added over the bare turn",
        f"{r.d.decision_ms:.1f} ms",
        f"{r.d.bare_ms:.1f} ms",
        f"{r.d.with_decision_ratio:.2f}x",
        "reported",
        "—",
    )
    row(
        "e",
        f"`run --drain` on an empty queue: start-up and shutdown (median of {len(r.e.runs)})",
        f"{e.wall:.2f} s",
        f"{r.e.libraries_typical.wall:.2f} s (its libraries alone: asyncio, sqlite3, click, "
        "structlog)",
        _ratio(e.wall, r.e.libraries_typical.wall),
        "≤ 0.3 s",
        e.wall <= 0.3,
    )
    opened = f"{len(r.f.opened)} of {r.f.artifacts}"
    row(
        "f",
        f"reach-back over a {r.f.window_messages}-message window with {r.f.artifacts} "
        "artifacts: artifact files opened",
        opened,
        f"the {len(r.f.winners)} winning ones",
        f"{len(r.f.opened) / len(r.f.winners):.2f}",
        "exactly the winning ones (1.00)",
        r.f.exact,
    )
    row(
        "g",
        f"xlsx, {r.g.rows:,} rows in {r.g.pages} artifacts: `run --drain` wall",
        f"{r.g.project.wall:.2f} s",
        f"csv {r.a.project.wall:.2f} s (case a)",
        _ratio(r.g.project.wall, r.a.project.wall),
        "reported",
        "—",
    )
    small, large = r.w.net(e)
    row(
        "w",
        f"one xlsx combining {r.w.groups[1]:,} groups with 3 columns of their own "
        f"({3 * r.w.groups[1] + 1:,} columns): `run --drain` wall, and its growth from "
        f"{r.w.groups[0]:,} groups, net of start-up (2.0x: linear; 4.0x: groups × columns)",
        f"{r.w.runs[1].wall:.2f} s",
        f"{r.w.runs[0].wall:.2f} s ({r.w.groups[0]:,} groups)",
        _ratio(large, small),
        "reported",
        "—",
    )
    what, ours, limit, ratio = summary_cells(r.az, r.d.project_ms)
    row("az", what, ours, limit, ratio, "reported", "—")
    return lines


def detail(r: Report) -> list[str]:
    """Every measured process: wall, CPU, peak RSS, and the CPU ratio beside the wall one."""
    lines = [
        "| case | process | wall s | CPU s (user+sys) | peak RSS MB | notes |",
        "|---|---|---|---|---|---|",
    ]

    def row(case: str, process: str, u: Usage, notes: str = "") -> None:
        lines.append(
            f"| {case} | {process} | {u.wall:.3f} | {u.cpu:.3f} | {u.rss_mb:.0f} | {notes} |"
        )

    for case, run in (("a", r.a), ("b", r.b), ("c", r.flat), ("g", r.g)):
        rate = f"{run.rows / run.project.wall:,.0f} rows/s; file {run.file_mb:.1f} MB"
        median = f" (the median pair of {len(run.pair_ratios)})" if run.pair_ratios else ""
        row(
            case,
            f"`run --drain`, {run.fmt}, {run.pages} × {run.rows_per_page:,}{median}",
            run.project,
            rate,
        )
        if run.bare is not None:
            same = "same bytes as the export" if run.same_bytes else "bytes differ from the export"
            each = ", ".join(f"{ratio:.2f}x" for ratio in run.pair_ratios)
            row(
                case,
                "bare pipeline, the run just before it",
                run.bare,
                f"CPU ratio {_ratio(run.project.cpu, run.bare.cpu)}; {same}; wall ratio of "
                f"each pair in order: {each}",
            )
    group = f"the median group of {r.d.repeats}"
    each = ", ".join(f"{ratio:.2f}x" for ratio in r.d.group_ratios)
    row(
        "d",
        f"`run --drain`, {r.d.turns} headline turns ({group})",
        r.d.project,
        f"{r.d.turns / (r.d.project.wall - r.d.empty.wall):.1f} turns/s net; every export "
        f"{'identical' if r.d.files_identical else 'NOT identical'}; ratio of each group "
        f"in order: {each}",
    )
    row("d", f"`run --drain`, 1 headline turn ({group})", r.d.one_turn)
    row("d", f"`run --drain`, empty queue ({group})", r.d.empty)
    row(
        "d",
        f"bare per-turn work, {r.d.turns} turns, just before the worker ({group})",
        r.d.bare,
        f"work loop inside it: {r.d.bare_loop_seconds * 1000 / r.d.turns:.2f} ms/turn",
    )
    row("d", f"bare per-turn process with no turn, its start-up ({group})", r.d.bare_empty)
    for groups, run, kb in zip(r.w.groups, r.w.runs, r.w.file_kb, strict=True):
        row(
            "w",
            f"`run --drain`, xlsx, {groups:,} groups × 3 rows, {3 * groups + 1:,} columns",
            run,
            f"file {kb:,.0f} KB",
        )
    for n, (u, lib) in enumerate(zip(r.e.runs, r.e.libraries, strict=True), 1):
        row("e", f"`run --drain`, empty queue, run {n}", u)
        row("e", f"its libraries alone, run {n}", lib)
    return lines


def machine(commit: str) -> list[str]:
    """Machine, Python, date and commit of this run."""
    model = "unknown CPU"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return [
        f"- machine: {os.cpu_count()} × {model}, {memory:.0f} GiB, {platform.system()} "
        f"{platform.release()}",
        f"- Python {platform.python_version()}; local backend (SQLite + files) on {_filesystem()}; "
        "the project's bytecode compiled beforehand, as an installed wheel has it",
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- commit: {commit}",
    ]


def code_commit(report: str) -> str:
    """The commit measured, and whether tracked files (other than the REPORT being written)
    differed from it."""
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{report}")
    return f"{commit}{' plus uncommitted changes' if dirty else ''}"


def commit_moved(report: str, at_start: str) -> str:
    """The commit a run measured: `code_commit` taken as it started, and as it ends where
    that differs (the code changed under a run that starts workers all along)."""
    at_end = code_commit(report)
    return at_start if at_end == at_start else f"{at_start} at the start, {at_end} at the end"


def compile_bytecode(root: Path = ROOT) -> None:
    """Write the bytecode caches of the worker's packages under ROOT, as installing a wheel
    does: with PYTHONDONTWRITEBYTECODE set (as on CI machines) an editable install would
    otherwise compile every module of the worker from source on each start (~0.2 s)."""
    packages = [str(root / name) for name in PACKAGES]
    subprocess.run([PYTHON, "-m", "compileall", "-q", *packages], check=True)


def _git(*args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip()


def _filesystem(mounts: str = "/proc/mounts", ext4: str = "/sys/fs/ext4") -> str:
    """The temporary folder's filesystem, and for ext4 whether it has a journal: without
    one, a file made soon after many deletions costs several times more (PROFILE.md,
    twenty-second round)."""
    target = Path(tempfile.gettempdir())
    best_mount, kind, device = "/", "?", ""
    with open(mounts, encoding="utf-8") as lines:
        for line in lines:
            source, mount, fs, *_ = line.split()
            if str(target).startswith(mount) and len(mount) >= len(best_mount):
                best_mount, kind, device = mount, fs, source
    if kind == "ext4":
        try:
            journal = (Path(ext4) / Path(device).name / "journal_task").read_text("utf-8")
        except OSError:
            journal = ""
        if journal.strip() == "<none>":
            kind = "ext4 without a journal"
    return f"{target} ({kind})"


def earlier_deletions(mark: Path = DELETED_MARK) -> tuple[float, int] | None:
    """Seconds since an earlier run deleted its scratch, and how many files it deleted;
    None when no run left its mark."""
    try:
        files = int(mark.read_text(encoding="utf-8").strip() or 0)
        return max(0.0, time.time() - mark.stat().st_mtime), files
    except (OSError, ValueError):
        return None


def deletions_warning(earlier: tuple[float, int] | None, filesystem: str) -> str | None:
    """What to say of a run begun under SETTLE_SECONDS after an earlier one deleted its
    scratch, on ext4 without a journal (`_filesystem()`); None otherwise."""
    if earlier is None or earlier[0] >= SETTLE_SECONDS or "without a journal" not in filesystem:
        return None
    seconds, files = earlier
    return (
        f"begun {seconds:.0f} s after an earlier run deleted its {files:,} scratch files "
        f"(under {SETTLE_SECONDS // 60} minutes): on ext4 without a journal this run's files "
        "were slower to make for it (PROFILE.md, twenty-second round), so its figures, case "
        "d's most, are not comparable with a run on a settled disk"
    )


def delete_scratch(scratch: Path, mark: Path = DELETED_MARK) -> None:
    """Delete the run's scratch and leave the mark the next run reads."""
    files = sum(len(names) + len(folders) for _, folders, names in os.walk(scratch))
    shutil.rmtree(scratch)
    mark.write_text(f"{files}\n", encoding="utf-8")


def render(
    r: Report,
    args: argparse.Namespace,
    seconds: float,
    loads: list[Any],
    warning: str | None = None,
    *,
    commit: str,
) -> str:
    """results.md; COMMIT as `commit_moved` gives it."""
    load_text = "; ".join(f"{label}: {a:.2f}" for label, (a, _, _) in loads)
    size = "--quick (CI smoke size: the figures are not the goals' sizes)" if args.quick else "full"
    parts = [
        "# Benchmark results",
        "",
        "Written by `.venv/bin/python benchmarks/run_all.py` (how each case is measured: "
        "[README.md](README.md); where the time goes: [PROFILE.md](PROFILE.md)).",
        "",
        *machine(commit),
        f"- size: {size}; the whole run took {seconds / 60:.1f} min",
        f"- load average (1 min) seen during the run: {load_text}",
        *([f"- **warning**: {warning}"] if warning is not None else []),
        "",
        "## The goals",
        "",
        *summary(r),
        "",
        "Ratios compare figures from this one run. Wall is what a user waits for; the CPU "
        "column below is less sensitive to other processes on the machine.",
        "",
        "## Every measured process",
        "",
        *detail(r),
        "",
        "## The Service Bus path (case az)",
        "",
        *operations_section(r.az),
        "",
        "Artifact opens in case f were counted "
        + (
            "from outside the process with `strace -f -e trace=openat` (successful opens of "
            "files under `blobs/artifacts/`)"
            if r.f.method == "strace"
            else "by an audit hook (`sys.addaudithook`, the `open` event) installed before "
            "the CLI's `main` runs in the same interpreter"
        )
        + f": opened {', '.join(Path(p).name for p in r.f.opened) or 'none'}.",
        "",
    ]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------
def measure(bench: Bench, sizes: Sizes) -> Report:
    """Every case, in an order that keeps the long ones apart from the short ones."""
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("e", lambda: empty_case(bench, sizes.empty_repeats)),
        ("a", lambda: rows_case(bench, "a", "csv", sizes.rows_pages, sizes.rows_per_page)),
        (
            "b",
            lambda: rows_case(
                bench,
                "b",
                "csv",
                sizes.many_pages,
                sizes.rows_pages * sizes.rows_per_page // sizes.many_pages,
            ),
        ),
        ("c", lambda: rows_case(bench, "c", "csv", sizes.flat_pages, sizes.rows_per_page)),
        ("d", lambda: turns_case(bench, sizes.turns, sizes.turn_repeats, sizes is QUICK)),
        ("f", lambda: reach_back_case(bench)),
        ("g", lambda: rows_case(bench, "g", "xlsx", sizes.rows_pages, sizes.rows_per_page)),
        ("w", lambda: wide_case(bench, sizes.wide_groups)),
        ("az", lambda: azure_case(bench, sizes.turns)),
    ]
    done: dict[str, Any] = {}
    for name, step in steps:
        started = time.perf_counter()
        done[name] = step()
        print(f"case {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    bench.note_load("end")
    return Report(
        sizes,
        done["a"],
        done["b"],
        done["c"],
        done["g"],
        done["d"],
        done["e"],
        done["f"],
        done["w"],
        done["az"],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CI smoke sizes (seconds)")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"where to write the report (default {RESULTS.relative_to(ROOT)}; "
        "with --quick, nowhere)",
    )
    parser.add_argument(
        "--opens",
        choices=("auto", "strace", "audit"),
        default="auto",
        help="how case f counts artifact opens (auto: strace when installed)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch homes and logs")
    args = parser.parse_args(argv)
    output = args.output or (None if args.quick else RESULTS)
    opens = (
        args.opens if args.opens != "auto" else ("strace" if shutil.which("strace") else "audit")
    )
    scratch = Path(tempfile.mkdtemp(prefix="export-bench-"))
    logs = scratch / "logs"
    logs.mkdir()
    bench = Bench(scratch, logs, opens)
    warning = deletions_warning(earlier_deletions(), _filesystem())
    if warning is not None:
        print(f"run_all: warning: {warning}", file=sys.stderr, flush=True)
    compile_bytecode()
    bench.note_load("start")
    commit = code_commit(RESULTS_REPORT)
    started = time.perf_counter()
    try:
        report = measure(bench, QUICK if args.quick else FULL)
    except Failed as exc:
        print(f"run_all: {exc}\n(logs kept in {logs})", file=sys.stderr)
        return 1
    except (Stopped, KeyboardInterrupt):
        if not args.keep:  # what was started is stopped by now; its homes go too
            delete_scratch(scratch)
        raise
    seconds = time.perf_counter() - started
    moved = commit_moved(RESULTS_REPORT, commit)
    text = render(report, args, seconds, bench.loads, warning, commit=moved)
    if not args.keep:
        delete_scratch(scratch)
    print(text)
    if output is not None:
        output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(stoppable(main))
