"""Scratch folders: a workbook's spilled rows live in a folder of its own, gone when the
export ends, and a worker killed mid-workbook leaves a folder the next worker sweeps."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from workbooks import PATH, write_workbook

from worker import scratch

OTHER_PREFIX = "other-program-"
assert len(OTHER_PREFIX) == len(scratch.PREFIX)


def _dead_pid() -> int:
    """The id of a process that has exited (and been waited for)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "tmp_rows").write_text("half a sheet")
    return folder


def test_sweep_removes_the_folders_of_writers_no_longer_running(tmp_path: Path) -> None:
    dead = _folder(tmp_path, f"export-worker-{_dead_pid()}-abc")
    assert scratch.sweep(tmp_path) == 1
    assert not dead.exists()


def test_sweep_keeps_the_folders_of_running_writers_and_everything_else(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            kept = [
                _folder(tmp_path, f"export-worker-{alive.pid}-abc"),  # another running worker
                _folder(tmp_path, f"export-worker-{os.getpid()}-abc"),  # this one
                _folder(tmp_path, "export-worker-abc-def"),  # not named by a process id
                _folder(tmp_path, f"export-worker-{_dead_pid()}"),  # not a scratch folder's name
                _folder(tmp_path, f"other-{_dead_pid()}-abc"),
                # Another program's folder, its prefix as long as ours.
                _folder(tmp_path, f"{OTHER_PREFIX}{_dead_pid()}-abc"),
            ]
            stray = tmp_path / f"export-worker-{_dead_pid()}-file"
            stray.write_text("a file, not a folder")
            assert scratch.sweep(tmp_path) == 0
        finally:
            alive.kill()
    assert all(folder.exists() for folder in kept)
    assert stray.exists()


def test_sweep_of_a_missing_folder_removes_nothing(tmp_path: Path) -> None:
    assert scratch.sweep(tmp_path / "missing") == 0


def test_a_workbooks_rows_are_spilled_in_its_own_folder_removed_when_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    seen: list[list[str]] = []

    def rows() -> Iterator[list[Any]]:
        yield [1, "a"]
        # Mid-workbook: what a worker killed now would leave behind.
        seen.extend(
            sorted(p.name for p in folder.iterdir())
            for folder in temporary.iterdir()
            if folder.name.startswith(f"export-worker-{os.getpid()}-")
        )
        yield [2, "b"]

    asyncio.run(write_workbook(tmp_path / "blobs", rows()))
    assert len(seen) == 1 and seen[0]  # one folder, holding the sheet's row file
    assert list(temporary.iterdir()) == []  # gone with the export
    assert (tmp_path / "blobs" / PATH).read_bytes()[:2] == b"PK"
