"""The de-duplication set answers exactly what the earlier pages held, however many pages."""

from __future__ import annotations

from array import array
from bisect import bisect_left

from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.digest_set import DigestSet

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


@settings(max_examples=200, deadline=None)
@given(pages=PAGES, probes=st.lists(DIGESTS, max_size=50))
def test_membership_is_exactly_what_earlier_pages_added(
    pages: list[list[int]], probes: list[int]
) -> None:
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


def test_the_digest_zero_and_other_values_are_members_only_once_added() -> None:
    table = DigestSet()
    assert 0 not in table and "x" not in table
    table.add_all([0, 0, 7])
    assert 0 in table and 7 in table and len(table) == 2
