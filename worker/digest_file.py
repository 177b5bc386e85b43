"""The digest log's store (`handlers.digest_log.DigestStore`): an anonymous temporary file.

A large group's row digests go here instead of memory (16 bytes a row: in row order and
sorted) until its repeats are found. The file is made at the first write, so a turn whose
groups stay small (the usual turn) opens none, and it disappears when closed, as the
row spool's files do.
"""

from __future__ import annotations

import os
import tempfile
from typing import IO

from worker.scratch import scratch_prefix


class DigestFile:
    """Append bytes, read them back by offset; the file is dropped on close."""

    __slots__ = ("_file", "_flushed", "_size")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._size = 0
        self._flushed = True  # nothing written since the last read's flush

    def append(self, data: bytes) -> int:
        if self._file is None:
            # Anonymous; named for the sweep where it cannot be (worker/scratch.py).
            self._file = tempfile.TemporaryFile(prefix=scratch_prefix())  # noqa: SIM115 - closed by close()
        offset = self._size
        self._file.write(data)
        self._size += len(data)
        self._flushed = False
        return offset

    def read(self, offset: int, size: int) -> bytes:
        if self._file is None or offset + size > self._size:
            raise ValueError("a read past what was written")
        if not self._flushed:  # the search reads thousands of slices after the last write
            self._file.flush()
            self._flushed = True
        data = os.pread(self._file.fileno(), size, offset)
        if len(data) != size:
            raise OSError(f"short read of the digest file: {len(data)} of {size} bytes")
        return data

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            self._size = 0

    def __enter__(self) -> DigestFile:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
