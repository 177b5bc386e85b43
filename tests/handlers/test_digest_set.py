"""The de-duplication set answers exactly what the earlier pages held, however many pages."""

from __future__ import annotations

import random
import tracemalloc
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers import digest_set
from handlers.digest_set import DigestSet

# The bounds on the digests kept in a set before the table is built that the answers are
# checked at: the table from the first digest, a hand-over after a few, and the real one.
SMALL_BOUNDS = pytest.mark.parametrize("small", [0, 5, digest_set.SMALL])


@pytest.fixture
def table_at_once() -> Iterator[None]:
    """Digests go to the table from the first one (the growth tests below are about it)."""
    with patch.object(digest_set, "SMALL", 0):
        yield


DIGESTS = st.one_of(
    st.integers(min_value=0, max_value=2**64 - 1),
    # Low bits alike: the same first slot, so look-ups walk probe chains.
    st.integers(min_value=0, max_value=2**20 - 1).map(lambda high: (high << 44) | 5),
    st.sampled_from([0, 1, 2**64 - 1, 1024, 2048]),
)
PAGES = st.lists(st.lists(DIGESTS, max_size=300), max_size=12)


class SortedPages:
    """The structure it replaced: each page's digests sorted, searched page by page."""

    def __init__(self) -> None:
        self.pages: list[array[int]] = []

    def __contains__(self, digest: int) -> bool:
        for digests in self.pages:
            at = bisect_left(digests, digest)
            if at < len(digests) and digests[at] == digest:
                return True
        return False

    def add_all(self, digests: list[int]) -> None:
        self.pages.append(array("Q", sorted(digests)))


@SMALL_BOUNDS
@settings(max_examples=200, deadline=None)
@given(pages=PAGES, probes=st.lists(DIGESTS, max_size=50))
def test_membership_is_exactly_what_earlier_pages_added(
    small: int, pages: list[list[int]], probes: list[int]
) -> None:
    with patch.object(digest_set, "SMALL", small):
        table, oracle = DigestSet(), SortedPages()
        for page in pages:
            for digest in [*page, *probes]:
                assert (digest in table) == (digest in oracle)
            table.add_all(page)
            oracle.add_all(page)
        assert len(table) == len({d for page in pages for d in page})


def test_growth_keeps_every_digest() -> None:
    table = DigestSet()
    digests = [(n * 0x9E3779B97F4A7C15) % 2**64 for n in range(50_000)]
    for start in range(0, len(digests), 1000):
        table.add_all(digests[start : start + 1000])
    assert all(digest in table for digest in digests)
    assert len(table) == len(set(digests))
    assert (0x9E3779B97F4A7C15 * 50_001) % 2**64 not in table


@SMALL_BOUNDS
def test_the_digest_zero_and_other_values_are_members_only_once_added(small: int) -> None:
    with patch.object(digest_set, "SMALL", small):
        table = DigestSet()
        assert 0 not in table and "x" not in table and 1.0 not in table
        table.add_all([0, 0, 7])
        assert 0 in table and 7 in table and len(table) == 2
        assert "x" not in table and 7.0 not in table


def test_a_few_digests_are_kept_without_a_table_until_more_are_coming() -> None:
    table = DigestSet()
    table.add_all([0, 1, 2])
    assert table.add_absent([2, 3, 3, 0, 4]) == [1, 2, 4]
    table.reserve(digest_set.SMALL)
    assert table.nbytes == 0  # a headline turn's group never makes the table
    table.reserve(digest_set.SMALL + 1)  # the set makes way, its digests (0 too) kept
    assert table.nbytes > 0
    assert len(table) == 5 and table.absent([0, 1, 2, 3, 4, 5]) == [5]
    assert table.add_absent([5, 0, 5]) == [0, 2]


@pytest.mark.usefixtures("table_at_once")
def test_the_digest_zero_is_absent_from_the_table_until_added() -> None:
    # 0 marks a free slot, so the table keeps it in a flag: a look-up of 0 must read the
    # flag, never probe (a probe for 0 stops at the first free slot and "finds" it).
    table = DigestSet()
    table.add_all([1, 2])
    assert table.nbytes > 0
    assert table.absent([0, 1, 3]) == [0, 2]
    assert table.add_absent([3, 0, 0, 1]) == [0, 1, 2]
    assert table.absent([0, 3]) == []


# Digests whose first slot is at or near the end of the first 1024 slots: their probes run
# past the last first slot, into the slots that growing turns into first slots.
def _at_the_end(rng: random.Random) -> int:
    return (rng.getrandbits(54) << 10) | rng.randrange(1016, 1024)


_KINDS = (
    lambda rng: rng.getrandbits(64),
    lambda rng: (rng.getrandbits(20) << 44) | 5,  # low bits alike: one long probe chain
    _at_the_end,
    lambda rng: rng.choice((0, 1, 2**64 - 1, 1024, 2048)),
)


def drawn_pages(seed: int, sizes: list[int], kinds: set[int]) -> Iterator[list[int]]:
    """Pages of digests from a seeded generator, a fifth of them repeats: of an earlier page
    or of the same page, alike."""
    rng = random.Random(seed)
    makers = [_KINDS[kind] for kind in sorted(kinds)]
    seen: list[int] = []
    for size in sizes:
        page: list[int] = []
        for _ in range(size):
            pool = seen if seen and rng.random() < 0.5 else page
            page.append(
                rng.choice(pool) if pool and rng.random() < 0.2 else rng.choice(makers)(rng)
            )
        yield page
        seen.extend(page)


def strangers(seed: int) -> list[int]:
    """Digests drawn after the pages: almost surely never added."""
    rng = random.Random(~seed)
    return [_KINDS[0](rng) for _ in range(50)]


# Pages large enough to grow the table several times (from 1024 first slots); drawn from a
# seeded generator because, drawn by hypothesis, a page of 1500 digests passes its limits.
PAGE_PLANS = {
    "seed": st.integers(min_value=0, max_value=2**32),
    "sizes": st.lists(st.integers(min_value=0, max_value=1500), max_size=10),
    "kinds": st.sets(st.sampled_from(range(len(_KINDS))), min_size=1),
}


@SMALL_BOUNDS
@settings(max_examples=40, deadline=None)
@given(**PAGE_PLANS)
def test_each_page_is_answered_as_a_python_set_of_the_earlier_pages_answers(
    small: int, seed: int, sizes: list[int], kinds: set[int]
) -> None:
    with patch.object(digest_set, "SMALL", small):
        table, oracle = DigestSet(), set[int]()
        for page in drawn_pages(seed, sizes, kinds):
            assert table.absent(page) == [i for i, d in enumerate(page) if d not in oracle]
            assert [d in table for d in page] == [d in oracle for d in page]
            table.add_all(page)
            oracle.update(page)
            assert len(table) == len(oracle)
        assert [d in table for d in strangers(seed)] == [d in oracle for d in strangers(seed)]


@pytest.mark.usefixtures("table_at_once")
def test_a_digest_that_stays_behind_one_that_moved_is_found_after_growing() -> None:
    table = DigestSet()
    moves = (1 << 10) | 5  # first slot 5 of 1024, then 1029 of 2048
    stays = (1 << 20) | 5  # first slot 5 of 1024 and of 2048: probed past `moves`, slot 6
    table.add_all([moves, stays])
    table.add_all([(n << 11) | 0x400 | 7 for n in range(1, 600)])  # grows to 2048
    assert table.absent([moves, stays]) == []


@pytest.mark.usefixtures("table_at_once")
def test_digests_probed_past_the_last_first_slot_are_found_after_growing() -> None:
    table = DigestSet()
    crowded = [(n << 10) | 1023 for n in range(1, 400)]  # all want the last first slot
    table.add_all(crowded)
    spread = [(n * 0x9E3779B97F4A7C15) % 2**64 | 1 for n in range(1, 3000)]
    table.add_all(spread)  # grows to 8192 first slots, twice over
    everything = crowded + spread
    assert table.absent(everything) == []
    strangers = [(n << 10) | 1023 for n in range(400, 800)] + [(n << 11) | 1023 for n in range(2)]
    strangers = [d for d in strangers if d not in set(everything)]
    assert table.absent(strangers) == list(range(len(strangers)))
    assert len(table) == len(set(everything))


def test_growing_holds_the_grown_table_only_not_the_old_one_beside_it() -> None:
    first = [(n * 0x9E3779B97F4A7C15) % 2**64 | 1 for n in range(1, 60_000)]
    more = [(n * 0xBF58476D1CE4E5B9) % 2**64 | 1 for n in range(1, 60_000)]
    tracemalloc.start()
    try:
        table = DigestSet()
        table.add_all(first)
        before = table.nbytes
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        table.add_all(more)
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    assert table.nbytes >= 2 * before  # it did grow
    # The growth itself (the old slots reallocated, not kept beside the new ones) and the
    # array's spare sixteenth, plus a block of free slots and the digests that probed past
    # the end; the old table beside the new would be `before` more.
    assert peak <= (table.nbytes - before) + table.nbytes // 16 + 128 * 1024


@SMALL_BOUNDS
@settings(max_examples=40, deadline=None)
@given(**PAGE_PLANS)
def test_adding_a_page_answers_what_it_held_that_earlier_pages_did_not(
    small: int, seed: int, sizes: list[int], kinds: set[int]
) -> None:
    # add_absent is absent then add_all in one probe: repeats inside the page count as
    # absent when the earlier pages lacked them, present when they held them.
    with patch.object(digest_set, "SMALL", small):
        table, oracle = DigestSet(), set[int]()
        for page in drawn_pages(seed, sizes, kinds):
            assert table.add_absent(page) == [i for i, d in enumerate(page) if d not in oracle]
            oracle.update(page)
            assert len(table) == len(oracle)
            assert all(d in table for d in page)
        assert [d in table for d in strangers(seed)] == [d in oracle for d in strangers(seed)]


@SMALL_BOUNDS
def test_a_repeat_inside_a_page_is_kept_once_the_set_was_hit(small: int) -> None:
    with patch.object(digest_set, "SMALL", small):
        table = DigestSet()
        table.add_all([11])
        # The hit on 11 makes the call gather what it added (5); the later 5 and 6 are its own.
        assert table.add_absent([5, 11, 5, 6, 6, 11, 0, 0]) == [0, 2, 3, 4, 6, 7]
        assert table.add_absent([0, 6, 7]) == [2]


def test_a_reserved_set_takes_that_many_digests_without_growing() -> None:
    first = [(n * 0x9E3779B97F4A7C15) % 2**64 for n in range(1, 3001)]
    second = [(n * 0xBF58476D1CE4E5B9) % 2**64 for n in range(1, 3001)]
    table = DigestSet()
    table.reserve(len(first) + len(second))
    sized = table.nbytes
    table.add_all(first)
    assert table.add_absent([*second, *first[:10]]) == list(range(len(second)))
    assert table.nbytes == sized  # made once at its size: no digest moved by growing
    assert len(table) == len(set(first) | set(second))
    assert table.absent([*first, *second]) == []


@pytest.mark.usefixtures("table_at_once")
@pytest.mark.parametrize("way", ["add_all", "add_absent", "reserve"])
def test_the_table_grows_once_past_half_full_to_twice_its_digests(way: str) -> None:
    def add(digests: list[int], in_all: int) -> None:
        if way == "add_all":
            table.add_all(digests)
        elif way == "add_absent":
            assert table.add_absent(digests) == list(range(len(digests)))
        else:
            table.reserve(in_all)

    table = DigestSet()
    table.add_all([1])
    assert table.nbytes == (1024 + 1) * 8  # 1024 first slots and the free slot that stops probes
    add(list(range(2, 513)), 512)  # 512 in all: half full, which the table allows
    assert table.nbytes == (1024 + 1) * 8
    add([513], 513)  # past half full: twice as many first slots
    assert table.nbytes == (2048 + 1) * 8
    table.reserve(2048)  # room for 2048: twice as many first slots, not more
    assert table.nbytes == (4096 + 1) * 8


@SMALL_BOUNDS
def test_reserving_more_after_digests_were_added_keeps_them(small: int) -> None:
    with patch.object(digest_set, "SMALL", small):
        table = DigestSet()
        table.add_all([0, 5, (1 << 10) | 5, 2**64 - 1])
        table.reserve(10_000)
        assert table.absent([0, 5, (1 << 10) | 5, 2**64 - 1, 6]) == [4]
        assert len(table) == 4
        sized = table.nbytes  # the room was made now: the next 9,996 digests need no more
        table.add_all(list(range(2**20, 2**20 + 9_996)))
        assert len(table) == 10_000 and table.nbytes == sized


@pytest.mark.parametrize("count", [0, 10, 5000])
@pytest.mark.parametrize("with_zero", [False, True])
def test_the_digests_held_are_given_back_in_the_set_and_in_the_table(
    count: int, with_zero: bool
) -> None:
    # A group moving to a digest log hands over what it held, the 0 kept in a flag included.
    rng = random.Random(count)
    digests = [rng.getrandbits(64) | 1 for _ in range(count)] + [0] * with_zero
    held = DigestSet()
    held.add_all(digests[: count // 2])
    held.add_all(digests[count // 2 :])
    assert (held._small is None) == (count > digest_set.SMALL)
    assert sorted(held) == sorted(set(digests))
