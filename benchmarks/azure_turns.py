"""Case az of `run_all.py`: the headline turns of case d on the Azure backend, with the
operations each turn costs on Service Bus, Blob Storage and Cosmos DB.

    .venv/bin/python benchmarks/azure_turns.py --turns 100 --local   # standalone, with case d

Azurite and cosmosdb-server are started on free ports by `scripts/emulators.py` (or
reused when `EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING` and
`EXPORT_WORKER_TEST_COSMOS_ENDPOINT` name running ones, as `scripts/test-emulated` does);
the Service Bus test broker (tests/servicebus_broker) runs in this process, with the
project's entities, from `tests/emulated/azure_environment.py`. With
`EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING` set, every `EXPORT_WORKER_*` setting is taken
as it is instead (a real namespace, or stand-ins started elsewhere) and Service Bus
operations are not counted. Whatever was started here is stopped at the end.

The measured process is the worker's CLI (`run --drain`, at default settings, on resources
that exist, as in production) under `launch.py` (wall, CPU and peak RSS from wait4). It
runs twice: on the empty queue (its start-up and shutdown) and on the seeded turns; each
figure per turn is the difference over the number of turns. Operations are counted from
outside the worker's logic: Service Bus by the broker, per frame it handles
(`tests/servicebus_broker/tally.py`); Blob and Cosmos by a hook on azure-core's aiohttp
transport (`worker/testing/http_calls.py`), installed in the measured interpreter before
the CLI's `main` runs. A run whose outcome is wrong (a turn not published, other artifacts
read, an export blob whose bytes do not match its record, an event missing, a dead letter)
fails. What cannot be started is reported as the reason the case did not run.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from azure_counts import http_totals, per_turn, tally_between
from azure_report import AzureRun, Measured, operations_section, parse_output
from stopping import run_stoppably, stoppable

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PYTHON = sys.executable
SKIP_ENV = "EXPORT_WORKER_SKIP_EMULATED"
REUSE_ENV = ("EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING", "EXPORT_WORKER_TEST_COSMOS_ENDPOINT")
# The measured interpreter: the HTTP hook, then the CLI's own `main` (what the console
# script `export-worker` runs), with the arguments a user gives.
RUNNER = (
    "import sys\n"
    "from worker.testing.http_calls import install\n"
    "install(sys.argv[1])\n"
    "from worker.cli import main\n"
    "sys.argv = ['export-worker', 'run', '--drain']\n"
    "main()\n"
)


def azure_case(bench: Any, turns: int, failed: type[Exception]) -> AzureRun:
    """run_all's case az: measure in a process of its own (it hosts the broker), parse it."""
    scratch = bench.home("az")
    proc = run_stoppably(  # stopped, it stops the stand-ins it started
        [PYTHON, str(BENCH / "azure_turns.py"), "--turns", str(turns), "--scratch", str(scratch)]
    )
    (bench.logs / "az.out").write_text(proc.stdout, encoding="utf-8")
    (bench.logs / "az.err").write_text(proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise failed(f"az: {proc.stderr[-1500:]}")
    return parse_output(proc.stdout)


# --------------------------------------------------------------------------------------
# The measuring process
# --------------------------------------------------------------------------------------
def _emulators_module() -> Any:
    spec = importlib.util.spec_from_file_location("emulators", ROOT / "scripts" / "emulators.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Unavailable(Exception):
    """The stand-ins could not be started (or were switched off): the reason, for the report."""


@dataclass(frozen=True)
class StandIns:
    """Where the Azure backend's services are, for a worker started with `env`."""

    env: dict[str, str]
    environment: Any  # tests/emulated's AzureEnvironment, or None on a namespace of one's own
    node_pids: tuple[int, ...]  # the servers this run started, for their CPU time


@contextmanager
def stand_ins(scratch: Path, settings: dict[str, str] | None = None) -> Iterator[StandIns]:
    """Start what is missing (Azurite, cosmosdb-server, the test broker) and stop what was
    started when the block ends; with `EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING` set, the
    environment as it is. Raises `Unavailable` when they cannot run."""
    if os.environ.get(SKIP_ENV) == "1":
        raise Unavailable(f"{SKIP_ENV}=1")
    if os.environ.get("EXPORT_WORKER_SERVICEBUS_CONNECTION_STRING"):
        yield StandIns({**os.environ, **(settings or {})}, None, ())
        return
    started: Path | None = None
    emulators = _emulators_module()
    if not all(os.environ.get(name) for name in REUSE_ENV):
        started = scratch / "emulators"
        try:
            os.environ.update(emulators.start(started))
        except (SystemExit, RuntimeError, OSError) as exc:
            emulators.stop(started)
            raise Unavailable(f"Azurite or cosmosdb-server did not start ({exc})") from exc
    try:
        sys.path.insert(0, str(ROOT))
        from tests.emulated.azure_environment import azure_environment

        with azure_environment() as environment:
            yield StandIns(environment.env(**(settings or {})), environment, _started_pids(started))
            asyncio.run(environment.drop_database())
    finally:
        if started is not None:
            emulators.stop(started)


def creating(env: dict[str, str], create: bool) -> dict[str, str]:
    """ENV with the worker's resource creation on (seeding, setting up) or off (the measured
    worker, as in production)."""
    return {**env, "EXPORT_WORKER_COSMOS_CREATE_RESOURCES": "true" if create else "false"}


def create_resources(home: Path, env: dict[str, str], logs: Path, failed: type[Exception]) -> None:
    """The database, its containers and the blob containers, as a deployment has them (the
    measured worker runs with resource creation off, as in production)."""
    setup = creating(env, True)
    nothing = logs / "nothing.json"
    nothing.write_text("{}", encoding="utf-8")
    created = subprocess.run(
        [str(Path(PYTHON).with_name("export-worker")), "dev", "seed", str(nothing)],
        cwd=home,
        env=setup,
        capture_output=True,
        text=True,
        check=False,
    )
    if created.returncode != 0:
        raise failed(f"az: creating the resources failed: {created.stderr[-1500:]}")
    asyncio.run(_create_blob_containers(env))


def measure(
    turns: int, scratch: Path, with_local: bool, settings: dict[str, str] | None = None
) -> AzureRun:
    """Start what is missing, measure, stop what was started."""
    try:
        with stand_ins(scratch, settings) as found:
            return _measure_on(
                turns, scratch, found.env, found.environment, with_local, found.node_pids
            )
    except Unavailable as exc:
        return AzureRun(f"not run: {exc}")


def _measure_on(
    turns: int,
    scratch: Path,
    env: dict[str, str],
    environment: Any,
    with_local: bool,
    node_pids: tuple[int, ...] = (),
) -> AzureRun:
    sys.path.insert(0, str(BENCH))
    from run_all import Bench, Failed, workload

    logs = scratch / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    bench = Bench(scratch, logs, "audit")
    broker = environment.broker if environment is not None else None
    setup, run_env = creating(env, True), creating(env, False)
    home = bench.home("az")
    create_resources(home, env, logs, Failed)

    servers_cpu: dict[str, list[float]] = {}

    def counted(name: str) -> tuple[Measured, list[dict[str, Any]], dict[str, Counter[str]]]:
        calls_file = logs / f"{name}.http.json"
        before = broker.operations() if broker else {}
        cpu_before = _stand_ins_cpu(node_pids)
        usage, _ = bench.launch(name, [PYTHON, "-c", RUNNER, str(calls_file)], home, run_env)
        servers_cpu[name] = [
            b - a for a, b in zip(cpu_before, _stand_ins_cpu(node_pids), strict=True)
        ]
        after = broker.operations() if broker else {}
        calls = json.loads(calls_file.read_text(encoding="utf-8"))
        return Measured(usage.wall, usage.cpu, usage.rss_mb), calls, tally_between(before, after)

    empty, empty_calls, empty_sb = counted("az-empty")
    manifest = workload(
        "seed-headline", home, "--turns", str(turns), "--backend", "azure", env=setup
    )
    project, calls, sb = counted("az-worker")
    outcome = workload("outcome", home, "--backend", "azure", env=setup)
    notes = check_outcome(outcome, manifest, turns, environment, Failed)
    blob_host = _blob_host(env)
    operations = per_turn(http_totals(calls, blob_host), http_totals(empty_calls, blob_host), turns)
    if broker is not None:
        operations = {
            "Service Bus": per_turn({"sb": sb}, {"sb": empty_sb}, turns)["sb"],
            **operations,
        }
    else:
        notes.append("Service Bus operations not counted: a namespace this run did not start")
    run_cpu, empty_cpu = servers_cpu["az-worker"], servers_cpu["az-empty"]
    broker_ms, nodes_ms = ((r - e) / turns * 1000 for r, e in zip(run_cpu, empty_cpu, strict=True))
    if broker is not None:
        notes.append(
            "CPU per turn of the test broker (a thread of the measuring process): "
            f"{broker_ms:.0f} ms"
        )
    if node_pids:
        notes.append(f"CPU per turn of Azurite and cosmosdb-server together: {nodes_ms:.0f} ms")
    local = _local(bench, turns) if with_local else None
    return AzureRun(None, turns, project, empty, operations, tuple(notes), local)


async def _create_blob_containers(env: dict[str, str]) -> None:
    """The artifacts and exports containers (a deployment creates them; the worker run
    here does not, with resource creation off as in production)."""
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob.aio import BlobServiceClient

    service = BlobServiceClient.from_connection_string(env["EXPORT_WORKER_BLOB_CONNECTION_STRING"])
    async with service:
        for name in ("ARTIFACTS_CONTAINER", "EXPORTS_CONTAINER"):
            container = env.get(f"EXPORT_WORKER_{name}", name.split("_")[0].lower())
            try:
                await service.create_container(container)
            except ResourceExistsError:
                continue


def _started_pids(state: Path | None) -> tuple[int, ...]:
    """The stand-in servers this run started (scripts/emulators.py records them)."""
    if state is None:
        return ()
    try:
        return tuple(json.loads((state / "pids.json").read_text(encoding="utf-8")).values())
    except (OSError, ValueError):
        return ()


def _stand_ins_cpu(node_pids: tuple[int, ...]) -> tuple[float, float]:
    """CPU seconds so far of this process (the broker's thread; the main one only waits)
    and of the started servers (from /proc: user, system, and their reaped children)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    servers = 0.0
    for pid in node_pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        servers += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return own.ru_utime + own.ru_stime, servers


def _blob_host(env: dict[str, str]) -> str:
    from urllib.parse import urlsplit

    fields = dict(
        part.split("=", 1)
        for part in env["EXPORT_WORKER_BLOB_CONNECTION_STRING"].split(";")
        if "=" in part
    )
    return urlsplit(fields.get("BlobEndpoint", "")).netloc


def check_outcome(
    outcome: dict[str, Any],
    manifest: dict[str, Any],
    turns: int,
    environment: Any,
    failed: type[Exception],
) -> list[str]:
    """Fail unless every turn was published from its two winning artifacts, with its blob,
    its turn record and its event right; the checks made, as notes."""
    exports = outcome["exports"]
    problems = []
    if len(exports) != turns or any(e["decision"] != "published" for e in exports):
        problems.append(f"{len(exports)} turns published, expected {turns}")
    if outcome["dead_letters"] or outcome["unexported_decisions"]:
        problems.append(
            f"dead letters {outcome['dead_letters']}, {outcome['unexported_decisions']}"
        )
    winners = {t["turn_id"]: sorted(t["blobs"]) for t in manifest["turns"]}
    for export in exports:
        if sorted(export["export"]["source_artifacts"]) != winners.get(export["turn_id"]):
            problems.append(f"{export['turn_id']} read other artifacts than its winning two")
    notes = [f"{len(exports)} turn records `published`, each from its 2 winning artifacts"]
    if environment is not None:
        conversations = [t["conversation_id"] for t in manifest["turns"]]
        blobs = asyncio.run(environment.export_blobs(conversations))
        for export in exports:
            data = blobs.get(export["export"]["blob"])
            if data is None or hashlib.sha256(data).hexdigest() != export["export"]["sha256"]:
                problems.append(f"{export['export']['blob']}: bytes do not match the record")
        events = asyncio.run(environment.events())
        ids = sorted(e["export"]["export_id"] for e in exports)
        if sorted(e.get("export_id") for e in events) != ids:
            problems.append(f"{len(events)} export.published events, not one per export")
        if environment.active_messages():
            problems.append(f"{environment.active_messages()} messages left on the queue")
        shas = {e["export"]["sha256"] for e in exports}
        notes.append(
            f"{len(blobs)} export blobs whose sha256 matches their record "
            f"({'all identical' if len(shas) == 1 else f'{len(shas)} distinct'}); "
            f"{len(events)} export.published events, one per export; queue empty"
        )
    if problems:
        raise failed("az: " + "; ".join(problems[:5]))
    return notes


def _local(bench: Any, turns: int) -> tuple[Measured, Measured]:
    """Case d's measurement of the same turns on the local backend, in this run."""
    from run_all import workload

    empty_home = bench.home("local-empty")
    workload("seed-empty", empty_home)
    empty = bench.worker("local-empty", empty_home)
    home = bench.home("local-turns")
    workload("seed-headline", home, "--turns", str(turns))
    project = bench.worker("local-turns", home)
    outcome = workload("outcome", home)
    if len(outcome["exports"]) != turns:
        raise RuntimeError(f"local: {len(outcome['exports'])} exports, not {turns}")
    return (
        Measured(project.wall, project.cpu, project.rss_mb),
        Measured(empty.wall, empty.cpu, empty.rss_mb),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--scratch", type=Path, default=None, help="a fresh folder (default: temp)")
    parser.add_argument(
        "--local", action="store_true", help="also measure the local backend (case d) here"
    )
    parser.add_argument(
        "--concurrency", type=int, default=None, help="session workers (default: the setting's)"
    )
    args = parser.parse_args(argv)
    settings = (
        {} if args.concurrency is None else {"EXPORT_WORKER_CONCURRENCY": str(args.concurrency)}
    )
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="export-bench-az-"))
    try:
        run = measure(args.turns, scratch, args.local, settings)
    finally:
        if args.scratch is None:  # a folder of our own: the homes, logs and servers' data
            shutil.rmtree(scratch, ignore_errors=True)
    if run.local is not None and not run.skipped:
        turns, empty = run.local
        local_ms = (turns.wall - empty.wall) / run.turns * 1000
        print("\n".join(operations_section(run)), file=sys.stderr)
        print(
            f"az {run.ms():.1f} ms/turn; local {local_ms:.1f} ms/turn; "
            f"ratio {run.ms() / local_ms:.1f}x",
            file=sys.stderr,
        )
    sys.stdout.write(json.dumps(run.to_json()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(stoppable(main))
