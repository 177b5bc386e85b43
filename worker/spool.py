"""A row spool: rows flow from artifact reads to disk once, then to the serialiser.

Selection needs the counts of every group before the first byte is written (dominance,
the excerpt test, the header). The spool keeps the rows out of memory meanwhile: past a
small buffer they live in anonymous temporary files that disappear on close. Each action
has its own file, so the export reads each selected dataset once, in the order it wants,
even when its pages were fetched interleaved with another action's.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import IO, Any

_MEMORY_BYTES = 4 * 1024 * 1024


class RowSpool:
    """Append rows per action; read one action's rows back in append order."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes]] = {}
        self.count = 0

    def append(self, action: str, row: dict[str, Any]) -> None:
        """Spool one row of `action`."""
        spooled = self._files.get(action)
        if spooled is None:
            spooled = tempfile.SpooledTemporaryFile(max_size=_MEMORY_BYTES, mode="w+b")  # noqa: SIM115
            self._files[action] = spooled
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        spooled.write(line.encode("utf-8") + b"\n")
        self.count += 1

    def rows(self, action: str) -> Iterator[dict[str, Any]]:
        """The rows spooled for `action`, in append order (again from the start each call)."""
        spooled = self._files.get(action)
        if spooled is None:
            return
        spooled.flush()
        spooled.seek(0)
        for line in spooled:
            yield json.loads(line)

    def close(self) -> None:
        """Drop the spooled rows."""
        for spooled in self._files.values():
            spooled.close()
        self._files.clear()

    def __enter__(self) -> RowSpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
