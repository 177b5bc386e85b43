"""A large group's row digests kept out of memory; which rows repeat an earlier page, answered
once its pages are all in.

De-duplication (docs/contract/decision.md step 7) drops a row that an earlier page of its
action held. `DigestSet` answers that page by page, which needs every earlier digest in
memory: 16 to 32 bytes a digest, the one part of a large export's memory that grows with its
rows. Nothing needs the answer before the group's last page, though: the rows are spooled
until the counts are known. So a group past a few thousand digests writes each page's digests
to a `DigestStore` (the shell's temporary file), and `repeats` finds the repeats after the
last page, holding a slice of the digests at a time.

Each page is stored twice: its digests in row order (for the positions of the repeats it
turns out to hold) and sorted by their top byte, with where each of the 256 top bytes starts
(`bounds`). `repeats` then reads every page's digests of a range of top bytes at once, small
enough to hold as sets (`ROUND_DIGESTS`), and meets them in page order: a digest already seen
in an earlier page is a repeat. The sets are made, met and merged in C; only a page that
holds repeats is read again in row order, to find their positions (a Python loop over the
repeats alone). Sorting by the top byte (a key of one small integer) costs about a third of
a full sort of 64-bit integers. The answer is kept in arrays, and the repeats are met as
sets of `ROUND_DIGESTS` at most there too: a page served twice over costs no more memory
than the in-memory table would have.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence
from itertools import compress, count
from typing import Final, Protocol

# Digests met as sets at once: ~1.3 MB of sets (rounds of 65,536 made the search the peak
# of a 1M-row export: ~5 MB, more than a page of 10,000 rows costs). A group past ~4M
# digests holds more than this under one top byte; 1M digests take 62 rounds.
ROUND_DIGESTS: Final = 16_384
_TOP_BYTES: Final = 256
_top_byte: Final = (56).__rrshift__  # digest >> 56, for digests in [0, 2**64)
_ITEM: Final = array("Q").itemsize


class DigestStore(Protocol):
    """Where a log keeps its bytes: append-only, read back by offset."""

    def append(self, data: bytes) -> int:
        """Write `data` after what was written; the offset it starts at."""
        ...

    def read(self, offset: int, size: int) -> bytes:
        """`size` bytes written at `offset`."""
        ...


class MemoryStore:
    """A `DigestStore` in memory (a bytearray): for tests, and for a core run without a shell."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data = bytearray()

    def append(self, data: bytes) -> int:
        offset = len(self._data)
        self._data += data
        return offset

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self._data[offset : offset + size])


class _Page:
    __slots__ = ("bounds", "in_order", "sorted_at")

    def __init__(self, in_order: int, sorted_at: int, bounds: array[int]) -> None:
        self.in_order = in_order  # offset of the digests in row order
        self.sorted_at = sorted_at  # offset of the digests sorted by their top byte
        self.bounds = bounds  # where each top byte starts among the sorted; then the count

    @property
    def count(self) -> int:
        """The page's digests."""
        return self.bounds[-1]


class DigestLog:
    """A group's pages of digests, in the order they came."""

    __slots__ = ("_pages", "_store")

    def __init__(self, store: DigestStore) -> None:
        self._store = store
        self._pages: list[_Page] = []

    def __len__(self) -> int:
        """Pages added."""
        return len(self._pages)

    def add(self, digests: Sequence[int]) -> None:
        """Log the next page's digests (integers in [0, 2**64))."""
        by_top = sorted(digests, key=_top_byte)
        bounds = array("Q", (bisect_left(by_top, top, key=_top_byte) for top in range(_TOP_BYTES)))
        bounds.append(len(by_top))
        store = self._store
        in_order = store.append(array("Q", digests).tobytes())
        sorted_at = store.append(array("Q", by_top).tobytes())
        self._pages.append(_Page(in_order, sorted_at, bounds))

    def repeats(self) -> dict[int, tuple[array[int], array[int]]]:
        """The pages holding digests an earlier page held, by page index: the positions of
        those rows in their page, ascending, and the digests repeated. Both are arrays (8
        bytes each), and a page's positions are found a round's repeats at a time, so a page
        served twice over costs no more memory than a digest table would."""
        pages = self._pages
        total = sum(page.count for page in pages)
        rounds = max(1, min(_TOP_BYTES, -(-total // ROUND_DIGESTS)))
        held: dict[int, array[int]] = {}
        for round_ in range(rounds):
            first = round_ * _TOP_BYTES // rounds
            end = (round_ + 1) * _TOP_BYTES // rounds
            seen: set[int] = set()
            for index, page in enumerate(pages):
                start, stop = page.bounds[first], page.bounds[end]
                if start == stop:
                    continue
                digests = set(self._digests(page.sorted_at + start * _ITEM, stop - start))
                if not seen.isdisjoint(digests):
                    held.setdefault(index, array("Q")).extend(seen & digests)
                seen |= digests
        found: dict[int, tuple[array[int], array[int]]] = {}
        for index, repeated in sorted(held.items()):
            page = pages[index]
            in_order = self._digests(page.in_order, page.count)
            marks = bytearray(page.count)
            # The repeats met as sets of ROUND_DIGESTS at most: one pass over the page for a
            # few repeats, a pass per ROUND_DIGESTS of them for a page served twice.
            for start in range(0, len(repeated), ROUND_DIGESTS):
                members = set(repeated[start : start + ROUND_DIGESTS])
                for at in compress(count(), map(members.__contains__, in_order)):
                    marks[at] = 1
            found[index] = (array("Q", compress(count(), marks)), repeated)
        return found

    def _digests(self, offset: int, count: int) -> array[int]:
        digests = array("Q")
        digests.frombytes(self._store.read(offset, count * _ITEM))
        return digests
