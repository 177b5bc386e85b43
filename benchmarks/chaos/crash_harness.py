"""Crash harness: kill the worker over and over, then prove nothing was lost or doubled.

    H=benchmarks/chaos/crash_harness.py
    .venv/bin/python $H --turns 200 --conversations 20 --kills 50 --seed 7
    .venv/bin/python $H --turns 200 --conversations 20 --kills 0 --fault-rate 0.2 --seed 7

1. Generates `--turns` turns over `--conversations` conversations (`chaos_turns.py`: published
   csv/json/xml/xlsx turns with two pages of action rows, clarification then carried answer,
   reach-back, no_request, derived without a table) plus a few poison messages planted on
   purpose, and loads them into a fresh home with `export-worker dev seed`.
2. Runs `--workers` `export-worker run --drain` processes at once, restarting each as it dies.
   One of them is SIGKILLed every 0.25-1 s (seeded), and each runs with crash points
   (`EXPORT_WORKER_CRASH_POINTS`, worker/testing/checkpoints.py) that exit mid-step: during a blob
   write, after the blob, after the turn record, after the event, after `event_sent`, with
   odds scaled to `--kills / --turns`. This goes on until `--kills` deaths, or until the
   queue is drained (a note says so). Locks last 1 s, so a dead worker's session returns soon.
3. Runs `export-worker run --drain` once more without kills or crash points. A turn that was
   in flight at ten deaths has been dead-lettered for its delivery count, as Service Bus
   does (under a kill every 0.25-1 s, a slow first turn can be), and under `--fault-rate`
   a turn can spend `--max-attempts` on injected faults and be dead-lettered
   `transient_failure` ("TransientError at faults.py:N"). Those two kinds are replayed as
   an operator would once the outage is over (`dlq replay` by sequence number, oldest
   first), drained once more without injected faults, and counted in the figure line
   (`replayed=`); any other dead letter stays for the checks.
4. Checks, from the stores and through the CLI: every turn has exactly one turn record with
   the expected decision; every published turn exactly one export file whose rows match
   (count, first and last row), `event_sent` true and exactly one `export.published`; no
   file for any other turn; no staged leftovers in `blobs/.staging`; the queue drained; the
   dead-letter queue holding exactly the planted poison messages.

`--fault-rate R` also makes every port call of the `run` processes fail with a transient
error at rate R (worker/testing/faults.py), with 6 tries per call unless `--call-attempts` says
otherwise (tests/reliability/test_faults.py gives the odds).

`--backend azure` runs the same on the whole Azure backend over local stand-ins
(`harness_stores.py`: Service Bus on the test broker inside this process, Blob on Azurite,
Cosmos on cosmosdb-server, which scripts/test-emulated starts); the checks read Cosmos,
Azurite and the topic's subscription instead of the home. A worker process there takes
seconds to start, so `--kill-every` should leave it time to get going. The scratch folders
that killed xlsx writers leave in TMPDIR (pointed into the home) are swept by the next worker
to start (worker/scratch.py): any still there after the final drain is a failure. The last
line is the figure line:

    chaos: turns=N kills=K lost=0 duplicates=0 dead_letters=P (planted P) replayed=R

and the exit code is non-zero when anything was lost or doubled, or any check failed.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (ROOT, HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from chaos_turns import ExpectedTurn, Generated, generate  # noqa: E402
from harness_stores import AzureStores, LocalStores, Stores, azure_stores, run_cli  # noqa: E402

from handlers.errors import DeadLetterReason  # noqa: E402
from worker.ports import MAX_DELIVERY_REASON as DELIVERY_COUNT_REASON  # noqa: E402
from worker.testing import faults  # noqa: E402

TRANSIENT_REASON: DeadLetterReason = "transient_failure"
# How a dead letter names a fault `--fault-rate` injected (settlement's `where_raised`).
INJECTED_FAULT = re.compile(rf"TransientError at {re.escape(Path(faults.__file__).name)}:\d+")


def crash_points_for(kills: int, turns: int) -> str:
    """Crash-point odds that, with the SIGKILL clock, reach `kills` deaths before the queue
    drains: about 0.4 deaths per published turn at 50 kills over 200 turns."""
    q = min(0.25, max(0.02, 0.3 * kills / max(turns, 1)))
    points = ("after_blob", "after_record", "after_publish", "after_event_sent")
    return ",".join([f"during_blob:{q / 2:.3f}", *(f"{p}:{q:.3f}" for p in points)])


def executable() -> list[str]:
    """The console script next to this interpreter, else `python -m worker.cli`."""
    script = Path(sys.executable).with_name("export-worker")
    return [str(script)] if script.exists() else [sys.executable, "-m", "worker.cli"]


@dataclass
class Options:
    """What one harness run does."""

    turns: int
    conversations: int
    kills: int
    seed: int
    workers: int = 2
    fault_rate: float = 0.0
    crash_points: str | None = None  # None: crash_points_for(kills, turns)
    lock_seconds: float = 1.0
    max_attempts: int = 5
    call_attempts: int | None = None
    kill_every: tuple[float, float] = (0.25, 1.0)
    timeout: float = 900.0
    big_every: int = 12
    big_rows: tuple[int, int] = (600, 900)
    home: Path | None = None
    verbose: bool = False
    backend: str = "local"
    backoff_base: float = 0.0  # above 0: retries wait, so delayed abandons are exercised


@dataclass
class Worker:
    """One `run` process in a slot."""

    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class ChaosStats:
    """What the kill phase did."""

    spawned: int = 0
    kills: Counter[str] = field(default_factory=Counter)
    clean_exits: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def total_kills(self) -> int:
        return sum(self.kills.values())


class Home:
    """One temporary worker home, the stores its workers use, and the environment of every
    CLI call on it."""

    def __init__(self, path: Path, options: Options, stores: Stores | None = None) -> None:
        self.path = path
        self.options = options
        self.stores = stores if stores is not None else LocalStores(path)
        (path / "logs").mkdir(parents=True, exist_ok=True)
        (path / "tmp").mkdir(exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
        env.update(self.stores.settings())
        env.update(
            EXPORT_WORKER_HOME=str(self.path),
            EXPORT_WORKER_BACKOFF_BASE_SECONDS=str(self.options.backoff_base),
            EXPORT_WORKER_LOCK_DURATION_SECONDS=str(self.options.lock_seconds),
            EXPORT_WORKER_SESSION_IDLE_SECONDS="0.2",
            EXPORT_WORKER_SHUTDOWN_GRACE_SECONDS="5",
            EXPORT_WORKER_MAX_ATTEMPTS=str(self.options.max_attempts),
            # xlsxwriter's constant-memory temp files: kept inside the home, to be counted.
            TMPDIR=str(self.path / "tmp"),
        )
        if self.options.call_attempts is not None:
            env["EXPORT_WORKER_CALL_ATTEMPTS"] = str(self.options.call_attempts)
        env.update(extra)
        return env

    def cli(self, *args: str, timeout: float = 300) -> bytes:
        return run_cli([*executable(), *args], self.path, self.env(), timeout)

    def spawn(self, n: int, chaos: bool, faults: bool = True) -> Worker:
        extra: dict[str, str] = {}
        points = self.options.crash_points
        if points is None:
            points = crash_points_for(self.options.kills, self.options.turns)
        if chaos and points:
            extra["EXPORT_WORKER_CRASH_POINTS"] = points
            extra["EXPORT_WORKER_CRASH_SEED"] = str(self.options.seed * 100_003 + n)
        if faults and self.options.fault_rate > 0:
            extra["EXPORT_WORKER_FAULT_RATE"] = str(self.options.fault_rate)
            extra["EXPORT_WORKER_FAULT_SEED"] = str(self.options.seed * 100_019 + n)
        log = self.path / "logs" / f"run-{n:04d}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [*executable(), "run", "--drain"],
                cwd=self.path,
                env=self.env(**extra),
                stdout=subprocess.DEVNULL,
                stderr=sink,
            )
        return Worker(process, log)


# --------------------------------------------------------------------------------------
def kill_phase(home: Home, rng: random.Random, stats: ChaosStats, deadline: float) -> None:
    """Keep `workers` processes running and SIGKILL one of them at seeded random intervals
    (crash points kill them too), until enough died or the queue is drained."""
    options = home.options
    slots: list[Worker | None] = [None] * options.workers
    chaos = options.kills > 0
    next_kill = time.monotonic() + rng.uniform(*options.kill_every)
    while time.monotonic() < deadline:
        for i, worker in enumerate(slots):
            if worker is not None and (code := worker.process.poll()) is not None:
                _account_exit(worker, code, stats)
                slots[i] = None
        if chaos and time.monotonic() >= next_kill:
            next_kill = time.monotonic() + rng.uniform(*options.kill_every)
            alive = [i for i, w in enumerate(slots) if w is not None]
            if alive:
                victim = rng.choice(alive)
                worker = slots[victim]
                assert worker is not None
                worker.process.send_signal(signal.SIGKILL)
                if worker.process.wait() == -signal.SIGKILL:
                    stats.kills["sigkill"] += 1
                else:  # it ended on its own just before
                    _account_exit(worker, worker.process.returncode, stats)
                slots[victim] = None
        if chaos and stats.total_kills >= options.kills:
            break
        # A clean exit means a worker saw the queue drained: let the others finish too.
        done = stats.clean_exits > 0 and home.stores.drained()
        if done and all(s is None for s in slots):
            break
        for i, worker in enumerate(slots):
            if worker is None and not done:
                slots[i] = home.spawn(stats.spawned, chaos)
                stats.spawned += 1
        time.sleep(0.02)
    for worker in slots:
        if worker is not None and worker.process.poll() is None:
            worker.process.send_signal(signal.SIGKILL)
            worker.process.wait()
            stats.kills["sigkill"] += 1
        elif worker is not None:
            _account_exit(worker, worker.process.returncode, stats)


def _account_exit(worker: Worker, code: int, stats: ChaosStats) -> None:
    if code == 0:
        stats.clean_exits += 1
        return
    text = worker.log.read_text(errors="replace")
    if code == 137 and "crash point" in text:
        point = text.rsplit("crash point ", 1)[1].split()[0]
        stats.kills[point] += 1
        return
    stats.failures.append(f"{worker.log.name} exited {code}: {text.strip()[-400:]}")


def drain_phase(
    home: Home, stats: ChaosStats, deadline: float, verbose: bool, faults: bool = True
) -> None:
    """One `run --drain` without kills or crash points (with the injected faults unless
    `faults` is false); it must exit 0."""
    worker = home.spawn(stats.spawned, chaos=False, faults=faults)
    stats.spawned += 1
    try:
        code = worker.process.wait(timeout=max(10.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        worker.process.kill()
        worker.process.wait()
        stats.failures.append("the final run --drain did not finish in time")
        return
    if code != 0:
        stats.failures.append(f"the final run --drain exited {code}")
    if verbose:
        sys.stderr.write(worker.log.read_text(errors="replace")[-3000:])


def replay_phase(home: Home, stats: ChaosStats, deadline: float, verbose: bool) -> Replayed:
    """Replay what an operator would once the chaos is over, then drain again: what was
    dead-lettered for its delivery count, and what ran out of attempts on a fault this
    harness injected. Any other dead letter stays, for the checks to judge."""
    dead = json.loads(home.cli("dlq", "list", "--json"))
    exhausted = [d for d in dead if d["reason"] == DELIVERY_COUNT_REASON]
    injected = [d for d in dead if is_injected_fault(d)]
    # Oldest first, as `dlq replay --all` goes: a conversation's turns keep their order.
    chosen = sorted(d["sequence_number"] for d in (*exhausted, *injected))
    if chosen:
        home.cli("dlq", "replay", *map(str, chosen))
        drain_phase(home, stats, deadline, verbose, faults=False)
    return Replayed(delivery_count=len(exhausted), injected_faults=len(injected))


@dataclass(frozen=True)
class Replayed:
    """What `replay_phase` replayed, by why it had been dead-lettered."""

    delivery_count: int = 0
    injected_faults: int = 0

    @property
    def total(self) -> int:
        return self.delivery_count + self.injected_faults


def is_injected_fault(dead: dict[str, Any]) -> bool:
    """A `transient_failure` whose last error was one `--fault-rate` injected: raised by
    worker/testing/faults.py and nothing under it. An operator replays such a dead letter
    once the dependency is back; a real transient failure (one from a stand-in) is not
    this harness's doing and stays dead-lettered."""
    description = str(dead.get("description") or "")
    return (
        dead.get("reason") == TRANSIENT_REASON and INJECTED_FAULT.fullmatch(description) is not None
    )


def _recorded(home: Home, conversations: list[str]) -> int:
    return sum(len(records) for records in home.stores.records(conversations).values())


# --------------------------------------------------------------------------------------
@dataclass
class Verdict:
    """What the checks found."""

    lost: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    planted: int = 0
    problems: list[str] = field(default_factory=list)

    def lose(self, what: str) -> None:
        self.lost += 1
        self.problems.append(f"lost: {what}")

    def double(self, what: str) -> None:
        self.duplicates += 1
        self.problems.append(f"duplicate: {what}")

    def other(self, what: str) -> None:
        self.problems.append(what)


def verify(home: Home, generated: Generated) -> Verdict:
    """Every check of the module docstring, from the stores and through the CLI."""
    verdict = Verdict(planted=len(generated.planted))
    records = home.stores.records(generated.conversation_ids)
    _check_records(generated, records, verdict)
    _check_files(home.stores.files(generated.conversation_ids), generated, records, verdict)
    _check_events(home.stores.events(home.cli), generated, records, verdict)
    _check_queue(home, generated, verdict)
    staging = home.stores.staged()
    if staging:
        verdict.other(f"blobs/.staging holds {len(staging)} leftover file(s): {staging[:3]}")
    return verdict


def _check_records(
    generated: Generated,
    records: dict[str, list[dict[str, Any]]],
    verdict: Verdict,
) -> None:
    seen: Counter[tuple[str, str]] = Counter()
    for cid, recs in records.items():
        for record in recs:
            key = (cid, record["turn_id"])
            seen[key] += 1
            want = generated.turns.get(key)
            if want is None:
                verdict.double(f"a turn record for {key}, which must have none")
                continue
            _check_record(record, want, verdict)
    for key, count in seen.items():
        if count > 1 and key in generated.turns:
            verdict.double(f"{count} turn records for {key}")
    for key, want in generated.turns.items():
        if key not in seen:
            verdict.lose(f"no turn record for {key} ({want.kind})")


def _check_record(record: dict[str, Any], want: ExpectedTurn, verdict: Verdict) -> None:
    label = f"{want.turn_id} ({want.kind})"
    got = (record["decision"], record["format"], record["carried"])
    if got != (want.decision, want.format, want.carried):
        verdict.lose(
            f"{label}: recorded {got}, expected {(want.decision, want.format, want.carried)}"
        )
        return
    if want.export is None:
        if record["export"] is not None:
            verdict.double(f"{label}: an export on a {want.decision} record")
        return
    export = record["export"]
    if export is None or not record["event_sent"]:
        verdict.lose(f"{label}: export {export is not None}, event_sent {record['event_sent']}")
        return
    if (export["row_count"], export["row_source"]) != (
        want.export.row_count,
        want.export.row_source,
    ):
        verdict.lose(f"{label}: {export['row_count']} rows from {export['row_source']}")


def _check_files(
    files: dict[str, bytes],
    generated: Generated,
    records: dict[str, list[dict[str, Any]]],
    verdict: Verdict,
) -> None:
    """Exactly one file per published turn, rows as generated; no other file anywhere."""
    import hashlib

    published = {
        r["export"]["blob"]: r
        for recs in records.values()
        for r in recs
        if r.get("export") and r["decision"] == "published"
    }
    per_turn: Counter[tuple[str, str]] = Counter()
    for relative in files:
        parts = relative.split("/")
        per_turn[(parts[1], parts[2])] += 1
        if relative not in published:
            verdict.double(f"a file no published record names: {relative}")
    for (cid, turn_id), count in per_turn.items():
        if count > 1:
            verdict.double(f"{count} files for {cid}/{turn_id}")
    for key, want in generated.turns.items():
        if want.export is None:
            continue
        record = next((r for r in records[key[0]] if r["turn_id"] == key[1]), None)
        if record is None or record.get("export") is None:
            continue  # already counted as lost
        data = files.get(record["export"]["blob"])
        if data is None:
            verdict.lose(f"{want.turn_id}: no file at {record['export']['blob']}")
            continue
        if hashlib.sha256(data).hexdigest() != record["export"]["sha256"]:
            verdict.other(f"{want.turn_id}: the file's sha256 is not the recorded one")
        problem = _rows_problem(data, want)
        if problem:
            verdict.lose(f"{want.turn_id} ({want.export.format}): {problem}")


def _rows_problem(data: bytes, want: ExpectedTurn) -> str | None:
    assert want.export is not None
    try:
        rows = _parse_rows(want.export.format, data)
    except Exception as exc:  # a partial or corrupt file
        return f"the file does not parse: {type(exc).__name__}: {exc}"
    if len(rows) != want.export.row_count:
        return f"{len(rows)} rows in the file, expected {want.export.row_count}"
    for label, got, expected in (
        ("first", rows[0], want.export.first),
        ("last", rows[-1], want.export.last),
    ):
        for column, value in expected.items():
            if not _same(got.get(column), value):
                return f"{label} row {column}={got.get(column)!r}, expected {value!r}"
    return None


def _same(got: Any, want: Any) -> bool:
    """A cell as read back equals the generated value (CSV and XML give text, xlsx 13 for 13.0)."""
    if isinstance(want, int | float) and not isinstance(want, bool):
        try:
            return abs(float(got) - float(want)) < 1e-9
        except (TypeError, ValueError):
            return False
    return str(got) == str(want)


def _parse_rows(fmt: str, data: bytes) -> list[dict[str, Any]]:
    if fmt == "csv":
        text = data.decode("utf-8-sig")
        return list(csv.DictReader(io.StringIO(text, newline=""), strict=True))
    if fmt == "json":
        return list(json.loads(data))
    if fmt == "xml":
        import defusedxml.ElementTree as ET

        return [{child.tag: child.text for child in row} for row in ET.fromstring(data)]
    import openpyxl

    sheet = openpyxl.load_workbook(io.BytesIO(data), read_only=True).active
    values = list(sheet.iter_rows(values_only=True))
    header = [str(h) for h in values[0]]
    return [dict(zip(header, row, strict=False)) for row in values[1:]]


def _check_events(
    events: list[dict[str, Any]],
    generated: Generated,
    records: dict[str, list[dict[str, Any]]],
    verdict: Verdict,
) -> None:
    sent = Counter(e["export_id"] for e in events)
    wanted = {
        r["export"]["export_id"]: r["turn_id"]
        for recs in records.values()
        for r in recs
        if r.get("export") and (r["conversation_id"], r["turn_id"]) in generated.turns
    }
    for export_id, turn_id in wanted.items():
        if sent[export_id] == 0:
            verdict.lose(f"no export.published for {export_id} ({turn_id})")
        elif sent[export_id] > 1:
            verdict.double(f"{sent[export_id]} export.published for {export_id}")
    for export_id in sent:
        if export_id not in wanted:
            verdict.double(f"export.published for an export no turn should have: {export_id}")


def _check_queue(home: Home, generated: Generated, verdict: Verdict) -> None:
    if not home.stores.drained():
        verdict.lose("the queue still holds active messages")
    dead = json.loads(home.cli("dlq", "list", "--json"))
    verdict.dead_letters = len(dead)
    unmatched = list(dead)
    for planted in generated.planted:
        match = next(
            (
                d
                for d in unmatched
                if d["reason"] == planted.reason
                and d["session_id"] == planted.session_id
                and (not planted.message_id or d["message_id"] == planted.message_id)
            ),
            None,
        )
        if match is None:
            verdict.other(f"planted {planted.kind} ({planted.message_id}) not dead-lettered")
        else:
            unmatched.remove(match)
    for d in unmatched:
        # The queue's delivery count, to tell a cause dead-lettered early from one that used
        # up MAX_ATTEMPTS (under injected faults and kills: rare, and within the contract).
        # On Service Bus it can read less than the worker's own count, which also counts
        # a delivery whose session closed unsettled (worker/azure/sessions.py).
        verdict.lose(
            f"dead-lettered: {d['reason']} {d['message_id']} after {d['delivery_count']} "
            f"deliveries: {d['description'][:120]}"
        )


# --------------------------------------------------------------------------------------
def run(options: Options) -> int:
    """The whole harness; the figure line last; 0 when nothing was lost or doubled."""
    home_path = options.home or Path(tempfile.mkdtemp(prefix="export-worker-chaos-"))
    if options.backend == "azure":
        with azure_stores(options.lock_seconds) as stores:
            try:
                return _run(options, home_path, stores)
            finally:
                stores.drop()
    return _run(options, home_path, LocalStores(home_path))


def _run(options: Options, home_path: Path, stores: Stores) -> int:
    started = time.monotonic()
    deadline = started + options.timeout
    generated = generate(
        options.turns,
        options.conversations,
        options.seed,
        big_every=options.big_every,
        big_rows=options.big_rows,
    )
    home = Home(home_path, options, stores)
    if isinstance(stores, AzureStores):
        stores.prepare(generated.conversation_ids)
    fixture = home_path / "fixture.json"
    fixture.write_text(json.dumps(generated.fixture), encoding="utf-8")
    home.cli("dev", "seed", str(fixture))
    print(
        f"seeded {len(generated.turns)} turns over {options.conversations} conversations "
        f"and {len(generated.planted)} planted poison messages in {home_path}",
        flush=True,
    )
    rng = random.Random(options.seed)
    stats = ChaosStats()
    if options.kills:
        points = options.crash_points
        points = crash_points_for(options.kills, options.turns) if points is None else points
        low, high = options.kill_every
        print(f"crash points: {points or 'none'}; a SIGKILL every {low}-{high} s")
    if options.kills > 0 or options.fault_rate > 0:
        kill_phase(home, rng, stats, deadline)
    before_drain = _recorded(home, generated.conversation_ids)
    drain_phase(home, stats, deadline, options.verbose)
    replayed = replay_phase(home, stats, deadline, options.verbose)
    verdict = verify(home, generated)
    leftovers = sorted(p.name for p in (home_path / "tmp").iterdir())
    if leftovers:
        stats.failures.append(f"left in TMPDIR after the final drain's sweep: {leftovers}")
    kinds = ", ".join(f"{k}={v}" for k, v in sorted(stats.kills.items())) or "none"
    print(f"backend: {options.backend}")
    print(f"processes spawned: {stats.spawned}; deaths by cause: {kinds}")
    if options.kills and stats.total_kills < options.kills:
        print(f"note: the queue drained after {stats.total_kills} of {options.kills} kills")
    if options.fault_rate:
        print(
            f"transient faults on every port call at rate {options.fault_rate} "
            f"(call_attempts {options.call_attempts}, max_attempts {options.max_attempts})"
        )
    print(f"turn records before the final drain: {before_drain} of {len(generated.turns)}")
    if replayed.delivery_count:
        print(
            "dead-lettered for their delivery count, replayed and drained: "
            f"{replayed.delivery_count}"
        )
    if replayed.injected_faults:
        print(
            "dead-lettered transient_failure after the injected faults' last attempt, "
            f"replayed and drained: {replayed.injected_faults}"
        )
    for failure in stats.failures:
        print(f"worker failure: {failure}")
    for problem in verdict.problems[:50]:
        print(problem)
    print(f"elapsed: {time.monotonic() - started:.1f} s")
    print(
        f"chaos: turns={len(generated.turns)} kills={stats.total_kills} lost={verdict.lost} "
        f"duplicates={verdict.duplicates} dead_letters={verdict.dead_letters} "
        f"(planted {verdict.planted}) replayed={replayed.total}",
        flush=True,
    )
    ok = not verdict.lost and not verdict.duplicates and not verdict.problems
    if ok and not stats.failures and options.home is None:
        shutil.rmtree(home_path, ignore_errors=True)
    return 0 if ok and not stats.failures else 1


def _row_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    bounds = (int(low), int(high or low))
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"not a range of rows: {text!r}")
    return bounds


def parse(argv: list[str] | None = None) -> Options:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--kills", type=int, default=50, help="deaths to cause (0: none)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2, help="run processes at once")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="transient faults per call")
    parser.add_argument(
        "--crash-points", default=None, help="NAME:P,... ('' for none; default from --kills)"
    )
    parser.add_argument("--lock-seconds", type=float, default=1.0)
    parser.add_argument("--max-attempts", type=int, default=5)
    parser.add_argument("--call-attempts", type=int, default=None)
    parser.add_argument("--big-every", type=int, default=12)
    parser.add_argument(
        "--big-rows",
        type=_row_range,
        default=(600, 900),
        help="LO-HI rows a page of a big retrieval holds (past 2,048 its digests are logged)",
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--home", type=Path, default=None, help="keep the run in this folder")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument(
        "--backend", choices=("local", "azure"), default="local", help="azure: on the stand-ins"
    )
    parser.add_argument(
        "--kill-every", default="0.25,1.0", help="LOW,HIGH seconds between SIGKILLs"
    )
    parser.add_argument(
        "--backoff-base", type=float, default=0.0, help="retry backoff (0: retries at once)"
    )
    a = parser.parse_args(argv)
    low, high = (float(part) for part in a.kill_every.split(","))
    return Options(
        turns=a.turns,
        conversations=a.conversations,
        kills=a.kills,
        seed=a.seed,
        workers=a.workers,
        fault_rate=a.fault_rate,
        crash_points=a.crash_points,
        lock_seconds=a.lock_seconds,
        max_attempts=a.max_attempts,
        # Under faults, 6 tries per call: see tests/reliability/test_faults.py for the odds.
        call_attempts=a.call_attempts if a.call_attempts or not a.fault_rate else 6,
        big_every=a.big_every,
        big_rows=a.big_rows,
        timeout=a.timeout,
        home=a.home,
        verbose=a.verbose,
        backend=a.backend,
        kill_every=(low, high),
        backoff_base=a.backoff_base,
    )


if __name__ == "__main__":
    sys.exit(run(parse()))
