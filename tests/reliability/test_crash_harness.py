"""The crash harness at CI size, and the sweeps it relies on to leave nothing behind: the
staged blob files and the workbook scratch folders of killed writers."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from worker.local.blobs import LocalBlobs
from worker.ports import BlobInfo

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "benchmarks" / "chaos" / "crash_harness.py"
INJECTED_REPLAYED = (
    "dead-lettered transient_failure after the injected faults' last attempt, "
    "replayed and drained: "
)
FIGURES = re.compile(
    r"^chaos: turns=(\d+) kills=(\d+) lost=(\d+) duplicates=(\d+) "
    r"dead_letters=(\d+) \(planted (\d+)\) replayed=(\d+)$"
)


def run_harness(*args: str, timeout: float = 240) -> tuple[int, list[str], tuple[int, ...]]:
    """Run the harness as one command; its exit code, output lines and figure line."""
    proc = subprocess.run(
        [sys.executable, str(HARNESS), *args],
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
    )
    lines = proc.stdout.decode().strip().splitlines()
    assert lines, proc.stderr.decode()[-2000:]
    match = FIGURES.match(lines[-1])
    assert match, lines[-5:]
    return proc.returncode, lines, tuple(int(g) for g in match.groups())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("turns", "kills", "args"),
    [
        (40, 8, ("--conversations", "8", "--seed", "11")),
        # Every other retrieval is two pages of 2,100-2,400 rows, the second repeating five
        # of the first: the group's digests go to the turn's digest file, and the files must
        # hold each row once, through the kills.
        (20, 6, ("--conversations", "4", "--seed", "12", "--big-every", "2",
                 "--big-rows", "2100-2400")),
    ],
    ids=["small-groups", "large-groups-logged"],
)  # fmt: skip
def test_killed_workers_lose_nothing_and_double_nothing(
    turns: int, kills: int, args: tuple[str, ...]
) -> None:
    code, lines, figures = run_harness("--turns", str(turns), "--kills", str(kills), *args)
    ran, died, lost, duplicates, dead, planted, replayed = figures
    assert (ran, lost, duplicates) == (turns, 0, 0), lines[-25:]
    assert died >= kills
    assert dead == planted >= 4
    assert replayed == 0  # fewer than ten deaths exhaust no delivery count
    assert code == 0, lines[-25:]


@pytest.mark.slow
def test_turns_dead_lettered_for_their_delivery_count_are_replayed_and_lose_nothing() -> None:
    # Every blob write kills its worker: each published turn is delivered ten times without
    # a verdict and dead-lettered by the queue, as Service Bus does. The harness replays
    # those as an operator would, and the drain after it publishes each exactly once.
    code, lines, figures = run_harness(
        "--turns", "4", "--conversations", "2", "--kills", "20", "--seed", "11",
        "--crash-points", "during_blob:1.0", "--kill-every", "5,6",
    )  # fmt: skip
    turns, kills, lost, duplicates, dead, planted, replayed = figures
    assert (turns, lost, duplicates) == (4, 0, 0), lines[-25:]
    assert kills >= 10 and replayed >= 1 and dead == planted, lines[-25:]
    assert code == 0, lines[-25:]


@pytest.mark.slow
def test_turns_dead_lettered_after_their_attempts_on_injected_faults_are_replayed_whole() -> None:
    # Three calls in ten fail, each tried once, and two deliveries end a turn: most turns
    # run out of attempts and are dead-lettered `transient_failure`, many after their file
    # or record was written. Replayed once the faults stop, as an operator replays an
    # outage's dead letters, each turn ends with one file, one record and one event.
    code, lines, figures = run_harness(
        "--turns", "12", "--conversations", "4", "--kills", "0", "--seed", "3",
        "--fault-rate", "0.3", "--call-attempts", "1", "--max-attempts", "2",
    )  # fmt: skip
    turns, kills, lost, duplicates, dead, planted, replayed = figures
    assert (turns, kills, lost, duplicates) == (12, 0, 0, 0), lines[-25:]
    assert dead == planted >= 4, lines[-25:]
    injected = [line for line in lines if "after the injected faults' last attempt" in line]
    assert replayed >= 3 and injected == [f"{INJECTED_REPLAYED}{replayed}"], lines[-25:]
    assert code == 0, lines[-25:]


def test_only_a_transient_failure_of_an_injected_fault_counts_as_injected() -> None:
    from crash_harness import is_injected_fault  # tests/reliability/conftest.py: on the path

    def dead(reason: str, description: str) -> dict[str, str]:
        return {"reason": reason, "description": description}

    assert is_injected_fault(dead("transient_failure", "TransientError at faults.py:88"))
    assert not is_injected_fault(dead("handler_error", "TransientError at faults.py:88"))
    # A stand-in's own failure is the service's, not the harness's: it stays dead-lettered.
    real = "TransientError (Cosmos DB) at timeouts.py:278 from CosmosHttpResponseError 429"
    assert not is_injected_fault(dead("transient_failure", real))
    assert not is_injected_fault(dead("transient_failure", "TransientError at faults.py:88 x"))
    assert not is_injected_fault({"reason": "transient_failure"})


def test_a_killed_writers_staged_file_is_swept_when_the_blobs_open(tmp_path: Path) -> None:
    root = tmp_path / "blobs"
    child = textwrap.dedent(
        f"""
        import asyncio, os
        from worker.local.blobs import LocalBlobs
        from worker.ports import BlobInfo
        async def main():
            upload = await LocalBlobs({str(root)!r}).upload(
                "exports/c/t/x.csv", BlobInfo("text/csv", "x.csv", {{}})
            )
            await upload.write(b"half a file")
            os._exit(137)
        asyncio.run(main())
        """
    )
    assert subprocess.run([sys.executable, "-c", child], cwd=ROOT).returncode == 137
    assert len(list((root / ".staging").iterdir())) == 1

    async def live_upload_survives_a_sweep() -> None:
        blobs = LocalBlobs(root)  # sweeps the dead writer's file
        assert list((root / ".staging").iterdir()) == []
        upload = await blobs.upload("exports/c/t/y.csv", BlobInfo("text/csv", "y.csv", {}))
        await upload.write(b"in progress")
        LocalBlobs(root)  # another process opening the home must not take it
        assert len(list((root / ".staging").iterdir())) == 1
        await upload.commit()
        assert list((root / ".staging").iterdir()) == []
        assert not (root / "exports" / "c" / "t" / "x.csv").exists()

    asyncio.run(live_upload_survives_a_sweep())


def test_a_writer_killed_mid_workbook_leaves_a_folder_the_next_worker_sweeps(
    tmp_path: Path,
) -> None:
    temporary, home = tmp_path / "tmp", tmp_path / "home"
    temporary.mkdir()
    home.mkdir()
    child = textwrap.dedent(
        f"""
        import asyncio, os
        from worker.export_file import write_export
        from worker.local.blobs import LocalBlobs
        from worker.ports import BlobInfo
        def rows():
            yield [1, "a"]
            os._exit(137)  # killed mid-workbook: its row file is written, never closed
        asyncio.run(write_export(
            LocalBlobs({str(tmp_path / "blobs")!r}), "exports/c/t/x.xlsx",
            BlobInfo("application/octet-stream", "x.xlsx", {{}}), "xlsx", ["n", "s"],
            rows(), 2, max_bytes=1 << 20, csv_bom=True,
        ))
        """
    )
    env = {**os.environ, "TMPDIR": str(temporary)}
    assert subprocess.run([sys.executable, "-c", child], cwd=ROOT, env=env).returncode == 137
    (left,) = temporary.iterdir()
    assert left.name.startswith("export-worker-") and list(left.iterdir())

    worker = Path(sys.executable).with_name("export-worker")
    env = {k: v for k, v in env.items() if not k.startswith("EXPORT_WORKER_")}
    env |= {"EXPORT_WORKER_HOME": str(home), "EXPORT_WORKER_BACKEND": "local"}
    started = subprocess.run(
        [str(worker), "run", "--drain"], cwd=home, env=env, capture_output=True, timeout=120
    )
    assert started.returncode == 0, started.stderr.decode()[-2000:]
    assert list(temporary.iterdir()) == []
    assert b'"event": "scratch_swept"' in started.stderr and b'"removed": 1' in started.stderr


def test_crash_points_are_off_unless_named_and_fire_as_a_kill(tmp_path: Path) -> None:
    import os

    from worker.checkpoints import no_checkpoint
    from worker.testing.settings import HarnessSettings

    with pytest.raises(ValueError, match="unknown point"):
        HarnessSettings(crash_points="nowhere:1").checkpoint()
    with pytest.raises(ValueError, match="NAME:NUMBER"):
        HarnessSettings(crash_points="after_blob:often").checkpoint()
    off = HarnessSettings(crash_points="", slow_points="").checkpoint()
    assert off is no_checkpoint
    asyncio.run(off("after_blob"))  # off: returns

    env = {**os.environ, "EXPORT_WORKER_CRASH_POINTS": "after_record:1"}
    env["EXPORT_WORKER_CRASH_SEED"] = "3"
    child = (
        "import asyncio; from worker.testing.settings import HarnessSettings; "
        "point = HarnessSettings().checkpoint(); asyncio.run(point('after_blob')); "
        "asyncio.run(point('after_record')); print('survived')"
    )
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, cwd=ROOT)
    assert proc.returncode == 137
    assert proc.stdout == b""
    assert b"crash point after_record fired" in proc.stderr
