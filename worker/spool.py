"""A row spool: rows flow from artifact reads to disk once, then to the serialiser.

Selection needs the counts of every group before the first byte is written (dominance,
the excerpt test, the header). The spool keeps the rows out of memory meanwhile: past a
small buffer they live in an anonymous temporary file that disappears on close.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import Any

_MEMORY_BYTES = 4 * 1024 * 1024


class RowSpool:
    """Append (action, row) pairs; read them back in the same order."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=_MEMORY_BYTES, mode="w+b")  # noqa: SIM115
        self._actions: dict[str, int] = {}
        self._names: list[str] = []
        self.count = 0

    def append(self, action: str, row: dict[str, Any]) -> None:
        """Spool one row of `action`."""
        index = self._actions.setdefault(action, len(self._names))
        if index == len(self._names):
            self._names.append(action)
        line = json.dumps([index, row], ensure_ascii=False, separators=(",", ":"))
        self._file.write(line.encode("utf-8") + b"\n")
        self.count += 1

    def rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every spooled (action, row), in append order."""
        self._file.flush()
        self._file.seek(0)
        for line in self._file:
            index, row = json.loads(line)
            yield self._names[index], row

    def close(self) -> None:
        """Drop the spooled rows."""
        self._file.close()

    def __enter__(self) -> RowSpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
