"""docs/contract/turn-record.md `export.selection`: every published turn says which rule
chose its rows and lists every group it weighed, with estimate, real rows (null when never
read) and score."""

from __future__ import annotations

from typing import Any

from handlers import phases
from schemas.records import ExportSelection
from tests.chat import Chat, drive, history_then_a_csv_two_turns_later, samples


def why(chat: Chat, history_limit: int = 10) -> tuple[ExportSelection, phases.ExportPlan]:
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event(history_limit))
    assert isinstance(outcome, phases.ExportPlan)
    return outcome.why, outcome


def groups(selection: ExportSelection) -> list[tuple[Any, ...]]:
    return [(g.action, g.estimate, g.rows, g.chosen) for g in selection.groups]


def test_rule_assistant_table_when_a_composed_table_wins_over_action_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("history", samples(50)))
    chat.reply("```csv\ntimestamp,value,flag\nt0000,12.0,ok\nt0001,12.001,low\n```")
    selection, plan = why(chat)
    assert plan.row_source == "assistant_table" and selection.rule == "assistant_table"
    assert groups(selection) == [("history", 50, 50, False)]


def test_rule_assistant_table_for_a_derived_request_reads_no_group() -> None:
    chat = Chat()
    chat.user("summarize per hour and export as csv")
    chat.tools(("history", samples(60)))
    chat.reply("| hour | avg |\n|---|---|\n| 00 | 12.01 |")
    selection, _ = why(chat)
    assert selection.rule == "assistant_table"
    assert groups(selection) == [("history", 60, None, False)]


def test_rule_assistant_table_when_only_a_table_lists_no_groups() -> None:
    chat = Chat()
    chat.user("put this in a spreadsheet")
    chat.reply("| a | b |\n|---|---|\n| 1 | 2 |")
    selection, _ = why(chat)
    assert selection.rule == "assistant_table" and selection.groups == []


def test_rule_excerpt_replaced_when_action_rows_beat_a_pasted_excerpt() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("history", samples(50)))
    chat.reply("Sample:\n\n| Timestamp | Value (V) |\n|---|---|\n| t0000 | 12.00 V |\n| … | … |")
    selection, plan = why(chat)
    assert plan.row_source == "action_rows" and selection.rule == "excerpt_replaced"
    assert groups(selection) == [("history", 50, 50, True)]


def test_rule_single_group_when_one_action_gave_the_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("history", samples(8)))
    chat.reply("Done.")
    selection, _ = why(chat)
    assert selection.rule == "single_group"
    assert groups(selection) == [("history", 8, 8, True)]
    assert selection.groups[0].turn_id == "t1"


def test_rule_single_group_when_the_other_group_is_empty() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("lookup", {"items": []}), ("history", samples(4)))
    chat.reply("Done.")
    selection, _ = why(chat)
    assert selection.rule == "single_group"
    assert groups(selection) == [("lookup", 0, 0, False), ("history", 4, 4, True)]


def test_rule_dominant_lists_the_lookups_never_read_with_null_rows() -> None:
    chat = Chat()
    chat.user("get the history and create a csv")
    chat.tools(("list_instances", [{"id": "sat-07"}]), ("list_parameters", [{"p": "V"}]))
    chat.tools(("history", samples(450)), ("history", samples(900, 450)))
    chat.reply("Done.")
    selection, _ = why(chat)
    assert selection.rule == "dominant"
    assert groups(selection) == [
        ("list_instances", 1, None, False),
        ("list_parameters", 1, None, False),
        ("history", 900, 900, True),
    ]


def test_rule_combined_marks_every_group_chosen() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("a", [{"x": 1}, {"x": 2}]), ("b", [{"y": 1}, {"y": 2}, {"y": 3}]))
    chat.reply("Done.")
    selection, _ = why(chat)
    assert selection.rule == "combined"
    assert groups(selection) == [("a", 2, 2, True), ("b", 3, 3, True)]


def test_rule_reach_back_newest_lists_the_phase_1_scan() -> None:
    chat = history_then_a_csv_two_turns_later()
    selection, plan = why(chat)
    assert plan.row_source == "prior_turn" and selection.rule == "reach_back_newest"
    assert [(g.turn_id, *t) for g, t in zip(selection.groups, groups(selection), strict=True)] == [
        ("t1", "history", 900, 900, True),
        ("t2", "get_facts", 1, None, False),
    ]


def test_rule_reach_back_any_when_no_group_is_a_dataset() -> None:
    chat = Chat()
    chat.user("list the sites")
    chat.tools(("list_sites", [{"site": "Kiruna"}, {"site": "Svalbard"}]))
    chat.reply("Two sites.")
    chat.user("create a json")
    chat.reply("Here.")
    selection, _ = why(chat)
    assert selection.rule == "reach_back_any"
    assert groups(selection) == [("list_sites", 2, 2, True)]


def test_unpublished_turn_has_no_selection() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.reply("There is no data yet.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.Finished)
