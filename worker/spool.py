"""A row spool: rows flow from artifact reads to disk once, then to the serialiser.

Selection needs the counts of every group before the first byte is written (dominance,
the excerpt test, the header). The spool keeps the rows out of memory meanwhile: past a
small buffer they live in an anonymous temporary file that disappears on close. The file is
shared by the turn's actions, each knowing where its batches lie, so the export reads each
selected dataset once, in the order it wants, even when its pages were fetched interleaved
with another action's; and a turn of thousands of actions holds one file open, not one each.

Rows are written a batch at a time with `marshal`, each batch's place (offset, length) kept
by its action; the last, partial batch of each action is read back from memory. marshal
gives back exactly what went in (big integers, NaN and -0.0, text with lone surrogates) at
a fraction of the cost of JSON lines; its format is private to one Python version, which
is all a temporary file read back by the process that wrote it needs.

A batch whose rows all have the same keys (a page of one call's results, as a rule) is
written as those keys once and a list of values per key, the batch's columns: less to write
and read than a dict per row, and `batches` hands it over in that form (the rows not yet
written too), so the export takes whole columns (`handlers/file_layout.batch_cells`) and
the CSV writer checks and writes them a column at a time, no row built in between. `rows`
makes dicts of it again, their keys in the order of the batch's first row.

For a CSV export (`write_as`), a batch of one shape whose cells need no CSV rule (the usual
page of text, finite floats and integers) is written as the file's records instead, under
the batch's own keys: the export copies them (`csv_file.PlainCsvBatch` lays them out under
the file's columns when those differ), where it would read the values back and write the
same records from them. Such a batch keeps no values: `rows` refuses it. A page that
starts the tail (the rows not yet written) is tried at once, however short, instead of
waiting for a full batch: its rows were just parsed, cleaned and digested, so they are still
in the processor's cache, where the export, after the turn's other work, would read and free
them cold (a headline turn's two pages of 450 rows; benchmarks/PROFILE.md, thirteenth
round). A page that needs a rule stays in the tail, the pages after it join it, and the
action's later pages are not tried alone again (a call's pages share their shape).

Rows found later to repeat an earlier page (a large group's de-duplication runs after its
last page: `handlers/digest_log.py`) are left out as the batches are read back (`skip`), in
whichever form a batch was written.
"""

from __future__ import annotations

import marshal
import tempfile
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import IO, Any, cast

from handlers.serialisers.csv_file import PlainCsvBatch
from worker.scratch import scratch_prefix

# Spooled bytes kept in memory before the file is made: a headline turn's ~60 KB never
# touch the disk; 4 MB was 3 MB of a 1M-row export's peak RSS (~39 against 42 MB).
_MEMORY_BYTES = 512 * 1024
# Rows per marshalled batch: large enough to pay the call once per many rows, small enough
# that a batch read back is a few MB at most.
BATCH_ROWS = 1024


class RowSpool:
    """Append rows per action; read one action's rows back in append order."""

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None  # made when the first batch is written
        self._end = 0  # the file's length: where the next batch goes
        # Per action: its written batches' offsets and lengths, in turn; its rows not yet
        # written (an action is known once it has a list here).
        self._written: dict[str, array[int]] = {}
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self.count = 0
        self._encode: Callable[[Sequence[Sequence[Any]]], str | None] | None = None
        # Actions a page of which was tried as records and needed a rule: a call's pages
        # share their shape, so their later pages wait for a full batch, tried once there.
        self._ruled: set[str] = set()
        self._skipped: dict[str, Sequence[int]] = {}

    def skip(self, action: str, positions: Sequence[int]) -> None:
        """Leave the rows of `action` at `positions` (ascending, in append order, counted
        from 0) out of what `batches` and `rows` give back."""
        self._skipped[action] = positions

    def write_as(self, encode: Callable[[Sequence[Sequence[Any]]], str | None]) -> None:
        """Write each batch of one shape spooled from now on as `encode` gives its columns
        (the export's records: `csv_file.plain_text`), when it gives them; `batches` hands
        such a batch back as a `PlainCsvBatch`. Its values are not kept."""
        self._encode = encode

    def extend(self, action: str, rows: Iterable[dict[str, Any]]) -> None:
        """Spool rows of `action`, in order."""
        pending = self._pending.get(action)
        if pending is None:
            pending = self._open(action)
        before = len(pending)
        pending.extend(rows)
        self.count += len(pending) - before
        if len(pending) >= BATCH_ROWS:
            self._flush(action)
        elif not before and pending and self._encode is not None and action not in self._ruled:
            self._flush_records(action)

    def rows(self, action: str) -> Iterator[dict[str, Any]]:
        """The rows spooled for `action`, in append order (again from the start each call);
        a row of a batch written as keys and columns comes back with the batch's key order."""
        for batch in self.batches(action):
            if batch[0] is None:
                yield from batch[1]
            elif isinstance(batch[1], PlainCsvBatch):
                raise TypeError("a batch written as CSV records holds no values")
            else:
                names, columns = batch
                yield from (
                    dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)
                )

    def batches(self, action: str) -> Iterator[Batch]:
        """The rows spooled for `action` a batch at a time, in append order (again from the
        start each call): a batch whose rows all had the same keys as the keys of its first
        row and their columns (one list of values per key), the form it was written in; any
        other batch as (None, the rows). The rows not yet written (fewer than a batch) come
        last, in the same two forms. The rows `skip` named are left out (a batch left with
        none, too)."""
        skipped = self._skipped.get(action)
        if not skipped:
            yield from self._batches(action)
            return
        start = 0  # the position of the batch's first row
        cut = 0  # the first of `skipped` not passed yet
        for batch in self._batches(action):
            end = start + _size(batch)
            if cut < len(skipped) and skipped[cut] < end:
                stop = bisect_left(skipped, end, cut)
                left = _without(batch, {at - start for at in skipped[cut:stop]})
                cut = stop
            else:
                left = batch
            start = end
            if left is not None:
                yield left

    def _batches(self, action: str) -> Iterator[Batch]:
        pending = self._pending.get(action)
        if pending is None:
            return
        places = self._written[action]
        for at in range(0, len(places), 2):
            assert self._file is not None
            # Placed again for each batch: a write between two batches moves the position.
            self._file.seek(places[at])
            written = marshal.loads(self._file.read(places[at + 1]))
            if type(written) is not tuple:
                yield None, written
            elif type(written[1]) is str:  # (names, the records' text)
                yield written[0], PlainCsvBatch(written[1])
            else:
                yield written
        # The rows not yet written, read from memory: a small dataset never goes through
        # marshal at all.
        if pending:
            batch = _columnar(pending)
            yield batch if type(batch) is tuple else (None, list(pending))

    def close(self) -> None:
        """Drop the spooled rows."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._end = 0
        self._written.clear()
        self._pending.clear()

    def _open(self, action: str) -> list[dict[str, Any]]:
        self._written[action] = array("Q")
        pending: list[dict[str, Any]] = []
        self._pending[action] = pending
        return pending

    def _flush(self, action: str) -> None:
        pending = self._pending[action]
        if not pending:
            return
        for start in range(0, len(pending), BATCH_ROWS):
            batch = _columnar(pending[start : start + BATCH_ROWS])
            records = self._records(batch)
            self._write(action, batch if records is None else records)
        pending.clear()

    def _flush_records(self, action: str) -> None:
        """Write the rows not yet written as the file's records, if they are a batch of one
        shape that needs no CSV rule; else keep them."""
        pending = self._pending[action]
        records = self._records(_columnar(pending))
        if records is None:
            self._ruled.add(action)
            return
        self._write(action, records)
        pending.clear()

    def _records(
        self, batch: tuple[tuple[str, ...], list[list[Any]]] | list[dict[str, Any]]
    ) -> tuple[tuple[str, ...], str] | None:
        """The batch as (its keys, the records under them), when `write_as` was asked and
        the batch is of one shape whose cells need no rule; else None."""
        if self._encode is None or not isinstance(batch, tuple):
            return None
        text = self._encode(batch[1])
        return None if text is None else (batch[0], text)

    def _write(
        self,
        action: str,
        batch: tuple[tuple[str, ...], Any] | list[dict[str, Any]],
    ) -> None:
        if self._file is None:
            # On disk past its memory share: anonymous, or named for the sweep where it
            # cannot be (worker/scratch.py).
            self._file = tempfile.SpooledTemporaryFile(  # noqa: SIM115
                max_size=_MEMORY_BYTES, mode="w+b", prefix=scratch_prefix()
            )
        self._file.seek(self._end)  # rows() may have left the position anywhere
        data = marshal.dumps(batch)
        self._file.write(data)
        self._written[action].extend((self._end, len(data)))
        self._end += len(data)

    def __enter__(self) -> RowSpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# A batch read back: (keys, a list of values per key), (None, the rows themselves), or
# (keys, the rows as the CSV records `write_as` wrote).
Batch = (
    tuple[tuple[str, ...], list[list[Any]]]
    | tuple[None, list[dict[str, Any]]]
    | tuple[tuple[str, ...], PlainCsvBatch]
)


def _size(batch: Batch) -> int:
    """The rows of a batch."""
    held = batch[1]
    if isinstance(held, PlainCsvBatch):
        return held.text.count("\r\n")  # a record's cells hold no line break
    if batch[0] is None:
        return len(held)
    return len(cast("list[list[Any]]", held)[0])


def _without(batch: Batch, dropped: set[int]) -> Batch | None:
    """The batch less its rows at `dropped` (positions in it); None when none is left."""
    names, held = batch
    if isinstance(held, PlainCsvBatch):
        assert names is not None
        records = held.text.split("\r\n")
        records.pop()  # the text ends with a record's CRLF
        kept = [record for at, record in enumerate(records) if at not in dropped]
        return (names, PlainCsvBatch("\r\n".join(kept) + "\r\n")) if kept else None
    if names is None:
        rows = [
            row for at, row in enumerate(cast("list[dict[str, Any]]", held)) if at not in dropped
        ]
        return (None, rows) if rows else None
    columns = cast("list[list[Any]]", held)
    if len(dropped) >= len(columns[0]):
        return None
    return names, [
        [value for at, value in enumerate(column) if at not in dropped] for column in columns
    ]


def _columnar(
    rows: list[dict[str, Any]],
) -> tuple[tuple[str, ...], list[list[Any]]] | list[dict[str, Any]]:
    """What a batch is written as: the first row's keys and the rows' values under each
    (its columns) when every row has exactly those keys (a page of one call's results, as a
    rule); else the rows."""
    names = tuple(rows[0])
    if not names or set(map(len, rows)) != {len(names)}:
        return rows  # no keys (no column would hold the rows), or rows of other sizes
    try:
        return names, [list(map(itemgetter(name), rows)) for name in names]
    except KeyError:  # a row of as many keys, not the same ones
        return rows
