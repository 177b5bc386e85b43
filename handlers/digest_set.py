"""A set of 64-bit row digests whose look-up cost does not grow with its size or its history.

De-duplication (docs/contract/decision.md step 7) asks, for every row, whether an earlier
page of its action held the same row. A Python `set` of ints answers at once but costs
~70 bytes a digest; sorted arrays per page cost 8 bytes but one search per earlier page.
This is an open-addressing hash table (linear probing) in one array of 8-byte slots, kept
at most half full: one or two probes a look-up, 16 to 32 bytes a digest. Up to `SMALL`
digests (a headline turn's group holds a few hundred) they are kept in a Python set
instead: a page is then checked and added in C, where the table's loops run in Python, and
its ~70 bytes a digest come to a few hundred KB at most. The set makes way for the table
once more digests are coming (`reserve`, or a page that would pass the bound).

A digest's first slot is its low bits, and probes run towards the end of the array without
wrapping around: past the last first slot the array holds the slots that probes ran into,
then one free slot that stops every probe. So the table grows in place: the array is
extended (by reallocation, not copied beside a new one) and each digest moved within it.
Growing costs the new table only, not the old one too, and it happens while a page parsed
whole is alive: the moment a large export's peak RSS is made.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Final

_FIRST_SLOTS: Final = 1024
# Digests kept in a Python set before the table is built.
SMALL: Final = 4096
_EMPTY: Final = 0  # a slot holding 0 is free; the digest 0 itself is kept in a flag
# Free slots appended a block at a time when growing: a block as large as the growth
# would be allocated beside the table, which is what growing in place avoids.
_FREE_BLOCK: Final = array("Q", (_EMPTY,)) * 8192


class DigestSet:
    """Digests (integers in [0, 2**64)) added page by page; `in` asks whether one was added."""

    __slots__ = ("_count", "_mask", "_slots", "_small", "_zero")

    def __init__(self) -> None:
        # The digests while they are few (0 among them, as any other); None once the table
        # holds them.
        self._small: set[int] | None = set()
        self._slots = array("Q")  # the table, made when the set makes way for it
        self._mask = _FIRST_SLOTS - 1
        self._count = 0
        self._zero = False

    def __len__(self) -> int:
        if self._small is not None:
            return len(self._small)
        return self._count + self._zero

    def __iter__(self) -> Iterator[int]:
        """The digests held, in no particular order."""
        if self._small is not None:
            return iter(self._small)
        held = (digest for digest in self._slots if digest != _EMPTY)
        return chain(held, (0,)) if self._zero else held

    @property
    def nbytes(self) -> int:
        """Bytes the table's slots take (none while the digests are in the set)."""
        return len(self._slots) * self._slots.itemsize

    def __contains__(self, digest: object) -> bool:
        if not isinstance(digest, int):
            return False
        if self._small is not None:
            return digest in self._small
        if not digest:
            return self._zero
        slots = self._slots
        at = digest & self._mask
        while True:
            held = slots[at]
            if held == digest:
                return True
            if held == _EMPTY:
                return False
            at += 1

    def absent(self, digests: Sequence[int]) -> list[int]:
        """The positions in `digests` of those not in the set, in order."""
        if self._small is not None:
            small = self._small
            return [position for position, digest in enumerate(digests) if digest not in small]
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
                at += 1
                held = slots[at]
            if held != digest:
                found.append(position)
        return found

    def add_absent(self, digests: Sequence[int]) -> list[int]:
        """Add the digests; the positions of those the set did not hold before, in order.

        `absent` then `add_all` in one probe per digest: a digest's slot, once found free, is
        filled at once. Pages of new rows, the usual ones, run a loop that only probes and
        fills; the first digest found held (or a 0, kept in a flag) hands the rest of the
        page to `_add_absent_from`, which tells repeats inside the page (absent before,
        kept) from digests of earlier calls (present)."""
        count = len(digests)
        small = self._small
        if small is not None:
            if len(small) + count <= SMALL:
                if small.isdisjoint(digests):  # new rows, the usual page
                    found = list(range(count))
                else:  # compared with the set as it was before this page
                    found = [at for at, digest in enumerate(digests) if digest not in small]
                small.update(digests)
                return found
            self._build(len(small) + count)
        if (self._count + count) * 2 > self._mask + 1:
            self._grow(self._count + count)
        if 0 in digests:
            return self._add_absent_from(digests, 0)
        slots, mask = self._slots, self._mask
        stop = len(slots) - 1
        added = 0
        # `_insert`'s probe and store, inlined: it runs once per row of every later page.
        for digest in digests:
            at = digest & mask
            held = slots[at]
            while held and held != digest:
                at += 1
                held = slots[at]
            if held:  # held before, or a repeat inside the page
                break
            slots[at] = digest
            if at == stop:  # the probe stop taken: a free slot after it
                slots.append(_EMPTY)
                stop += 1
            added += 1
        self._count += added
        if added == count:
            return list(range(count))
        return self._add_absent_from(digests, added)

    def _add_absent_from(self, digests: Sequence[int], start: int) -> list[int]:
        """`add_absent` of the digests from `start` on, those before it added by this call
        (absent before it, so kept)."""
        slots, mask, zero = self._slots, self._mask, self._zero
        stop = len(slots) - 1
        added = 0
        found = list(range(start))
        # The digests added by this call, gathered at the first one found held: a repeat of
        # one of them was absent before the call (kept), any other digest found was present.
        added_here: set[int] | None = None
        for position in range(start, len(digests)):
            digest = digests[position]
            if not digest:
                if not zero:
                    found.append(position)
                continue
            at = digest & mask
            held = slots[at]
            while held != digest and held != _EMPTY:
                at += 1
                held = slots[at]
            if held == _EMPTY:
                slots[at] = digest
                added += 1
                if at == stop:  # the probe stop taken: a free slot after it
                    slots.append(_EMPTY)
                    stop += 1
                if added_here is not None:
                    added_here.add(digest)
                found.append(position)
                continue
            if added_here is None:
                added_here = set(map(digests.__getitem__, found))
            if digest in added_here:
                found.append(position)
        self._count += added
        if not zero and 0 in digests:
            self._zero = True
        return found

    def add_all(self, digests: Sequence[int]) -> None:
        """Add digests (a repeat is added once)."""
        small = self._small
        if small is not None:
            if len(small) + len(digests) <= SMALL:
                small.update(digests)
                return
            self._build(len(small) + len(digests))
        if (self._count + len(digests)) * 2 > self._mask + 1:
            self._grow(self._count + len(digests))
        if self._insert(digests):
            self._zero = True

    def _insert(self, digests: Iterable[int]) -> bool:
        """Put the digests other than 0 in their slots; whether a 0 was among them."""
        slots, mask = self._slots, self._mask
        stop = len(slots) - 1
        added = 0
        zero = False
        for digest in digests:
            if not digest:
                zero = True
                continue
            at = digest & mask
            held = slots[at]
            while held != digest and held != _EMPTY:
                at += 1
                held = slots[at]
            if held == _EMPTY:
                slots[at] = digest
                added += 1
                if at == stop:  # the probe stop taken: a free slot after it
                    slots.append(_EMPTY)
                    stop += 1
        self._count += added
        return zero

    def reserve(self, count: int) -> None:
        """Make room for `count` digests in all: adding them will not grow the table. Called
        before the first digests, it sizes the table at once (nothing to move)."""
        if self._small is not None:
            if count <= SMALL:
                return
            self._build(count)
        if count * 2 > self._mask + 1:
            self._grow(count)

    def _build(self, needed: int) -> None:
        """The set makes way for the table, made with room for `needed` digests in all."""
        small = self._small
        assert small is not None
        self._small = None
        self._grow(needed)  # nothing in the table yet: made at its size
        self._zero = self._insert(small)

    def _grow(self, needed: int) -> None:
        """Extend the table in place to at least twice `needed` first slots (a power of two)."""
        old_size = self._mask + 1
        size = old_size
        while needed * 2 > size:
            size *= 2
        if not self._count:  # nothing to move (a group's first page): made at its size
            self._slots = array("Q", (_EMPTY,)) * (size + 1)  # the last one stops probes
            self._mask = size - 1
            return
        slots = self._slots
        # Digests whose probes ran past the last first slot sit where the new first slots
        # go: taken out now, put back once the others are in place (a handful).
        overflow = [digest for digest in slots[old_size:] if digest != _EMPTY]
        del slots[old_size:]
        while len(slots) <= size:
            slots.extend(_FREE_BLOCK[: size + 1 - len(slots)])
        self._mask = mask = size - 1
        stop = size
        # A digest's new first slot is its old one or lies in the new part. Moved in slot
        # order, each digest's probe crosses only slots already visited or the new part,
        # which hold only digests already moved: no later move opens a gap in its chain.
        # The array is read as the loop comes to each slot: after every move made from the
        # slots before it.
        for at, digest in enumerate(islice(slots, old_size)):
            if not digest:
                continue
            home = digest & mask
            if home == at:
                continue
            slots[at] = _EMPTY
            while slots[home] != _EMPTY:
                home += 1
            slots[home] = digest
            if home == stop:
                slots.append(_EMPTY)
                stop += 1
        count = self._count
        self._insert(overflow)
        self._count = count  # put back, not added
