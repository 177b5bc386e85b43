"""Taking a page at a time changes nothing a row-at-a-time pass decided: the same rows, in
the same order, the same counts, columns, artifacts, truncation and excerpt matches."""

from __future__ import annotations

import hashlib
import json
import math
from array import array
from bisect import bisect_left
from itertools import chain
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.dataset import RowCollector
from handlers.digest_log import MemoryStore
from handlers.digest_set import DigestSet
from handlers.excerpt import TableMatcher
from handlers.row_digest import row_digest, row_digests
from handlers.rows import Row, RowCleaner, clean_row, extract_rows, is_truncated, locate_rows
from handlers.selection import ResultRef
from handlers.tables import Table

KEYS = st.sampled_from(["t", "v", "unit", "api_key", "Token", "id", "x-secret", "name", "Value"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=2),
    st.integers(),
    st.sampled_from([0.0, -0.0, 1.0, 12.5, math.nan, math.inf, 2**64, "\ud800", "", "V", "1"]),
    st.text(max_size=4),
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(KEYS, inner, max_size=2)
)
FLAT_ROWS = st.dictionaries(KEYS, SCALARS, max_size=4)
ROWS = st.one_of(FLAT_ROWS, FLAT_ROWS, st.dictionaries(KEYS, VALUES, max_size=4))
ITEMS = st.lists(st.one_of(ROWS, ROWS, ROWS, SCALARS), max_size=8)
# Pages the cleaner takes as they are (flat rows, no secret key), keys in any order: the
# mixes above rarely make one.
FLAT_PAGES = st.lists(
    st.dictionaries(
        st.sampled_from(["t", "v", "unit", "id", "name", "Value"]), SCALARS, min_size=1
    ),
    min_size=1,
    max_size=8,
)
RESULTS = st.one_of(
    FLAT_PAGES,
    FLAT_PAGES.map(lambda items: {"items": items, "truncated": False}),
    ITEMS,
    ITEMS.map(lambda items: {"items": items, "count": len(items)}),
    ITEMS.map(lambda items: {"data": {"rows": items}, "truncated": True}),
    ROWS,
    ITEMS.map(json.dumps),
    SCALARS,
)


# --- the row-at-a-time pass it replaced, kept as the oracle --------------------------------
def old_digest(row: Row) -> int:
    text = json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    )


class OldCollector:
    """RowCollector as it was: one row at a time, earlier pages as sorted digest arrays."""

    def __init__(self, table: Table | None) -> None:
        self.matcher = TableMatcher(table) if table is not None else None
        self.groups: dict[str, dict[str, Any]] = {}

    def feed(self, ref: ResultRef, result: Any) -> list[Row]:
        group = self.groups.setdefault(
            ref.action,
            {
                "rows": 0,
                "columns": {},
                "pages": [],
                "artifacts": [],
                "truncated": False,
                "matched": set(),
            },
        )
        group["truncated"] = group["truncated"] or is_truncated(result)
        page = array("Q")
        kept = []
        artifacts_before = list(group["artifacts"])
        matched_before = set(group["matched"])
        for raw in extract_rows(result):
            row = clean_row(raw)
            digest = old_digest(row)
            if any(_in(digests, digest) for digests in group["pages"]):
                continue
            if not page and ref.artifact is not None and ref.artifact not in group["artifacts"]:
                group["artifacts"].append(ref.artifact)
            page.append(digest)
            group["rows"] += 1
            group["columns"].update(dict.fromkeys(row))
            if self.matcher is not None and len(group["matched"]) < len(self.matcher.table.rows):
                group["matched"] |= self.matcher.matches(row, group["matched"])
            kept.append(row)
        if page:
            group["pages"].append(array("Q", sorted(page)))
        if kept and not any(kept):
            # A page whose rows hold no key gives no rows (decision.md step 8); its digests
            # still guard later pages, as the collector's do.
            group["rows"] -= len(kept)
            group["artifacts"] = artifacts_before
            group["matched"] = matched_before  # nor matches
            return []
        return kept


def _in(digests: array[int], digest: int) -> bool:
    at = bisect_left(digests, digest)
    return at < len(digests) and digests[at] == digest


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types, floats by value with NaN equal to NaN; key order counts."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or repr(a) == repr(b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


# --- the properties -----------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(pages=st.lists(RESULTS, max_size=5))
def test_a_page_is_cleaned_as_each_row_was(pages: list[Any]) -> None:
    cleaner = RowCleaner()  # one cleaner over many pages: what it learns must not leak
    for result in pages:
        before = json.dumps(result, sort_keys=True, default=repr)
        expected = [clean_row(row) for row in extract_rows(result)]
        rows, keys = cleaner.page(locate_rows(result))
        assert same(rows, expected)
        # Keys handed over are those of the rows, in first-seen order.
        assert keys is None or list(keys) == list(dict.fromkeys(chain.from_iterable(expected)))
        assert json.dumps(result, sort_keys=True, default=repr) == before  # input untouched


def test_a_page_of_known_keys_with_a_secret_inside_a_value_is_cleaned() -> None:
    # The page's keys are all known clean; a secret below them is found only by looking
    # inside its values, which a page of scalars needs no look into.
    cleaner = RowCleaner()
    assert cleaner.page(locate_rows([{"a": 1, "b": "x"}])) == (
        [{"a": 1, "b": "x"}],
        {"a": None, "b": None},
    )
    nested = [{"a": {"token": "t", "c": 1}, "b": "x"}, {"a": [{"Password": "p", "d": 2}], "b": "y"}]
    rows, _ = cleaner.page(locate_rows(nested))
    assert rows == [{"a": {"c": 1}, "b": "x"}, {"a": [{"d": 2}], "b": "y"}]


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(ROWS, max_size=12))
def test_digests_of_a_page_are_each_rows_digest(rows: list[Row]) -> None:
    assert row_digests(rows) == [row_digest(row) for row in rows]


def test_digests_of_a_long_page_with_a_nan_in_one_batch() -> None:
    rows: list[Row] = [{"t": n, "v": n / 7} for n in range(10_000)]
    rows[5000]["v"] = math.nan
    rows[9000]["v"] = 2**70
    assert row_digests(rows) == [row_digest(row) for row in rows]


@settings(max_examples=300, deadline=None)
@given(
    feeds=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.one_of(RESULTS, ITEMS)), max_size=6),
    repeats=st.lists(st.integers(min_value=0, max_value=5), max_size=4),
    with_table=st.booleans(),
    told=st.sampled_from([0, 1, 2, 3]),
)
def test_the_collector_decides_what_the_row_at_a_time_collector_decided(
    feeds: list[tuple[str, Any]], repeats: list[int], with_table: bool, told: int
) -> None:
    # Pages repeated whole or in part, as the paging of a tool repeats rows.
    for at in repeats:
        if at < len(feeds):
            feeds.append(feeds[at])
    table = Table(("t", "v"), (("1", "12.5"), ("V", ""))) if with_table else None
    new, old = RowCollector(table), OldCollector(table)
    refs = [
        ResultRef("t1", action, f"c{order}", f"a/{order}.json", None, order)
        for order, (action, _) in enumerate(feeds)
    ]
    # Told of no page, of every page, of half of them, or of each twice (more than come):
    # the table's size is all it may change.
    new.expect([[], refs, refs[::2], refs + refs][told])
    for ref, (_, result) in zip(refs, feeds, strict=True):
        assert same(new.feed(ref, result), old.feed(ref, result))
    counts = {action: group["rows"] for action, group in old.groups.items()}
    assert new.counts() == counts
    if counts:
        selection = new.select()
        for action in selection.actions:
            assert old.groups[action]["artifacts"] == [
                a for a in selection.source_artifacts if a in old.groups[action]["artifacts"]
            ]
        columns = [c for a in selection.actions for c in old.groups[a]["columns"]]
        assert list(dict.fromkeys(columns)) == [
            c for c in selection.columns if c != selection.source_column
        ]
        assert selection.truncated == any(old.groups[a]["truncated"] for a in selection.actions)
        matched = {a: group["matched"] for a, group in old.groups.items()}
        assert {a: g.matched for a, g in new._groups.items()} == matched


@settings(max_examples=200, deadline=None)
@given(
    pages=st.lists(
        st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=50), max_size=6
    ),
    probe=st.lists(st.integers(min_value=0, max_value=40), max_size=60),
)
def test_absent_positions_are_those_not_in_the_set(
    pages: list[list[int]], probe: list[int]
) -> None:
    table, added = DigestSet(), set()
    for page in pages:
        mixed = [*page, *probe, 0]
        assert table.absent(mixed) == [i for i, d in enumerate(mixed) if d not in added]
        table.add_all(page)
        added.update(page)


# Pages drawn from a few rows, some of them holding only a secret (blank once cleaned), so
# that repeats across pages, pages left with blank rows only and blank repeats are common.
POOLED = st.lists(
    st.sampled_from([{"t": 1, "v": 12.5}, {"t": "V"}, {"v": 2}, {"api_key": "k"}, {}, {"t": 1}]),
    max_size=5,
)


@settings(max_examples=400, deadline=None)
@given(
    feeds=st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.one_of(RESULTS, ITEMS, POOLED, POOLED)),
        max_size=7,
    ),
    repeats=st.lists(st.integers(min_value=0, max_value=6), max_size=5),
    with_table=st.booleans(),
    log_after=st.integers(min_value=0, max_value=12),
    told=st.booleans(),
)
def test_a_logged_group_decides_what_the_row_at_a_time_collector_decided(
    feeds: list[tuple[str, Any]], repeats: list[int], with_table: bool, log_after: int, told: bool
) -> None:
    # The same oracle, with the groups' digests logged past `log_after` (a few, so that
    # small pages switch at any page): the rows handed over less those `skipped` names are
    # the rows the oracle kept, and every figure is the oracle's.
    for at in repeats:
        if at < len(feeds):
            feeds.append(feeds[at])
    table = Table(("t", "v"), (("1", "12.5"), ("V", ""), ("", ""))) if with_table else None
    new, old = RowCollector(table, MemoryStore(), log_after=log_after), OldCollector(table)
    refs = [
        ResultRef("t1", action, f"c{order}", f"a/{order}.json", None, order)
        for order, (action, _) in enumerate(feeds)
    ]
    new.expect(refs if told else [])
    handed: dict[str, list[Row]] = {}
    kept: dict[str, list[Row]] = {}
    for ref, (_, result) in zip(refs, feeds, strict=True):
        handed.setdefault(ref.action, []).extend(new.feed(ref, result))
        kept.setdefault(ref.action, []).extend(old.feed(ref, result))
    counts = {action: group["rows"] for action, group in old.groups.items()}
    assert new.counts() == counts
    for action, rows in handed.items():
        skipped = set(new.skipped(action))
        assert skipped <= set(range(len(rows)))
        assert same([row for at, row in enumerate(rows) if at not in skipped], kept[action])
    if counts:
        selection = new.select()
        assert list(selection.source_artifacts) == [
            a for action in selection.actions for a in old.groups[action]["artifacts"]
        ]
        assert selection.row_count == sum(counts[a] for a in selection.actions)
        columns = [c for a in selection.actions for c in old.groups[a]["columns"]]
        assert list(dict.fromkeys(columns)) == [
            c for c in selection.columns if c != selection.source_column
        ]
        matched = {a: group["matched"] for a, group in old.groups.items()}
        assert {a: g.matched for a, g in new._groups.items()} == matched


def test_a_group_past_its_bound_logs_its_digests_and_keeps_none_in_memory() -> None:
    store = MemoryStore()
    collector = RowCollector(None, store, log_after=100)
    refs = [ResultRef("t1", "get", f"c{n}", f"a/{n}.json", None, n) for n in range(3)]
    collector.expect(refs)
    pages = [[{"t": n, "v": page} for n in range(80)] for page in range(3)]
    pages[2][:10] = pages[0][:10]  # ten repeats of the first page
    for ref, page in zip(refs, pages, strict=True):
        assert len(collector.feed(ref, page)) == 80  # handed over whole, repeats included
    group = collector._groups["get"]
    assert group.log is not None and len(group.earlier) == 0 and not group.last_page
    assert collector.counts() == {"get": 230}
    assert list(collector.skipped("get")) == list(range(160, 170))
    assert collector.select().row_count == 230


SECRET_ONLY = {"api_key": "k"}  # a row left with no key once cleaned


@pytest.mark.parametrize(
    "pages",
    [
        # the blank row repeated, the page kept for a new row
        [[{"t": 1}, SECRET_ONLY], [{"t": 1}, SECRET_ONLY, {"v": 2}], [{"t": 1}, {"v": 2}]],
        # a page left with a blank row only gives no rows, and matches nothing
        [[{"t": 1}], [{"t": 1}, SECRET_ONLY]],
        # a blank row kept beside a new one matches what a blank row matches
        [[{"t": 1}], [{"t": 1}, SECRET_ONLY, {"v": 2}]],
        # a blank row first seen on a page of blank rows alone is a repeat later
        [[SECRET_ONLY], [{"t": 1}, SECRET_ONLY], [SECRET_ONLY, {"v": 3}]],
        # a logged page with no repeat keeps its blank row (and its match)
        [[{"t": 1}], [SECRET_ONLY, {"v": 2}]],
        # every row of a page repeated: its artifact is not a source
        [[{"t": 1}, {"v": 2}], [{"v": 2}, {"t": 1}], [{"t": 5}]],
    ],
)
@pytest.mark.parametrize("log_after", [0, 1, 2, 1_000_000])
def test_blank_rows_and_repeated_pages_of_a_logged_group(
    pages: list[list[Row]], log_after: int
) -> None:
    table = Table(("t", "v"), (("1", ""), ("", "")))  # the second row: what a blank row shows
    new, old = RowCollector(table, MemoryStore(), log_after=log_after), OldCollector(table)
    refs = [ResultRef("t1", "get", f"c{n}", f"a/{n}.json", None, n) for n in range(len(pages))]
    handed: list[Row] = []
    kept: list[Row] = []
    for ref, page in zip(refs, pages, strict=True):
        handed.extend(new.feed(ref, page))
        kept.extend(old.feed(ref, page))
    assert new.counts() == {"get": old.groups["get"]["rows"]}
    skipped = set(new.skipped("get"))
    assert same([row for at, row in enumerate(handed) if at not in skipped], kept)
    assert list(new.select().source_artifacts) == old.groups["get"]["artifacts"]
    assert new._groups["get"].matched == old.groups["get"]["matched"]


def test_a_repeat_with_its_keys_in_another_order_does_not_decide_the_excerpt() -> None:
    # One JSON object, two key orders: a repeat (dropped), but the table's column "value"
    # is filled by the first key of its name, so the repeat alone would match the table's
    # row. A group whose rows have not matched the whole table keeps its digests in memory,
    # where a repeat is dropped before it is matched.
    table = Table(("value", "t"), (("2", "x"),))
    pages = [
        [{"Value": "1", "value": "2", "t": "x"}, {"Value": "9", "value": "9", "t": "y"}],
        [{"value": "2", "Value": "1", "t": "x"}],
    ]
    decided = []
    for store in (None, MemoryStore()):
        collector = RowCollector(table, store, log_after=0)
        refs = [ResultRef("t1", "get", f"c{n}", f"a/{n}.json", None, n) for n in range(2)]
        collector.expect(refs)
        for ref, page in zip(refs, pages, strict=True):
            collector.feed(ref, page)
        selection = collector.select()
        decided.append((selection.row_count, collector.table_is_excerpt()))
        assert collector._groups["get"].log is None
    assert decided == [(2, False), (2, False)]


def test_a_group_logs_its_digests_once_its_rows_matched_the_whole_table() -> None:
    table = Table(("t", "v"), (("0", "0"), ("1", "1")))
    refs = [ResultRef("t1", "get", f"c{n}", f"a/{n}.json", None, n) for n in range(3)]
    for first, logged in (
        ([{"t": 0, "v": 0}, {"t": 1, "v": 1}], True),
        ([{"t": 0, "v": 0}], False),
    ):
        collector = RowCollector(table, MemoryStore(), log_after=0)
        collector.expect(refs)
        pages = [first, [{"t": 5, "v": 5}, {"t": 0, "v": 0}], [{"t": 1, "v": 1}]]
        for ref, page in zip(refs, pages, strict=True):
            collector.feed(ref, page)
        assert (collector._groups["get"].log is not None) == logged
        selection = collector.select()
        assert selection.row_count == len(first) + 1 + (not logged)
        assert collector.table_is_excerpt()
