"""A set of 64-bit row digests whose look-up cost does not grow with its size or its history.

De-duplication (docs/contract/decision.md step 7) asks, for every row, whether an earlier
page of its action held the same row. A Python `set` of ints answers at once but costs
~70 bytes a digest; sorted arrays per page cost 8 bytes but one search per earlier page.
This is an open-addressing hash table (linear probing) in one array of 8-byte slots, kept
at most half full: one or two probes a look-up, 16 to 32 bytes a digest.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Final

_FIRST_SLOTS: Final = 1024
_EMPTY: Final = 0  # a slot holding 0 is free; the digest 0 itself is kept in a flag


class DigestSet:
    """Digests (integers in [0, 2**64)) added page by page; `in` asks whether one was added."""

    __slots__ = ("_count", "_mask", "_slots", "_zero")

    def __init__(self) -> None:
        self._slots = array("Q", bytes(8 * _FIRST_SLOTS))
        self._mask = _FIRST_SLOTS - 1
        self._count = 0
        self._zero = False

    def __len__(self) -> int:
        return self._count + self._zero

    def __contains__(self, digest: object) -> bool:
        if not isinstance(digest, int) or not digest:
            return digest == 0 and self._zero
        slots, mask = self._slots, self._mask
        at = digest & mask
        while True:
            held = slots[at]
            if held == digest:
                return True
            if held == _EMPTY:
                return False
            at = (at + 1) & mask

    def absent(self, digests: Sequence[int]) -> list[int]:
        """The positions in `digests` of those not in the set, in order."""
        slots, mask, zero = self._slots, self._mask, self._zero
        found = []
        for position, digest in enumerate(digests):
            # __contains__ inlined: a page asks this once per row.
            if not digest:
                if not zero:
                    found.append(position)
                continue
            at = digest & mask
            held = slots[at]
            while held != digest and held != _EMPTY:
                at = (at + 1) & mask
                held = slots[at]
            if held != digest:
                found.append(position)
        return found

    def add_all(self, digests: Sequence[int]) -> None:
        """Add digests (a repeat is added once)."""
        if (self._count + len(digests)) * 2 > len(self._slots):
            self._grow(self._count + len(digests))
        if self._insert(digests):
            self._zero = True

    def _insert(self, digests: Iterable[int]) -> bool:
        """Put the digests other than 0 in their slots; whether a 0 was among them."""
        slots, mask = self._slots, self._mask
        added = 0
        zero = False
        for digest in digests:
            if not digest:
                zero = True
                continue
            at = digest & mask
            while True:
                held = slots[at]
                if held == _EMPTY:
                    slots[at] = digest
                    added += 1
                    break
                if held == digest:
                    break
                at = (at + 1) & mask
        self._count += added
        return zero

    def _grow(self, needed: int) -> None:
        """Rebuild the table with at least twice `needed` slots (a power of two)."""
        size = len(self._slots)
        while needed * 2 > size:
            size *= 2
        old = self._slots
        self._slots = array("Q", bytes(8 * size))
        self._mask = size - 1
        self._count = 0
        # Straight from the old array (its free slots read as 0, which is skipped): a list
        # of the digests would cost ~40 bytes each for the moment of the rebuild.
        self._insert(old)
