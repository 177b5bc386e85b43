"""The compact citation, and the row estimate reach-back reads from it (stored-data.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handlers.compaction import bounding_estimate, build_citation, compact, estimate_rows
from schemas.documents import CompactCitation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public"
FIXTURE_NAMES = ("headline", "clarify_then_answer", "two_small_groups")


def telemetry_result(samples: int = 900) -> dict[str, Any]:
    """A paged telemetry result shaped like the seed's list_parameter_history."""
    return {
        "instance_id": "sat-07",
        "parameter": "BatteryVoltage1",
        "start": "2026-11-19T00:00:00Z",
        "end": "2026-11-19T14:59:00Z",
        "page": 1,
        "page_size": samples,
        "total": samples,
        "items": [
            {
                "timestamp": f"2026-11-19T{i // 60:02d}:{i % 60:02d}:00Z",
                "parameter": "BatteryVoltage1",
                "value": round(12.4 + (i % 17) * 0.013, 3),
                "unit": "V",
            }
            for i in range(samples)
        ],
        "next_link": "/instances/sat-07/parameters/BatteryVoltage1/history?page=2",
    }


def test_row_count_estimate_survives_citation_compaction() -> None:
    result = telemetry_result()
    citation = build_citation(result)
    assert len(json.dumps(result)) > 50_000
    assert len(json.dumps(citation)) < 1_000
    assert citation["row_count"] == 900
    assert citation["columns"] == ["timestamp", "parameter", "value", "unit"]
    assert estimate_rows(citation) == 900
    assert estimate_rows(CompactCitation.model_validate(citation)) == 900


def test_row_count_estimate_survives_citation_compaction_from_marker_only() -> None:
    citation = build_citation(telemetry_result())
    del citation["row_count"]
    assert citation["result"]["items"][-1] == {"remaining_items": 895}
    assert estimate_rows(citation) == 900
    assert estimate_rows(CompactCitation.model_validate(citation)) == 900


def test_long_string_keeps_400_chars_and_says_how_many_were_cut() -> None:
    assert compact("x" * 400) == "x" * 400
    assert compact("x" * 450) == "x" * 400 + "…[truncated 50 chars]"
    assert compact("x" * 401) == "x" * 400 + "…[truncated 1 chars]"


def test_long_list_keeps_five_and_a_remaining_items_marker() -> None:
    assert compact(list(range(5))) == [0, 1, 2, 3, 4]
    assert compact(list(range(8))) == [0, 1, 2, 3, 4, {"remaining_items": 3}]


def test_wide_dict_keeps_twelve_keys_and_remaining_keys() -> None:
    wide = {f"k{i}": i for i in range(15)}
    assert compact(wide) == {**{f"k{i}": i for i in range(12)}, "remaining_keys": 3}
    assert compact({f"k{i}": i for i in range(12)}) == {f"k{i}": i for i in range(12)}


def test_containers_at_level_four_become_placeholders() -> None:
    deep = {"a": {"b": {"c": {"d": 1, "e": 2}, "l": [1, 2, 3], "s": "kept"}}}
    assert compact(deep) == {
        "a": {"b": {"c": "<dict with 2 keys>", "l": "<list with 3 items>", "s": "kept"}}
    }
    assert compact([[[[1]]]]) == [[["<list with 1 items>"]]]


def test_compaction_leaves_the_result_unchanged() -> None:
    result = telemetry_result(20)
    before = json.dumps(result)
    compact(result)
    assert json.dumps(result) == before


def test_citation_describes_rows_of_the_full_result() -> None:
    result = {"items": [{"a": 1}, {"b": 2}] + [{"a": i, "c": i} for i in range(10)], "count": 12}
    citation = build_citation(result)
    assert citation["row_count"] == 12
    assert citation["columns"] == ["a", "b", "c"]
    assert list(citation) == ["result", "row_count", "columns"]


def test_citation_of_a_columnar_table_counts_its_rows_and_names_its_columns() -> None:
    table = {"name": "PrimaryResult", "columns": [{"name": "t"}, {"name": "v"}]}
    result = {"tables": [{**table, "rows": [[i, i / 2] for i in range(900)]}]}
    citation = build_citation(result)
    assert (citation["row_count"], citation["columns"]) == (900, ["t", "v"])
    # Without its row_count, a compacted table of columns and rows still bounds its rows.
    compacted = compact({"columns": ["t", "v"], "rows": [[i, i / 2] for i in range(900)]})
    assert bounding_estimate({"result": compacted}) == 900


def test_estimate_counts_compacted_rows_without_row_count() -> None:
    assert estimate_rows({"result": [{"a": 1}, {"a": 2}]}) == 2
    assert estimate_rows({"result": {"name": "x", "status": "ok"}}) == 1
    assert estimate_rows({"result": {"items": []}}) == 0


@pytest.mark.parametrize(
    ("count", "estimate"),
    [(0, 2), (3, 5), (True, 3), ("5", 3), (-1, 3), (2.0, 3)],
)
def test_only_a_whole_count_from_zero_up_is_a_remaining_items_marker(
    count: Any, estimate: int
) -> None:
    # Anything else in the trailing item is a row like the others.
    result = [{"a": 1}, {"a": 2}, {"remaining_items": count}]
    assert estimate_rows({"result": result}) == estimate
    assert bounding_estimate({"result": result}) == estimate


def test_estimate_is_none_when_nothing_to_estimate() -> None:
    assert estimate_rows(None) is None
    assert estimate_rows({}) is None
    assert estimate_rows(CompactCitation()) is None


def test_estimate_ignores_a_row_count_that_is_not_a_number() -> None:
    assert estimate_rows({"row_count": "900", "result": [{"a": 1}]}) == 1
    assert estimate_rows({"row_count": True, "result": [{"a": 1}, {"a": 2}]}) == 2


def fixture_results() -> list[tuple[str, str, Any, dict[str, Any]]]:
    cases = []
    for name in FIXTURE_NAMES:
        fixture = json.loads((FIXTURES / f"{name}.fixture.json").read_text(encoding="utf-8"))
        for message in fixture["messages"]:
            for result in message.get("results") or []:
                artifact = fixture["artifacts"][result["artifact"]]
                cases.append((name, result["call_id"], artifact["result"], result["citation"]))
    return cases


@pytest.mark.parametrize(
    ("fixture", "call_id", "raw", "stored"),
    fixture_results(),
    ids=[f"{case[0]}-{case[1]}" for case in fixture_results()],
)
def test_citation_matches_the_fixtures_golden_citations(
    fixture: str, call_id: str, raw: Any, stored: dict[str, Any]
) -> None:
    assert build_citation(raw) == stored


@pytest.mark.parametrize(
    ("result", "bound"),
    [
        ([{"a": i} for i in range(50)], 50),  # a list: its length and remaining_items, exact
        ({"items": [{"a": i} for i in range(8)], "note": "x" * 500}, 8),  # cut, rows a list
        ({"id": 1, "name": "sat-07"}, 1),  # one row, nothing cut
        ('[{"a": 1}, {"a": 2}]', 2),  # a short JSON string, parsed whole
        ("x" * 500, None),  # a cut string: it read as 1 row
        ({f"k{i}": i for i in range(13)}, None),  # keys past the twelfth: rows may be there
        ({"a": {"b": {"c": {"rows": [1, 2, 3]}}}}, None),  # a placeholder
        ({"id": 1, "tags": [f"t{i}" for i in range(8)]}, None),  # a list cut inside the row
        ({"id": 1, "notes": ["x" * 500]}, None),  # a string cut inside a list
        ({"id": 1, "tags": ["a", "b"]}, 1),  # a whole list inside the row
    ],
)
def test_bounding_estimate_is_the_estimate_only_when_nothing_may_hide_rows(
    result: Any, bound: int | None
) -> None:
    citation = build_citation(result)
    assert bounding_estimate(citation) == citation["row_count"]  # a row_count always bounds
    del citation["row_count"]
    assert bounding_estimate(citation) == bound
