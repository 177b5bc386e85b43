"""Scratch folders for the files an export spills to disk while it is written.

A workbook is written through xlsxwriter's constant-memory mode, which keeps each sheet's
rows in a named temporary file until the workbook closes. A worker killed mid-workbook
(SIGKILL, the OOM killer) never closes it, and those files would stay in the temporary
folder for as long as the machine (or, in Azure, the container) does. So each workbook gets
its own folder, named by the writing process (`export-worker-{pid}-…`), removed whole when
the export ends; and a worker starting up removes the folders of writers that are no longer
running (`sweep`), as the local blob store does with its staged files.

The row spool and the digest file are anonymous (`O_TMPFILE`): they have no name to leave.
Where the file system cannot make one (overlayfs before Linux 6.6, some network file
systems), Python names the file and removes the name at once; the name then carries the
same prefix (`scratch_prefix`), so a kill in that instant leaves a file the sweep removes.

The temporary folder itself is chosen without writing in it (`choose_temporary_folder`):
Python's own choice leaves a file of no name of ours behind when the process is killed at
the wrong moment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "export-worker-"
# Where Python looks for a temporary folder, in its order (tempfile._candidate_tempdir_list).
_ENVIRONMENT = ("TMPDIR", "TEMP", "TMP")
_SYSTEM = ("/tmp", "/var/tmp", "/usr/tmp")


def scratch_prefix() -> str:
    """The start of the name of every file or folder this process makes in the temporary
    folder itself (what it makes inside a scratch folder goes with the folder)."""
    return f"{PREFIX}{os.getpid()}-"


def scratch_folder() -> tempfile.TemporaryDirectory[str]:
    """A new folder in the temporary folder for one export's spilled files, named by this
    process; removed with everything in it when the context exits."""
    return tempfile.TemporaryDirectory(prefix=scratch_prefix())


def choose_temporary_folder() -> str:
    """Choose this process's temporary folder as Python would, but without a probe file.

    On its first use `tempfile` tries each candidate folder by creating a file with a random
    eight-character name, writing four bytes and removing it. A process killed between the
    create and the remove leaves that file behind, with no name of ours for `sweep` to know
    it by (the crash harness's SIGKILLs found one: the start-up sweep is a worker's first
    use). So the choice is made first, by permission instead of by writing: the first of
    TMPDIR, TEMP, TMP, /tmp, /var/tmp, /usr/tmp and the working folder that is a folder this
    process may create files in. A folder already chosen is kept; when no candidate passes,
    Python's own probe decides (and raises its own error when nothing is usable).
    """
    if tempfile.tempdir is not None:
        return tempfile.tempdir
    candidates = [os.environ.get(name) for name in _ENVIRONMENT]
    candidates += [*_SYSTEM, _working_folder()]
    for candidate in candidates:
        if not candidate:
            continue
        folder = os.path.abspath(candidate)
        # access() says EROFS for a read-only file system, as the probe's write would.
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            tempfile.tempdir = folder
            return folder
    return tempfile.gettempdir()


def sweep(root: str | Path | None = None) -> int:
    """Remove the scratch folders and files under `root` (the temporary folder by default)
    whose writer is no longer running; how many were removed."""
    folder = Path(root) if root is not None else Path(tempfile.gettempdir())
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        pid = _writer(entry.name)
        if pid is None or process_alive(pid):
            continue
        # Another worker may sweep it too: whichever comes second finds nothing.
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
        else:
            continue  # a link or anything else: not made by tempfile
        removed += 1
    return removed


def process_alive(pid: int) -> bool:
    """Whether process `pid` may still be running (this one always is)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


def process_start(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since the machine booted (Linux: field 22
    of `/proc/<pid>/stat`); None when it is not running or this cannot be read (no /proc).

    A process id is reused once its process has exited; the pair (id, start) is not, so it
    tells the process that wrote a file from a later one that was given the same id.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The name in field 2 is in parentheses and may hold spaces or ')': count from the last.
    fields = stat.rpartition(b")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _working_folder() -> str | None:
    try:
        return os.getcwd()
    except OSError:
        return None  # removed while this process runs in it


def _writer(name: str) -> int | None:
    """The process id in a scratch folder's name; None for any other name."""
    if not name.startswith(PREFIX):
        return None
    pid_text, _, rest = name[len(PREFIX) :].partition("-")
    if not pid_text.isdigit() or not rest:
        return None
    return int(pid_text)
