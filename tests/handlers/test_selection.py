"""decision.md step 7: reach-back phase 1, dominance, the source column, excerpt cells."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handlers.cell_keys import cell_matches
from handlers.excerpt import TableMatcher, is_excerpt
from handlers.reach_back import MAX_REACH_BACK_ARTIFACTS, reach_back
from handlers.selection import ResultRef, choose_actions, source_column_name
from handlers.tables import Table
from schemas.documents import CompactCitation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public"


class Calls:
    """Builds refs in call order, the way the window hands them over."""

    def __init__(self) -> None:
        self.refs: list[ResultRef] = []

    def add(
        self,
        turn: str,
        action: str,
        rows: int | None,
        *,
        artifact: bool = True,
        citation: dict[str, Any] | None = None,
    ) -> ResultRef:
        order = len(self.refs)
        if citation is None and rows is not None:
            citation = {"result": {"items": []}, "row_count": rows, "columns": ["a"]}
        ref = ResultRef(
            turn_id=turn,
            action=action,
            call_id=f"call_{order}",
            # Paths that point nowhere: phase 1 must decide without reading them.
            artifact=f"artifacts/conv/missing/{turn}/{order}.json" if artifact else None,
            citation=CompactCitation.model_validate(citation) if citation is not None else None,
            order=order,
        )
        self.refs.append(ref)
        return ref


def test_reach_back_reads_citations_only_seed_example() -> None:
    # The seed's measured window: m1 holds the dataset, the newer turns hold lookups.
    calls = Calls()
    calls.add("m1", "list_instances", 1)
    page1 = calls.add("m1", "list_parameter_history", 450)
    page2 = calls.add("m1", "list_parameter_history", 450)
    calls.add("m2", "list_instances", 1)
    calls.add("m3", "get_facts", 1)
    assert reach_back(calls.refs) == [page1, page2]


def test_reach_back_estimates_from_the_remaining_items_marker() -> None:
    compacted = {"result": {"items": [{"a": i} for i in range(5)] + [{"remaining_items": 445}]}}
    calls = Calls()
    page = calls.add("m1", "history", None, citation=compacted)
    calls.add("m2", "get_facts", 1)
    assert reach_back(calls.refs) == [page]


def test_reach_back_newest_turn_with_dataset_wins_over_newer_small_groups() -> None:
    calls = Calls()
    calls.add("m1", "history", 500)
    newer = calls.add("m2", "history", 12)
    calls.add("m3", "get_facts", 3)
    assert reach_back(calls.refs) == [newer]


def test_reach_back_best_group_of_a_turn_has_most_rows() -> None:
    calls = Calls()
    calls.add("m1", "list_sites", 20)
    big = calls.add("m1", "history", 30)
    calls.add("m1", "list_sites", 5)
    assert reach_back(calls.refs) == [big]


def test_reach_back_tie_goes_to_first_called_group() -> None:
    calls = Calls()
    first = calls.add("m1", "list_a", 15)
    calls.add("m1", "list_b", 15)
    assert reach_back(calls.refs) == [first]


def test_reach_back_falls_back_to_newest_group_with_any_rows() -> None:
    calls = Calls()
    calls.add("m1", "list_a", 4)
    newest = calls.add("m2", "list_b", 2)
    calls.add("m2", "list_c", 0)
    calls.add("m3", "no_citation", None)
    assert reach_back(calls.refs) == [newest]


def test_reach_back_nothing_with_rows_gives_nothing() -> None:
    calls = Calls()
    calls.add("m1", "list_a", 0)
    calls.add("m2", "no_citation", None)
    assert reach_back(calls.refs) == []
    assert reach_back([]) == []


def test_reach_back_reads_at_most_25_artifacts() -> None:
    calls = Calls()
    pages = [calls.add("m1", "history", 100) for _ in range(30)]
    assert reach_back(calls.refs) == pages[:25] and MAX_REACH_BACK_ARTIFACTS == 25


def test_reach_back_skips_results_without_artifacts() -> None:
    calls = Calls()
    calls.add("m1", "history", 100, artifact=False)
    stored = calls.add("m1", "history", 100)
    assert reach_back(calls.refs) == [stored]


def test_reach_back_keeps_call_order_whatever_the_input_order() -> None:
    calls = Calls()
    first = calls.add("m1", "history", 100)
    second = calls.add("m1", "history", 100)
    assert reach_back([second, first]) == [first, second]


def test_dominance_is_at_least_five_times_the_rows_of_all_the_others() -> None:
    assert choose_actions([("a", 15), ("b", 3)]) == (["a"], False)
    assert choose_actions([("a", 14), ("b", 3)]) == (["a", "b"], True)


def test_dominant_group_used_alone() -> None:
    assert choose_actions([("list_instances", 1), ("history", 900), ("list_parameters", 1)]) == (
        ["history"],
        False,
    )
    assert choose_actions([("lookup", 2), ("history", 10)]) == (["history"], False)


def test_comparable_groups_combined_with_source_action() -> None:
    assert choose_actions([("list_instances", 3), ("list_sites", 4)]) == (
        ["list_instances", "list_sites"],
        True,
    )
    # 10 rows but under 5x the rest, or 5x the rest but under 10 rows: combined.
    assert choose_actions([("a", 3), ("b", 10)]) == (["a", "b"], True)
    assert choose_actions([("a", 1), ("b", 9)]) == (["a", "b"], True)


def test_dominance_tie_goes_to_first_called() -> None:
    assert choose_actions([("a", 50), ("b", 50)]) == (["a", "b"], True)
    assert choose_actions([("a", 50), ("b", 50), ("c", 0)]) == (["a", "b"], True)


def test_single_group_with_rows_is_not_combined() -> None:
    assert choose_actions([("a", 3), ("b", 0)]) == (["a"], False)
    assert choose_actions([("a", 0)]) == ([], False)


def test_source_action_name_taken_uses_2() -> None:
    assert source_column_name(["a", "b"]) == "Source action"
    assert source_column_name(["source ACTION"]) == "Source action 2"
    assert source_column_name(["Source action", "source action 2"]) == "Source action 3"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12.35", 12.345),  # half-up (half-even would give 12.34)
        ("0.12", 0.125),  # half-even (half-up would give 0.13)
        ("0.13", 0.125),
        ("12", 12.0),
        ("12.0", 12),
        (" 12.45 ", 12.45),
        ("-1.5", -1.45),
        ("V", " V "),
        ("true", True),
        ("", None),
    ],
)
def test_rounded_number_matches_excerpt(text: str, value: Any) -> None:
    assert cell_matches(text, value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12.4", 12.345),
        ("12.36", 12.345),
        ("12.3", 12.355),
        ("1", True),
        ("abc", 1.0),
        ("12.35 Vo1t", 12.345),
    ],
)
def test_rounded_number_other_values_do_not_match(text: str, value: Any) -> None:
    assert not cell_matches(text, value)


def test_table_rows_found_by_their_cells() -> None:
    table = Table(("Timestamp", "Value"), (("t1", "12.35"), ("t2", "1")))
    matcher = TableMatcher(table)
    assert matcher.matches({"timestamp": "t1", "value": 12.345, "unit": "V"}) == {0}
    assert matcher.matches({"timestamp": "t2", "value": 1.0}) == {1}
    assert matcher.matches({"timestamp": "t2", "value": 2}) == set()
    assert matcher.matches({"timestamp": "t1", "value": 12.345}, skip={0}) == set()


def test_table_rows_found_in_an_all_number_table() -> None:
    table = Table(("a", "b"), (("1", "2.5"), ("3", "4")))
    assert TableMatcher(table).matches({"a": 3, "b": 4.0}) == {1}


def test_excerpt_wins_for_action_rows() -> None:
    table = Table(("value",), (("1",), ("2",)))
    assert is_excerpt(table, ["value", "unit"], 3, {0, 1})


def test_composed_table_is_not_excerpt() -> None:
    table = Table(("value", "average"), (("1",), ("2",)))
    assert not is_excerpt(table, ["value"], 3, {0, 1})  # a column the rows lack
    table = Table(("value",), (("1",), ("2",)))
    assert not is_excerpt(table, ["value"], 3, {0})  # a row no action row shows
    assert not is_excerpt(table, ["value"], 2, {0, 1})  # as many rows as the action rows


def test_reach_back_clarify_then_answer_fixture_picks_the_history_pages() -> None:
    fixture = json.loads((FIXTURES / "clarify_then_answer.fixture.json").read_text("utf-8"))
    refs = [
        ResultRef(
            message["turn_id"],
            result["name"],
            result["call_id"],
            result["artifact"],
            CompactCitation.model_validate(result["citation"]),
            order,
        )
        for order, (message, result) in enumerate(
            (m, r) for m in fixture["messages"] for r in m.get("results") or []
        )
    ]
    picked = reach_back(refs)
    assert [ref.action for ref in picked] == ["list_parameter_history"] * 2
    assert [ref.artifact for ref in picked] == [refs[2].artifact, refs[3].artifact]


def test_result_refs_with_citations_can_key_a_set() -> None:
    citation = CompactCitation.model_validate({"result": {"items": [{"a": 1}]}, "row_count": 1})
    ref = ResultRef("t", "a", "c", None, citation, 0)
    assert ref in {ref}
