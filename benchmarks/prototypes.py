"""Prototypes of the fixes PROFILE.md proposes, applied by monkeypatching: measurement only.

Nothing here is imported by the worker. Each patch replaces one function of the row path
or the runtime with a faster copy that must keep behaviour and file bytes identical; the
real CLI then runs with the patches applied, so `prototype_savings.py` can measure each
fix (and all of them together) on the real process and compare the export's sha256:

    python benchmarks/prototypes.py --patch parse,digest -- run --drain

The patched copies are deliberately close to the code they replace, so the optimising task
can lift them; comments say what keeps them identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import pickle
import re
import sys
import tempfile
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any

import msgspec

from handlers.dataset import finish_row
from handlers.rows import is_secret_key
from handlers.serialisers import aligned
from handlers.serialisers.csv_file import _quoted, _record
from handlers.serialisers.csv_file import csv_cell as full_csv_cell

# --------------------------------------------------------------------------------------
# parse: msgspec's decoder first; whatever it refuses goes to json.loads, which then gives
# the answer (or the error) it always gave. msgspec accepts a subset of what json.loads
# accepts and builds the same values for it: exact big integers (orjson would turn an
# integer past 64 bits into a float), duplicate keys last-wins; NaN, Infinity, 1e400,
# escaped lone surrogates, a UTF-8 BOM and UTF-16/32 input are refused, so json.loads
# decides them. A document nested too deeply raises RecursionError in both, but msgspec's
# limit sits a few levels deeper (json.loads' moves with the caller's stack depth).
# --------------------------------------------------------------------------------------
_DECODER = msgspec.json.Decoder()


def loads(data: bytes) -> Any:
    """json.loads(data), faster for the documents msgspec accepts."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError:
        return json.loads(data)


# --------------------------------------------------------------------------------------
# clean: a row whose keys are all known non-secret names and whose values are all scalars
# has nothing to remove at any depth: it is returned as it is (extract_rows already copied
# it). Anything else takes the full rule, which also teaches the known names.
# --------------------------------------------------------------------------------------
_SCALARS = frozenset({str, int, float, bool, type(None)})
_CLEAN_KEYS: set[str] = set()
_MAX_CLEAN_KEYS = 4096


def clean_row(row: dict[str, Any]) -> dict[str, Any]:
    """handlers.rows.clean_row, with a fast path for flat rows of known keys."""
    if row.keys() <= _CLEAN_KEYS and _SCALARS.issuperset(map(type, row.values())):
        return row
    from handlers.rows import clean_row as full

    if len(_CLEAN_KEYS) < _MAX_CLEAN_KEYS:
        _CLEAN_KEYS.update(k for k in row if isinstance(k, str) and not is_secret_key(k))
    return full(row)


# --------------------------------------------------------------------------------------
# digest: msgspec's sorted-key JSON of the row, hashed with the built-in bytes hash (SipHash,
# keyed per process) instead of json.dumps + blake2b. The digest never leaves the process:
# only "equal rows, equal digests; different rows, different digests" matters. msgspec
# writes NaN and ±Infinity as null, so a text holding `null` (and anything msgspec cannot
# encode, such as a lone surrogate) takes the canonical json.dumps text instead, tagged so
# the two kinds of text can never be confused. Floats print differently in the two (1e16
# vs 1e+16) but each maps distinct values to distinct texts, which is all equality needs.
# --------------------------------------------------------------------------------------
_SORTED_JSON = msgspec.json.Encoder(order="sorted").encode
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode
_MASK = (1 << 64) - 1


def digest(row: dict[str, Any]) -> int:
    """A 64-bit fingerprint of the row's content (equal rows, equal fingerprints)."""
    try:
        text = _SORTED_JSON(row)
    except (TypeError, ValueError, OverflowError):  # EncodeError is a ValueError
        text = b"null"
    if b"null" not in text:
        return hash(text) & _MASK
    return hash(("canonical", _CANONICAL(row))) & _MASK


# --------------------------------------------------------------------------------------
# seen: today every row is searched for in every earlier page (one bisect per page), so the
# cost grows with rows × pages. Three structures with one interface (`in`, `add_page`):
# - MergedRuns: sorted runs merged binary-counter style (at most log2(pages) + 1 searches);
#   8 bytes a row kept, but a merge briefly holds the merged run as a list of ints (~40
#   bytes a row of the run);
# - FilteredPages: today's sorted page arrays behind a bitmap of 32 bits a row (two bits per
#   digest): a row whose bits are not both set is new at once, the others (0.4 % of new
#   rows) are searched as today; 12 bytes a row;
# - DigestTable: an open-addressing hash table in an array of 64-bit slots, at most half
#   full: one or two probes; 16-32 bytes a row.
# All give exactly today's answer: "is this digest in an earlier page of the group".
# --------------------------------------------------------------------------------------
class MergedRuns:
    """Earlier pages' sorted digests, merged as pages end."""

    def __init__(self) -> None:
        self.runs: list[array[int]] = []

    def __contains__(self, value: int) -> bool:
        for run in self.runs:
            at = bisect_left(run, value)
            if at < len(run) and run[at] == value:
                return True
        return False

    def add_page(self, page: array[int]) -> None:
        run = array("Q", sorted(page))
        while self.runs and len(self.runs[-1]) <= len(run):
            merged = list(self.runs.pop())
            merged.extend(run)
            merged.sort()  # two sorted runs: Timsort merges them in linear time
            run = array("Q", merged)
            del merged
        self.runs.append(run)


class FilteredPages:
    """Today's sorted page arrays, searched only when a bitmap says the digest may be there."""

    def __init__(self) -> None:
        self.pages: list[array[int]] = []
        self.count = 0
        self.bits = bytearray(1 << 12)
        self.mask = (len(self.bits) << 3) - 1

    def __contains__(self, value: int) -> bool:
        mask, bits = self.mask, self.bits
        a, b = value & mask, (value >> 32) & mask
        if not (bits[a >> 3] >> (a & 7) & 1 and bits[b >> 3] >> (b & 7) & 1):
            return False
        for digests in self.pages:
            at = bisect_left(digests, value)
            if at < len(digests) and digests[at] == value:
                return True
        return False

    def add_page(self, page: array[int]) -> None:
        self.pages.append(array("Q", sorted(page)))
        self.count += len(page)
        if self.count * 32 > len(self.bits) * 8:
            size = len(self.bits)
            while self.count * 32 > size * 8:
                size *= 2
            self.bits = bytearray(size)
            self.mask = (size << 3) - 1
            for digests in self.pages:
                self._mark(digests)
        else:
            self._mark(page)

    def _mark(self, digests: Iterable[int]) -> None:
        mask, bits = self.mask, self.bits
        for value in digests:
            a, b = value & mask, (value >> 32) & mask
            bits[a >> 3] |= 1 << (a & 7)
            bits[b >> 3] |= 1 << (b & 7)


class DigestTable:
    """A set of 64-bit digests in an open-addressing table (0 marks an empty slot)."""

    def __init__(self) -> None:
        self.slots = array("Q", bytes(8 << 10))
        self.mask = len(self.slots) - 1
        self.count = 0
        self.zero = False  # the digest 0, which cannot sit in a slot

    def __contains__(self, value: int) -> bool:
        if not value:
            return self.zero
        slots, mask = self.slots, self.mask
        at = value & mask
        while True:
            found = slots[at]
            if found == value:
                return True
            if not found:
                return False
            at = (at + 1) & mask

    def add_page(self, page: array[int]) -> None:
        if (self.count + len(page)) * 2 > len(self.slots):
            old = self.slots
            size = len(old)
            while (self.count + len(page)) * 2 > size:
                size *= 2
            self.slots, self.mask, self.count = array("Q", bytes(8 * size)), size - 1, 0
            self._insert([value for value in old if value])
        self._insert(page)

    def _insert(self, values: Iterable[int]) -> None:
        slots, mask = self.slots, self.mask
        for value in values:
            if not value:
                self.zero = True
                continue
            at = value & mask
            while True:
                found = slots[at]
                if found == value:
                    break
                if not found:
                    slots[at] = value
                    self.count += 1
                    break
                at = (at + 1) & mask


EARLIER: type[MergedRuns] | type[FilteredPages] | type[DigestTable] = FilteredPages


def page(self: Any, group: Any, artifact: str | None, result: Any) -> Iterator[dict[str, Any]]:
    """A copy of RowCollector._page with EARLIER for the earlier pages and a cheaper
    columns update."""
    from handlers import dataset

    earlier = group.__dict__.setdefault("earlier", EARLIER())
    rows = array("Q")
    columns = group.columns
    try:
        for raw in dataset.extract_rows(result):
            row = dataset.clean_row(raw)
            value = dataset._digest(row)
            if value in earlier:
                continue
            if not rows and artifact is not None and artifact not in group.artifacts:
                group.artifacts.append(artifact)
            rows.append(value)
            group.rows += 1
            if not row.keys() <= columns.keys():  # a no-op update keeps the order anyway
                columns.update(dict.fromkeys(row))
            if self._matcher is not None and len(group.matched) < len(self._matcher.table.rows):
                group.matched |= self._matcher.matches(row, group.matched)
            yield row
    finally:
        if rows:
            earlier.add_page(rows)


# --------------------------------------------------------------------------------------
# spool: rows pickled a batch at a time (one pickle.dump per 1,024 rows of an action)
# instead of a json.dumps + json.loads per row. Pickle gives back exactly what went in
# (NaN, big integers, lone surrogates that UTF-8 JSON lines cannot even encode); the file is
# an anonymous temporary file only this process wrote.
# --------------------------------------------------------------------------------------
_BATCH = 1024
_MEMORY_BYTES = 4 * 1024 * 1024


class PickleSpool:
    """worker.spool.RowSpool with batched pickles."""

    def __init__(self) -> None:
        self._files: dict[str, IO[bytes]] = {}
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self.count = 0

    def append(self, action: str, row: dict[str, Any]) -> None:
        """Spool one row of `action`."""
        pending = self._pending.get(action)
        if pending is None:
            pending = self._pending[action] = []
            spooled = tempfile.SpooledTemporaryFile(max_size=_MEMORY_BYTES)  # noqa: SIM115
            self._files[action] = spooled
        pending.append(row)
        self.count += 1
        if len(pending) >= _BATCH:
            self._flush(action)

    def rows(self, action: str) -> Iterator[dict[str, Any]]:
        """The rows spooled for `action`, in append order."""
        spooled = self._files.get(action)
        if spooled is None:
            return
        self._flush(action)
        spooled.seek(0)
        while True:
            try:
                batch = pickle.load(spooled)
            except EOFError:
                return
            yield from batch

    def _flush(self, action: str) -> None:
        pending = self._pending[action]
        if pending:
            pickle.dump(pending, self._files[action], protocol=pickle.HIGHEST_PROTOCOL)
            pending.clear()

    def close(self) -> None:
        """Drop the spooled rows."""
        for spooled in self._files.values():
            spooled.close()
        self._files.clear()
        self._pending.clear()

    def __enter__(self) -> PickleSpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------
# cells and csv
# --------------------------------------------------------------------------------------
def action_cells(row: dict[str, Any], action: str, selection: Any, shape: Any) -> list[Any]:
    """handlers.file_layout.action_cells with the lookups done by map (in C)."""
    return list(map(finish_row(row, action, selection).get, shape.keys))


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A text cell needs the full rule only if it holds a quote, comma, line break or lone
# surrogate, or starts (after spaces) like a formula; any other text is written as it is.
_NEEDS_RULES = re.compile('[",\r\n\ud800-\udfff]')


def csv_cell(value: Any) -> str:
    """handlers.serialisers.csv_file.csv_cell, quoted as _record quotes it, fast for plain cells."""

    kind = type(value)
    if kind is str:
        if _NEEDS_RULES.search(value) is None and not value.lstrip(" ").startswith(_FORMULA_STARTS):
            return value
    elif kind is float:
        if math.isfinite(value):
            return repr(value)  # a finite repr is a plain number: never neutralised, no comma
    elif kind is int:
        return str(value)  # "-5" is a plain number
    elif value is None:
        return ""
    return _quoted(full_csv_cell(value))


def csv_line(cells: Sequence[Any], width: int) -> str:
    """One record without its CRLF, as _record writes it. (A whole-row check, cells joined
    with str() and one regex over the line, measured slower than these per-cell checks.)"""
    line = ",".join(map(csv_cell, cells))
    if not line:  # a blank line reads back as no cells; `""` keeps its one empty cell
        return '""' if cells else ""
    return line


def csv_chunks(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    bom: bool = True,
    chunk_size: int = 65536,
) -> Iterator[bytes]:
    """handlers.serialisers.csv_file.csv_chunks with the fast rows above, joined in bulk."""
    header = _record(columns)[:-2]  # without its CRLF: lines are joined by CRLF below
    buffer: list[str] = [("\ufeff" if bom else "") + header]
    size = 0
    width = len(columns)
    for row in rows:
        line = csv_line(row if len(row) == width else aligned(row, width), width)
        buffer.append(line)
        size += len(line) + 2
        if size >= chunk_size:
            yield ("\r\n".join(buffer) + "\r\n").encode("utf-8")
            buffer.clear()
            size = 0
    if buffer:
        yield ("\r\n".join(buffer) + "\r\n").encode("utf-8")


# --------------------------------------------------------------------------------------
# page memory: one artifact alive at a time. Today `_fetch` keeps the previous artifact
# bound while the next one is read and parsed, and `_artifact` keeps the chunk list and the
# joined bytes (and json.loads its decoded str) alive during the parse: at 100,000-row pages
# that is two parsed pages and three copies of the text at the peak.
# --------------------------------------------------------------------------------------
async def fetch(self: Any, need: Any, spool: Any) -> None:
    """TurnHandler._fetch that drops each page before reading the next."""
    from handlers.errors import PermanentError

    for ref in need.fetch:
        assert ref.artifact is not None
        result = (await self._artifact(ref.artifact)).result
        try:
            for row in need.collector.feed(ref, result):
                spool.append(ref.action, row)
        except RecursionError:
            too_deep = f"artifact {ref.artifact} is nested too deeply"
            raise PermanentError("artifact_invalid", too_deep) from None
        del result


async def artifact(self: Any, path: str) -> Any:
    """TurnHandler._artifact reading into one buffer, parsed by whatever `worker.handler.json`
    is (json today, `loads` above with the parse patch)."""
    import pydantic

    import worker.handler
    from handlers.errors import PermanentError, RetryableError
    from schemas.documents import Artifact
    from worker.ports import NotFound

    data = bytearray()
    try:
        async for chunk in self.backend.blobs.read(path):
            if len(data) + len(chunk) > worker.handler.MAX_ARTIFACT_BYTES:
                raise PermanentError("artifact_invalid", f"artifact {path} is too large")
            data += chunk
    except NotFound:
        raise RetryableError("artifact_missing", f"artifact {path} not found") from None
    try:
        return Artifact.model_validate(worker.handler.json.loads(data))
    except (ValueError, pydantic.ValidationError):
        raise PermanentError("artifact_invalid", f"artifact {path} is not JSON") from None
    except RecursionError:
        too_deep = f"artifact {path} is nested too deeply"
        raise PermanentError("artifact_invalid", too_deep) from None


# --------------------------------------------------------------------------------------
# runtime
# --------------------------------------------------------------------------------------
async def serve_session(self: Any, session: Any) -> None:
    """Runtime._serve_session that releases the session as soon as nothing is queued on it,
    instead of holding it `session_idle` seconds (another conversation's turn never waits
    for one that has nothing to do)."""
    from worker.ports import LockLost

    renewer = asyncio.create_task(self._renew(session))
    wait = self.session_idle  # the first receive: the head that made the session available
    try:
        while not self._stopping.is_set():
            message = await session.receive(wait)
            if message is None:
                return
            await self._process(session, message)
            wait = 0.0
    except LockLost:
        self.stats.lock_lost += 1
        self._log.warning("session_lock_lost", session_id=session.session_id)
    finally:
        renewer.cancel()
        with contextlib.suppress(BaseException):
            await renewer


async def serve(self: Any, drain: bool) -> None:
    """Runtime._serve that, when draining, asks the queue whether it is drained before it
    waits ACCEPT_WAIT_SECONDS for a session: an empty queue ends the run at once."""
    from worker import runtime
    from worker.ports import PortError

    while not self._stopping.is_set():
        try:
            session = await self.queue.accept_session(0.0 if drain else runtime.ACCEPT_WAIT_SECONDS)
        except PortError as exc:
            self._log.warning("session_accept_failed", error=type(exc).__name__)
            await self._pause(1.0)
            continue
        if session is None:
            if drain and self._in_flight == 0 and await self.queue.is_drained():
                self.stop()
            elif drain:
                await self._pause(0.05)  # in flight elsewhere, locked or scheduled: look again
            continue
        self._in_flight += 1
        try:
            await self._serve_session(session)
        except Exception as exc:
            self._log.warning(
                "session_failed", session_id=session.session_id, error=runtime._short(exc)
            )
            await self._pause(0.2)
        finally:
            self._in_flight -= 1
            with contextlib.suppress(Exception):
                await session.close()


# --------------------------------------------------------------------------------------
def _patch_parse() -> None:
    import types

    import worker.handler

    worker.handler.json = types.SimpleNamespace(loads=loads)  # type: ignore[assignment]


def _patch_clean() -> None:
    import handlers.dataset

    handlers.dataset.clean_row = clean_row


def _patch_digest() -> None:
    import handlers.dataset

    handlers.dataset._digest = digest


def _patch_seen() -> None:
    import handlers.dataset

    handlers.dataset.RowCollector._page = page  # type: ignore[method-assign]


def _patch_spool() -> None:
    import worker.handler

    worker.handler.RowSpool = PickleSpool  # type: ignore[misc,assignment]


def _patch_cells() -> None:
    import worker.handler

    worker.handler.action_cells = action_cells


def _patch_csv() -> None:
    import worker.export_file

    worker.export_file.csv_chunks = csv_chunks


def _patch_page() -> None:
    import worker.handler

    worker.handler.TurnHandler._fetch = fetch  # type: ignore[method-assign]
    worker.handler.TurnHandler._artifact = artifact  # type: ignore[method-assign]


def _patch_session() -> None:
    import worker.runtime

    worker.runtime.Runtime._serve_session = serve_session  # type: ignore[method-assign]


def _patch_drain() -> None:
    import worker.runtime

    worker.runtime.Runtime._serve = serve  # type: ignore[method-assign]


PATCHES: dict[str, Callable[[], None]] = {
    "parse": _patch_parse,
    "clean": _patch_clean,
    "digest": _patch_digest,
    "seen": _patch_seen,
    "spool": _patch_spool,
    "cells": _patch_cells,
    "csv": _patch_csv,
    "page": _patch_page,
    "session": _patch_session,
    "drain": _patch_drain,
}


def apply(names: Iterable[str]) -> None:
    """Apply the named patches (see PATCHES)."""
    for name in names:
        PATCHES[name]()


def main(argv: list[str]) -> None:
    """`--patch a,b -- CLI ARGS`: apply the patches, then run the real CLI's main."""
    names: list[str] = []
    if argv[:1] == ["--patch"]:
        names = [n for n in argv[1].split(",") if n]
        argv = argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    apply(names)
    from worker.cli import main as cli

    sys.argv = ["export-worker", *argv]
    cli(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
