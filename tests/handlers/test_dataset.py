"""decision.md steps 6-8 over fetched results: grouping, de-duplication, selection, excerpts."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from handlers.dataset import RowCollector, finish_row, table_room
from handlers.digest_set import DigestSet
from handlers.rows import Row
from handlers.selection import ResultRef, Selection
from handlers.tables import Table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def ref(action: str, order: int, artifact: str | None = "auto") -> ResultRef:
    path = f"artifacts/conv/t1/call_{order}.json" if artifact == "auto" else artifact
    return ResultRef("t1", action, f"call_{order}", path, None, order)


def feed_all(collector: RowCollector, pages: list[tuple[ResultRef, Any]]) -> list[Row]:
    return [row for r, result in pages for row in collector.feed(r, result)]


def export(collector_pages: list[tuple[ResultRef, Any]], table: Table | None = None) -> Any:
    """Pass 1 then pass 2, as the shell runs them: the selection and the rows of the file."""
    collector = RowCollector(table)
    feed_all(collector, collector_pages)
    selection = collector.select()
    results = {r.order: result for r, result in collector_pages}
    second = RowCollector()
    # Pass 2 reads group by group, each group's pages in call order.
    ordered = sorted((r for r, _ in collector_pages), key=lambda r: r.order)
    refs = [r for action in selection.actions for r in ordered if r.action == action]
    rows = [
        finish_row(row, r.action, selection)
        for r in refs
        for row in second.feed(r, results[r.order])
    ]
    return collector, selection, rows


def test_pages_of_one_action_stay_one_dataset() -> None:
    page1 = {"items": [{"t": i} for i in range(0, 6)], "page": 1}
    page2 = {"items": [{"t": i} for i in range(6, 12)], "page": 2}
    _, selection, rows = export([(ref("history", 0), page1), (ref("history", 1), page2)])
    assert selection.actions == ("history",)
    assert not selection.combined
    assert selection.row_count == 12
    assert [row["t"] for row in rows] == list(range(12))


def test_row_repeated_from_earlier_page_dropped() -> None:
    collector = RowCollector()
    page1 = [{"t": 1, "v": 1.0}, {"t": 2, "v": 2.0}]
    page2 = [{"v": 2.0, "t": 2}, {"t": 3, "v": 3.0}]  # key order does not make it new
    rows = feed_all(collector, [(ref("h", 0), page1), (ref("h", 1), page2)])
    assert rows == [{"t": 1, "v": 1.0}, {"t": 2, "v": 2.0}, {"t": 3, "v": 3.0}]
    assert collector.select().row_count == 3


def test_a_page_left_with_rows_of_no_key_once_its_repeats_go_gives_no_rows() -> None:
    # As a page of such rows alone does (step 8): the keys of the rows dropped as repeats
    # must not make the empty row look like data.
    collector = RowCollector()
    rows = feed_all(collector, [(ref("h", 0), [{"t": 1}]), (ref("h", 1), [{"t": 1}, {}])])
    assert rows == [{"t": 1}]
    selection = collector.select()
    assert selection.row_count == 1
    assert selection.source_artifacts == ("artifacts/conv/t1/call_0.json",)


def test_row_repeated_in_another_action_is_kept() -> None:
    collector = RowCollector()
    rows = feed_all(collector, [(ref("a", 0), [{"x": 1}]), (ref("b", 1), [{"x": 1}])])
    assert rows == [{"x": 1}, {"x": 1}]


def test_repeats_inside_one_page_kept() -> None:
    collector = RowCollector()
    page = [{"t": 1}, {"t": 1}, {"t": 2}]
    assert feed_all(collector, [(ref("h", 0), page)]) == page
    # ...and a later page repeating them drops every copy.
    assert feed_all(collector, [(ref("h", 1), [{"t": 1}, {"t": 3}])]) == [{"t": 3}]
    assert collector.select().row_count == 4


def test_table_room_projects_the_expected_pages_at_most_four_times_over() -> None:
    assert table_room(200, pages_seen=2, pages_expected=10) == 800  # 1,000 projected, capped
    assert table_room(200, pages_seen=2, pages_expected=5) == 500
    assert table_room(200, pages_seen=2, pages_expected=2) == 200  # the last page: no guess
    assert table_room(200, pages_seen=3, pages_expected=0) == 200  # never told


def test_a_group_told_its_pages_moves_its_digests_at_most_once(monkeypatch: Any) -> None:
    """De-dup of pages 3 to N would otherwise double the table page after page, moving every
    digest held each time (a third of the step's time at 10 pages of 100,000)."""
    moves: list[int] = []
    grow = DigestSet._grow

    def counted(table: DigestSet, needed: int) -> None:
        if len(table):
            moves.append(len(table))
        grow(table, needed)

    monkeypatch.setattr(DigestSet, "_grow", counted)
    pages = [(ref("h", n), [{"t": n * 1000 + i} for i in range(1000)]) for n in range(10)]
    told = RowCollector()
    told.expect(r for r, _ in pages)
    assert len(feed_all(told, pages)) == 10_000
    assert moves == [2000]  # sized for 8,000 at page 2 (four times what it held), then 10,000
    moves.clear()
    # Not told: pages 2 to 4 go into a set (handlers.digest_set.SMALL), page 5 makes the
    # table for 5,000 from the set's 4,000, page 9 grows it.
    assert len(feed_all(RowCollector(), pages)) == 10_000
    assert moves == [8000]


def test_rows_are_cleaned_of_secret_keys() -> None:
    collector = RowCollector()
    rows = feed_all(collector, [(ref("h", 0), [{"id": 1, "api_key": "k", "x": {"token": 1}}])])
    assert rows == [{"id": 1, "x": {}}]
    assert collector.select().columns == ("id", "x")


def test_dominant_group_used_alone() -> None:
    pages = [
        (ref("list_instances", 0), {"items": [{"instance_id": "sat-07"}], "count": 1}),
        (ref("history", 1), [{"t": i} for i in range(10)]),
        (ref("history", 2), [{"t": i} for i in range(10, 20)]),
    ]
    _, selection, rows = export(pages)
    assert selection.actions == ("history",)
    assert selection.source_column is None
    assert selection.columns == ("t",)
    assert selection.source_artifacts == (
        "artifacts/conv/t1/call_1.json",
        "artifacts/conv/t1/call_2.json",
    )
    assert len(rows) == 20 and all("Source action" not in row for row in rows)


def test_comparable_groups_combined_with_source_action() -> None:
    pages = [
        (ref("list_instances", 0), [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]),
        (ref("list_sites", 1), [{"site": "K", "name": "Svalbard"}]),
    ]
    _, selection, rows = export(pages)
    assert selection.combined
    assert selection.source_column == "Source action"
    assert selection.columns == ("id", "name", "site", "Source action")
    assert rows[0] == {"id": 1, "name": "a", "Source action": "list_instances"}
    assert rows[2] == {"site": "K", "name": "Svalbard", "Source action": "list_sites"}


def test_source_action_name_taken_uses_2() -> None:
    pages = [
        (ref("a", 0), [{"source action": "x"}]),
        (ref("b", 1), [{"Source Action": "y"}]),
    ]
    _, selection, rows = export(pages)
    assert selection.source_column == "Source action 2"
    assert rows[0] == {"source action": "x", "Source action 2": "a"}


def test_combined_rows_are_written_group_by_group_in_first_call_order() -> None:
    pages = [
        (ref("a", 0), [{"k": "a1"}]),
        (ref("b", 1), [{"k": "b1"}]),
        (ref("a", 2), [{"k": "a2"}]),
    ]
    _, selection, rows = export(pages)
    assert selection.actions == ("a", "b")
    assert [row["k"] for row in rows] == ["a1", "a2", "b1"]


def test_a_group_keeps_its_first_call_whatever_order_its_pages_are_fed_in() -> None:
    # The shell feeds a group's pages in call order today; the collector does not rely on
    # it: "b" called between a's two pages comes after a, even when a's later page came first.
    collector = RowCollector()
    feed_all(
        collector,
        [
            (ref("a", 2), [{"k": "a2"}]),
            (ref("b", 1), [{"k": "b1"}, {"k": "b2"}]),
            (ref("a", 0), [{"k": "a1"}]),
        ],
    )
    selection = collector.select()
    assert selection.combined and selection.actions == ("a", "b")


def test_truncated_when_a_selected_result_says_so() -> None:
    pages = [
        (ref("lookup", 0), {"items": [{"x": 1}], "truncated": True}),
        (ref("history", 1), {"items": [{"t": i} for i in range(50)], "is_truncated": False}),
    ]
    collector = RowCollector()
    feed_all(collector, pages)
    assert not collector.select().truncated  # the truncated lookup is not exported
    pages.append((ref("history", 2), {"items": [{"t": 99}], "rows_truncated": True}))
    collector = RowCollector()
    feed_all(collector, pages)
    assert collector.select().truncated


def test_source_artifacts_are_the_pages_that_gave_rows() -> None:
    pages = [
        (ref("h", 0), [{"t": i} for i in range(12)]),
        (ref("h", 1), [{"t": 0}]),  # only a repeat: none of its rows are in the file
        (ref("h", 2, artifact=None), [{"t": 50}]),
        (ref("h", 3), []),
    ]
    collector = RowCollector()
    feed_all(collector, pages)
    assert collector.select().source_artifacts == ("artifacts/conv/t1/call_0.json",)


def test_nothing_fed_selects_nothing() -> None:
    collector = RowCollector(Table(("a", "b"), (("1", "2"),)))
    selection = collector.select()
    assert selection == Selection((), False, None, (), 0, (), False)
    assert not collector.table_is_excerpt()
    no_table = RowCollector()  # a reply with no table has none to be an excerpt
    feed_all(no_table, [(ref("h", 0), [{"t": 1}])])
    assert not no_table.table_is_excerpt()


def test_excerpt_wins_for_action_rows() -> None:
    table = Table(("Timestamp", "VALUE"), (("t3", "12.35"), ("t1", "1")))
    collector = RowCollector(table)
    rows = [
        {"timestamp": f"t{i}", "value": 12.345 if i == 3 else float(i), "unit": "V"}
        for i in range(5)
    ]
    feed_all(collector, [(ref("h", 0), rows)])
    assert collector.table_is_excerpt()


def test_excerpt_matches_rows_across_combined_groups() -> None:
    table = Table(("name",), (("a",), ("Svalbard",)))
    collector = RowCollector(table)
    feed_all(
        collector,
        [(ref("x", 0), [{"name": "a"}, {"name": "b"}]), (ref("y", 1), [{"name": "Svalbard"}])],
    )
    selection = collector.select()
    assert selection.combined
    assert collector.table_is_excerpt()


def test_composed_table_is_not_excerpt() -> None:
    rows = [{"t": f"t{i}", "v": float(i)} for i in range(3)]

    def excerpt(table: Table) -> bool:
        collector = RowCollector(table)
        feed_all(collector, [(ref("h", 0), rows)])
        return collector.table_is_excerpt()

    assert excerpt(Table(("t", "v"), (("t0", "0"), ("t1", "1"))))
    assert not excerpt(Table(("t", "v", "avg"), (("t0", "0", "1"),)))  # extra column
    assert not excerpt(Table(("t", "v"), (("t0", "5"),)))  # different values
    assert not excerpt(Table(("t", "v"), (("t0", "0"), ("t1", "1"), ("t2", "2"))))  # as many rows


def test_excerpt_counts_every_group_fed_the_lookups_too() -> None:
    # The table shows the lookup's row: retrieved, not composed. The lookup is still not
    # exported; the history is.
    table = Table(("id",), (("sat-07",),))
    collector = RowCollector(table)
    feed_all(
        collector,
        [
            (ref("list_instances", 0), [{"id": "sat-07"}]),
            (ref("history", 1), [{"id": f"s{i}"} for i in range(20)]),
        ],
    )
    selection = collector.select()
    assert selection.actions == ("history",)
    assert collector.table_is_excerpt()


def load_fixture(name: str) -> tuple[dict[str, Any], list[tuple[ResultRef, Any]]]:
    fixture = json.loads((FIXTURES / f"{name}.fixture.json").read_text(encoding="utf-8"))
    pages: list[tuple[ResultRef, Any]] = []
    for message in fixture["messages"]:
        for result in message.get("results") or []:
            r = ResultRef(
                message["turn_id"],
                result["name"],
                result["call_id"],
                result["artifact"],
                None,
                len(pages),
            )
            pages.append((r, fixture["artifacts"][result["artifact"]]["result"]))
    return fixture, pages


def reply_csv_table(text: str) -> Table:
    block = re.search(r"```csv\n(.*?)```", text, re.DOTALL)
    assert block is not None
    header, *body = csv.reader(io.StringIO(block.group(1)))
    return Table(tuple(header), tuple(tuple(row) for row in body if row))


def test_headline_fixture_exports_the_900_history_rows() -> None:
    fixture, pages = load_fixture("headline")
    table = reply_csv_table(fixture["messages"][-1]["content"])
    assert len(table.rows) == 3
    collector, selection, rows = export(pages, table)
    assert selection.actions == ("list_parameter_history",)
    assert selection.row_count == 900 == len(rows)
    assert selection.columns == ("timestamp", "parameter", "value", "unit")
    assert not selection.truncated
    assert set(selection.source_artifacts) == {r.artifact for r, _ in pages[2:]}
    assert rows[0] == {
        "timestamp": "2026-11-19T00:00:00Z",
        "parameter": "BatteryVoltage1",
        "value": 12.45,
        "unit": "V",
    }
    assert rows[-1]["timestamp"] == "2026-11-19T14:59:00Z"
    assert collector.table_is_excerpt()


def test_two_small_groups_fixture_combines_with_source_action() -> None:
    _, pages = load_fixture("two_small_groups")
    _, selection, rows = export(pages)
    assert selection.combined
    assert selection.row_count == 7 == len(rows)
    assert selection.source_column == "Source action"
    assert selection.columns[-1] == "Source action"
    assert set(selection.columns) == {
        "instance_id",
        "name",
        "status",
        "site_id",
        "country",
        "antenna_count",
        "Source action",
    }
    assert Counter(row["Source action"] for row in rows) == {"list_instances": 3, "list_sites": 4}
    assert rows[3] == {
        "site_id": "KSAT",
        "name": "Svalbard",
        "country": "NO",
        "antenna_count": 31,
        "Source action": "list_sites",
    }
