"""The digest log finds exactly the digests an earlier page held, wherever they sit."""

from __future__ import annotations

import random
import tracemalloc
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers import digest_log
from handlers.digest_log import DigestLog, MemoryStore

# Digests at the edges of the top bytes (where the rounds cut) and anywhere else.
DIGESTS = st.one_of(
    st.sampled_from([0, 1, 2**56 - 1, 2**56, 2**63, 2**64 - 2**56, 2**64 - 1]),
    st.integers(min_value=0, max_value=2**64 - 1),
    st.integers(min_value=0, max_value=40).map(lambda n: n << 56 | n),
)


def oracle(pages: list[list[int]]) -> dict[int, tuple[list[int], set[int]]]:
    found = {}
    earlier: set[int] = set()
    for index, page in enumerate(pages):
        repeated = earlier.intersection(page)
        if repeated:
            found[index] = ([at for at, d in enumerate(page) if d in repeated], repeated)
        earlier.update(page)
    return found


@settings(max_examples=300, deadline=None)
@given(
    pages=st.lists(st.lists(DIGESTS, max_size=30), max_size=8),
    round_digests=st.sampled_from([1, 3, 17, 65_536]),
    again=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 29)), max_size=10),
)
def test_repeats_are_the_digests_an_earlier_page_held(
    pages: list[list[int]],
    round_digests: int,
    again: list[tuple[int, int]],
) -> None:
    # Later pages repeating digests of earlier ones, as a tool's paging repeats rows.
    for source, at in again:
        if source < len(pages) and at < len(pages[source]) and len(pages) > 1:
            pages[-1].append(pages[source][at])
    log = DigestLog(MemoryStore())
    for page in pages:
        log.add(page)
    assert len(log) == len(pages)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(digest_log, "ROUND_DIGESTS", round_digests)
        found = log.repeats()
        assert {i: (list(at), set(held)) for i, (at, held) in found.items()} == oracle(pages)
        assert all(len(held) == len(set(held)) for _, held in found.values())


def test_a_page_is_logged_in_row_order_and_by_its_top_byte() -> None:
    store = MemoryStore()
    log = DigestLog(store)
    log.add([3 << 56, 5, 1 << 56 | 7, 4])
    log.add([5, 9, 4, 3 << 56, 5])
    # Repeats inside a page are kept; what an earlier page held is found, every time.
    ((page, (at, held)),) = log.repeats().items()
    assert (page, list(at), sorted(held)) == (1, [0, 2, 3, 4], [4, 5, 3 << 56])


def test_a_page_served_twice_is_answered_in_arrays_and_sets_of_a_round_at_most() -> None:
    # Every digest of the second page repeats the first: the answer is kept in 8-byte
    # arrays, and the repeats are met as sets of ROUND_DIGESTS at most, so the search holds
    # no set of the page's digests (~60 bytes each) at any moment.
    rng = random.Random(7)
    page = [rng.getrandbits(64) for _ in range(40_000)]
    log = DigestLog(MemoryStore())
    log.add(page)
    log.add(page[::-1])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(digest_log, "ROUND_DIGESTS", 4096)
        tracemalloc.start()
        try:
            found = log.repeats()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    at, held = found[1]
    assert list(at) == list(range(40_000)) and sorted(held) == sorted(page)
    assert isinstance(at, array) and isinstance(held, array)
    # The arrays and the page read back (4 x 320 KB), a round's sets: under 2.2 MB, where
    # one set of the 40,000 repeats alone takes ~2.5 MB.
    assert peak < 2_200_000, peak
