"""Scratch folders: a workbook's spilled rows live in a folder of its own, gone when the
export ends, and a worker killed mid-workbook leaves a folder the next worker sweeps."""

from __future__ import annotations

import asyncio
import errno
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
from worker.digest_file import DigestFile
from worker.spool import RowSpool

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


def test_sweep_removes_the_folders_and_files_of_writers_no_longer_running(
    tmp_path: Path,
) -> None:
    dead = _folder(tmp_path, f"export-worker-{_dead_pid()}-abc")
    # A spool or digest file named where the file system makes no anonymous ones.
    named = tmp_path / f"export-worker-{_dead_pid()}-def"
    named.write_bytes(b"")
    assert scratch.sweep(tmp_path) == 2
    assert not dead.exists() and not named.exists()


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
            live_file = tmp_path / f"export-worker-{alive.pid}-file"
            live_file.write_text("another running worker's spool")
            link = tmp_path / f"export-worker-{_dead_pid()}-link"
            link.symlink_to(kept[0])  # not something tempfile makes
            assert scratch.sweep(tmp_path) == 0
        finally:
            alive.kill()
    assert all(folder.exists() for folder in kept)
    assert live_file.exists() and link.is_symlink()


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


@pytest.fixture
def unchosen(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No temporary folder chosen yet in this process, and none named by the environment."""
    monkeypatch.setattr(tempfile, "tempdir", None)
    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _opened_under(folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files os.open is asked for under `folder` from now on (tempfile's probe uses it)."""
    opened: list[str] = []
    real_open = os.open

    def spy(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(f"{folder}{os.sep}"):
            opened.append(os.path.basename(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return opened


def test_pythons_own_choice_of_temporary_folder_writes_a_probe_file_a_kill_could_leave(
    tmp_path: Path, unchosen: pytest.MonkeyPatch
) -> None:
    # Why the worker chooses for itself: left to Python, its first temporary file costs a
    # file created and removed in the folder, named by eight random characters and no prefix.
    unchosen.setenv("TMPDIR", str(tmp_path))
    opened = _opened_under(tmp_path, unchosen)
    assert tempfile.gettempdir() == str(tmp_path)
    assert len(opened) == 1 and len(opened[0]) == 8
    assert list(tmp_path.iterdir()) == []  # removed, unless the process died in between


def test_the_temporary_folder_is_chosen_as_python_would_without_writing_in_it(
    tmp_path: Path, unchosen: pytest.MonkeyPatch
) -> None:
    unchosen.setenv("TMPDIR", str(tmp_path))
    opened = _opened_under(tmp_path, unchosen)
    assert scratch.choose_temporary_folder() == str(tmp_path)
    assert tempfile.gettempdir() == str(tmp_path)
    assert opened == []


def test_a_candidate_that_is_no_folder_is_passed_over_for_the_next(
    tmp_path: Path, unchosen: pytest.MonkeyPatch
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    (tmp_path / "folder").mkdir()
    unchosen.setenv("TMPDIR", str(a_file))
    unchosen.setenv("TEMP", str(tmp_path / "missing"))
    unchosen.setenv("TMP", str(tmp_path / "folder" / ".." / "folder"))
    assert scratch.choose_temporary_folder() == str(tmp_path / "folder")


def test_without_candidates_in_the_environment_the_system_folder_is_chosen(
    unchosen: pytest.MonkeyPatch,
) -> None:
    assert scratch.choose_temporary_folder() == "/tmp"


def test_a_temporary_folder_already_chosen_is_kept(
    tmp_path: Path, unchosen: pytest.MonkeyPatch
) -> None:
    unchosen.setattr(tempfile, "tempdir", str(tmp_path / "chosen"))
    unchosen.setenv("TMPDIR", str(tmp_path))
    assert scratch.choose_temporary_folder() == str(tmp_path / "chosen")


def test_a_worker_starting_and_sweeping_writes_nothing_in_the_temporary_folder(
    tmp_path: Path,
) -> None:
    # The whole command, in a process of its own: its start-up sweep is the first use of the
    # temporary folder, where the crash harness's SIGKILL found a probe file left behind.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    watch = f"""
import os, sys
from worker.cli import main
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith({str(temporary)!r}):
        opened.append(os.path.basename(args[0]))
sys.addaudithook(hook)
try:
    main(["run", "--drain"])
except SystemExit as exit:
    assert not exit.code, exit.code
print("opened:", opened)
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
    env.update(EXPORT_WORKER_HOME=str(tmp_path / "home"), TMPDIR=str(temporary))
    done = subprocess.run(
        [sys.executable, "-c", watch], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "opened: []"
    assert list(temporary.iterdir()) == []


@pytest.fixture
def no_anonymous_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`tmp_path` as the temporary folder, on a file system that cannot make anonymous files
    (O_TMPFILE), as overlayfs before Linux 6.6: Python's TemporaryFile names the file there
    and removes the name. The names of the files opened in it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real_open = os.open

    def refusing(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:  # opened on the folder itself
            raise OSError(errno.EOPNOTSUPP, "Operation not supported", path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    return _opened_under(tmp_path, monkeypatch)


def test_a_digest_file_that_cannot_be_anonymous_is_named_for_the_sweep(
    tmp_path: Path, no_anonymous_files: list[str]
) -> None:
    with DigestFile() as store:
        store.append(b"0123456789abcdef")
        assert store.read(0, 16) == b"0123456789abcdef"
    assert no_anonymous_files and all(
        name.startswith(scratch.scratch_prefix()) for name in no_anonymous_files
    )
    assert list(tmp_path.iterdir()) == []  # the name was removed at once


def test_a_row_spool_that_cannot_be_anonymous_is_named_for_the_sweep(
    tmp_path: Path, no_anonymous_files: list[str]
) -> None:
    rows = [{"n": n, "text": f"{n:0200d}"} for n in range(5000)]  # past its memory share
    with RowSpool() as spool:
        spool.extend("a", rows)
        assert list(spool.rows("a")) == rows
    assert no_anonymous_files and all(
        name.startswith(scratch.scratch_prefix()) for name in no_anonymous_files
    )
    assert list(tmp_path.iterdir()) == []
