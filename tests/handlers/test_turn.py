"""The decision for one turn (decision.md), driven through the pure core with plain data by
`tests.chat.drive`, which plays the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from handlers import phases
from handlers import turn as story
from handlers.dataset import RowCollector
from handlers.errors import PermanentError, RetryableError
from handlers.rationale import Considered
from schemas.documents import Conversation, parse_message
from schemas.events import TurnCompleted
from tests.chat import (
    CID,
    FETCH_PHASES,
    NOW,
    Chat,
    decision_of,
    drive,
    history_then_a_csv_two_turns_later,
    samples,
    turn_input,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public"


# --------------------------------------------------------------------------------------
# The public fixtures, fed to the core directly
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", sorted(p.name.removesuffix(".expected.json") for p in FIXTURES.glob("*.expected.json"))
)
def test_public_fixtures_decide_as_expected_in_the_core(name: str) -> None:
    fixture = json.loads((FIXTURES / f"{name}.fixture.json").read_text())
    expected = json.loads((FIXTURES / f"{name}.expected.json").read_text())
    for raw in fixture["events"]:
        event = TurnCompleted.model_validate(raw)
        want = expected["turns"][event.turn_id]
        outcome, read, rows = drive(
            fixture["messages"], fixture["artifacts"], event, fixture["conversations"][0]
        )
        assert decision_of(outcome) == want["decision"]
        facts = outcome.facts
        assert (facts.format, facts.carried) == (want["format"], want["carried"])
        assert facts.state_after.model_dump() == want["state_after"]
        if want["export"] is None:
            continue
        assert isinstance(outcome, phases.ExportPlan)
        export = want["export"]
        assert outcome.export_id == export["export_id"] and outcome.blob == export["blob"]
        assert outcome.row_source == export["row_source"]
        if "selection_rule" in export:
            assert outcome.why.rule == export["selection_rule"]
        if outcome.table is not None:
            assert len(outcome.table.rows) == export["row_count"]
            continue
        assert outcome.selection is not None
        assert outcome.selection.row_count == export["row_count"] == len(rows)
        for path in export["source_artifacts_include"] or export["source_artifacts"] or []:
            assert path in outcome.selection.source_artifacts
        # Only the winning group's artifacts were read: lookups are never fetched.
        assert sorted(read) == sorted(outcome.selection.source_artifacts)


# --------------------------------------------------------------------------------------
# Step 2: authorise before any message is read
# --------------------------------------------------------------------------------------
def test_authorise_owner_and_participants_only() -> None:
    conv = Conversation(id="c", user_id="owner", participants=["guest"])
    assert story.authorise(conv, "owner") == "allowed"
    assert story.authorise(conv, "guest") == "allowed"
    assert story.authorise(conv, "stranger") == "forbidden"
    gone = Conversation(id="c", user_id="owner", deleted=True)
    assert story.authorise(gone, "owner") == "deleted"


# --------------------------------------------------------------------------------------
# Step 3: the turn must be visible
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("named", "missing"),
    [("user_message_id", True), ("user_message_id", False), ("reply_message_id", False)],
)
def test_turn_not_visible_yet_is_retryable_turn_not_found(named: str, missing: bool) -> None:
    # The event names its user message and its reply: while either is not visible (not
    # stored yet, or deleted), the turn's request or its story is not known.
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(20)))
    chat.reply("done")
    event = chat.event()
    hidden = getattr(event, named)
    if missing:
        messages = [m for m in chat.messages if m["id"] != hidden]
    else:
        messages = [{**m, "deleted": m["id"] == hidden} for m in chat.messages]
    with pytest.raises(RetryableError) as caught:
        drive(messages, chat.artifacts, event)
    assert caught.value.reason == "turn_not_found"


@pytest.mark.parametrize(
    ("user_at", "reply_at", "says"),
    [
        (1, 3, "the turn's user message id names an assistant message"),
        (2, 3, "the turn's user message id names a tool message"),
    ],
)
def test_an_event_naming_the_wrong_messages_says_what_it_names(
    user_at: int, reply_at: int, says: str
) -> None:
    # Retried like a turn not written yet, but its description tells an operator that
    # waiting will not help: the event names messages that are there, in the wrong parts.
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(2)))
    chat.reply("done")
    ids = [m["id"] for m in chat.messages]
    event = chat.event().model_copy(
        update={"user_message_id": ids[user_at], "reply_message_id": ids[reply_at]}
    )
    with pytest.raises(RetryableError) as caught:
        drive(chat.messages, chat.artifacts, event)
    assert (caught.value.reason, caught.value.description) == ("turn_not_found", says)


# --------------------------------------------------------------------------------------
# Step 4: request and carry-forward
# --------------------------------------------------------------------------------------
def test_no_format_requested_is_no_request() -> None:
    chat = Chat()
    chat.user("show me the battery history")
    chat.tools(("list_x", samples(20)))
    chat.reply("Here it is.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_request" and read == []


def test_empty_user_text_is_no_request_and_drops_pending() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.reply("Which columns do you want?")
    chat.user("   ")
    chat.reply("ok")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_request"
    assert outcome.facts.state_after.state == "idle"


def test_unsupported_format_is_recorded_not_produced() -> None:
    chat = Chat()
    chat.user("export the history as a pdf")
    chat.tools(("list_x", samples(20)))
    chat.reply("done")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "unsupported_format"
    assert outcome.facts.format == "pdf" and read == []


def test_clarification_reply_publishes_nothing_and_awaits() -> None:
    chat = Chat()
    chat.user("create a json of the samples")
    chat.tools(("list_x", samples(20)))
    chat.reply("Should each row be one sample?")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "clarification" and read == []
    assert outcome.facts.state_after.model_dump() == {"state": "awaiting", "format": "json"}


def test_carried_request_reaches_back_for_rows_of_the_clarified_turn() -> None:
    chat = Chat()
    chat.user("create an xml of the samples")
    chat.tools(("list_x", samples(30)))
    chat.reply("Which columns should the rows hold?", clarification=True)
    chat.user("all of them")
    chat.reply("Here you go.", clarification=False)
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and len(read) == 1
    assert outcome.facts.carried and outcome.format == "xml"
    assert outcome.row_source == "prior_turn" and len(rows) == 30


def test_clarification_about_columns_in_any_phrasing_carries_the_request() -> None:
    chat = Chat()
    chat.user("Create a csv of the battery history")
    chat.tools(("get_battery", samples(50)))
    chat.reply("Do you want all the columns or just the voltage?")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "clarification" and read == []
    chat.user("just the voltage please")
    chat.reply("Here is the file.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.facts.carried
    assert (outcome.format, outcome.row_source, len(rows)) == ("csv", "prior_turn", 50)


def test_a_reply_that_delivered_the_file_is_no_clarification_whatever_it_asks_next() -> None:
    chat = Chat()
    chat.user("Create a csv of the battery history")
    chat.tools(("get_battery", samples(50)))
    chat.reply("Here's the CSV with the timestamp and value columns, anything else?")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and len(rows) == 50
    chat.user("no thanks, that's all")
    chat.reply("You're welcome.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_request"


def test_second_clarification_on_a_carried_request_is_clarification_limit() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.reply("Which columns do you want?")
    chat.user("the usual ones")
    chat.reply("Which columns exactly do you mean?")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "clarification_limit"
    assert outcome.facts.carried and outcome.facts.state_after.state == "idle"


def test_state_look_back_does_not_depend_on_history_limit() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(30)))
    chat.reply("Which columns do you want?")
    chat.user("all")
    chat.reply("Here it is.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event(history_limit=0))
    # Carried even though the window is empty; there is nothing to reach back into.
    assert outcome.facts.carried is True
    assert decision_of(outcome) == "no_rows"


def test_state_look_back_reads_whole_turns_only() -> None:
    # The look-back's 40 messages start inside the first turn: the message they start
    # with is no user's request, so that turn's clarification leaves nothing pending.
    chat = Chat()
    chat.user("list the samples")
    chat.reply("Let me look.")
    for _ in range(19):
        chat.tools(("list_x", samples(2)))
    chat.reply("Which columns should be included?")
    chat.user("all of them")
    chat.reply("ok")
    # the current turn is the last two messages; the look-back reads the 40 before them
    first_seen = chat.messages[-2 - story.STATE_LOOKBACK_MESSAGES]
    assert first_seen["content"] == "Let me look." and chat.messages[0]["role"] == "user"
    first_seen["content"] = "create a csv"  # read as a request, it would carry csv
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_request" and outcome.facts.carried is False


def test_an_event_whose_user_message_is_of_another_turn_is_retryable_turn_not_found() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(2)))
    chat.reply("done")
    chat.user("and a json")
    chat.reply("done")
    first = chat.event(turn_number=1)
    event = chat.event().model_copy(update={"user_message_id": first.user_message_id})
    with pytest.raises(RetryableError) as caught:
        drive(chat.messages, chat.artifacts, event)
    assert caught.value.reason == "turn_not_found"


# --------------------------------------------------------------------------------------
# Step 5: passthrough contract
# --------------------------------------------------------------------------------------
def test_derived_request_without_table_exports_nothing_and_reads_nothing() -> None:
    chat = Chat()
    chat.user("calculate the hourly average and create a csv")
    chat.tools(("list_x", samples(60)))
    chat.reply("The average is 12.03 V.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "derived_output_without_table" and read == []


def test_derived_request_exports_the_composed_table() -> None:
    chat = Chat()
    chat.user("summarize per hour and export as csv")
    chat.tools(("list_x", samples(60)))
    chat.reply("| hour | avg |\n|---|---|\n| 00 | 12.01 |\n| 01 | 12.02 |")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and read == []
    assert outcome.row_source == "assistant_table" and outcome.table is not None
    assert outcome.table.columns == ("hour", "avg")


# --------------------------------------------------------------------------------------
# Steps 6 and 7: row sources and selection
# --------------------------------------------------------------------------------------
def test_failed_and_unpaired_results_give_no_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(20)), success=False)
    chat.reply("The call failed.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_rows" and read == []


def test_deleted_tool_message_rows_are_invisible() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(20)))
    chat.reply("Done.")
    chat.messages[2]["deleted"] = True  # the tool message
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_rows" and read == []


def test_excerpt_table_loses_to_the_action_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(50)))
    chat.reply("Sample:\n\n```csv\ntimestamp,value\nt0000,12.0\nt0001,12.001\n```")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert outcome.row_source == "action_rows" and len(rows) == 50


def test_excerpt_between_sentences_without_end_punctuation_loses_to_the_action_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(50)))
    chat.reply(
        "Sure, here are the first samples\ntimestamp,value\nt0000,12.0\nt0001,12.001\n"
        "Let me know if you need more, happy to help"
    )
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert (outcome.row_source, outcome.why.rule) == ("action_rows", "excerpt_replaced")
    assert len(rows) == 50


def test_excerpt_table_with_numbered_rows_loses_to_the_action_rows() -> None:
    # Models number the rows they paste; the numbers are no column of the action rows.
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(50)))
    chat.reply(
        "| # | timestamp | value |\n|---|---|---|\n| 1 | t0000 | 12.0 |\n| 2 | t0001 | 12.001 |"
    )
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert (outcome.row_source, outcome.why.rule) == ("action_rows", "excerpt_replaced")
    assert len(rows) == 50 and list(rows[0]) == ["timestamp", "value"]


_ALERTS = [
    {
        "at": f"2026-11-19T00:{i:02d}:00Z",
        "message": f"Battery voltage below threshold on site {i}",
        "reading": None if i % 3 == 0 else 11.5 + i / 100,
    }
    for i in range(40)
]


@pytest.mark.parametrize(
    ("reply", "rule", "exported"),
    [
        # a dash for the null reading, the long message cut with an ellipsis or elided
        # whole: an excerpt
        (
            "| At | Message | Reading (V) |\n|---|---|---|\n"
            "| 2026-11-19 00:00 | Battery voltage below thr\u2026 | \u2014 |\n"
            "| 2026-11-19 00:01 | Battery voltage below thr\u2026 | 11.51 V |\n"
            "| 2026-11-19 00:02 | \u2026 | 11.52 V |\n",
            "excerpt_replaced",
            40,
        ),
        (
            "at,message,reading\n"
            "2026-11-19T00:00:00Z,Battery voltage below threshold on site 0,null\n"
            "2026-11-19T00:01:00Z,Battery voltage...,11.51\n"
            "2026-11-19T00:03:00Z,Battery...,N/A\n",
            "excerpt_replaced",
            40,
        ),
        # the dash stands where the reading is not null: the model's own figure
        (
            "| at | message | reading |\n|---|---|---|\n"
            "| 2026-11-19 00:01 | Battery voltage below thr\u2026 | - |\n",
            "assistant_table",
            1,
        ),
        # the cut text is not how the message begins
        (
            "| at | message | reading |\n|---|---|---|\n"
            "| 2026-11-19 00:01 | Voltage below thr\u2026 | 11.51 |\n",
            "assistant_table",
            1,
        ),
    ],
)
def test_null_markers_and_cut_texts_show_what_the_action_rows_hold(
    reply: str, rule: str, exported: int
) -> None:
    # Models show a null as a dash, null or N/A, and cut long text with an ellipsis; such
    # a table still shows only retrieved rows, and the 40 of them are exported. A marker
    # or a cut that no retrieved row holds leaves the table the model's own.
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_alerts", {"items": _ALERTS}))
    chat.reply("The first alerts:\n\n" + reply)
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.why.rule == rule
    if rule == "excerpt_replaced":
        assert outcome.row_source == "action_rows" and len(rows) == exported
    else:
        assert outcome.row_source == "assistant_table" and outcome.table is not None
        assert len(outcome.table.rows) == exported


def test_a_query_services_columnar_result_is_exported_row_by_row() -> None:
    # Log Analytics answers with column names and rows of values: each list is a row.
    columns = [{"name": "TimeGenerated", "type": "datetime"}, {"name": "CounterValue"}]
    values = [[f"2026-11-19T{i // 60:02d}:{i % 60:02d}:00Z", 10 + i / 100] for i in range(900)]
    chat = Chat()
    chat.user("create a csv of the cpu counter")
    chat.tools(
        ("query_logs", {"tables": [{"name": "PrimaryResult", "columns": columns, "rows": values}]})
    )
    chat.reply(
        "| TimeGenerated | CounterValue |\n|---|---|\n| 2026-11-19 00:00 | 10.00 |\n"
        "| 2026-11-19 00:01 | 10.01 |\n"
    )
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert (outcome.row_source, outcome.why.rule) == ("action_rows", "excerpt_replaced")
    assert len(rows) == 900
    assert rows[1] == {"TimeGenerated": "2026-11-19T00:01:00Z", "CounterValue": 10.01}


def test_excerpt_table_with_a_secret_column_still_loses_to_the_action_rows() -> None:
    # Step 7 compares the table with the rows as retrieved, before step 8 drops secret
    # keys; the rows lose them as they are read, so the table's secret columns are set
    # aside too. Compared with the cleaned rows, `Token` was no action column: the 3-row
    # table won, and was then exported without it.
    chat = Chat()
    chat.user("Export the token prices to csv")
    chat.tools(
        ("list_prices", {"items": [{"token": f"T{i}", "price": 100 + i} for i in range(30)]})
    )
    chat.reply(
        "First prices:\n\n| Token | Price |\n|---|---|\n| T0 | 100 |\n| T1 | 101 |\n| T2 | 102 |\n"
    )
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert (outcome.row_source, outcome.why.rule) == ("action_rows", "excerpt_replaced")
    assert len(rows) == 30 and all(list(row) == ["price"] for row in rows)


@pytest.mark.parametrize(
    ("action", "published"), [("get_forecast", True), ("list_readings", False)]
)
def test_a_derived_cue_that_names_the_turns_data_lets_its_rows_be_exported(
    action: str, published: bool
) -> None:
    chat = Chat()
    chat.user("Export the weather forecast as csv")
    chat.tools((action, samples(24)))
    chat.reply("Here is the forecast for tomorrow.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    if published:
        assert isinstance(outcome, phases.ExportPlan) and outcome.row_source == "action_rows"
        assert len(rows) == 24
    else:  # "forecast" names no data here: a computation, and no table in the reply
        assert decision_of(outcome) == "derived_output_without_table"


@pytest.mark.parametrize(
    ("action", "published"), [("get_forecast", True), ("list_readings", False)]
)
def test_passthrough_a_data_name_from_an_earlier_turn_is_plain_serialisation(
    action: str, published: bool
) -> None:
    # "Export the forecast as csv" a turn after the forecast was fetched: the window's
    # group is the data the cue names, so the request serialises it as retrieved.
    chat = Chat()
    chat.user("What is the weather forecast for Paris?")
    chat.tools((action, samples(24)))
    chat.reply("Here is the forecast summary: mild.")
    chat.user("Export the forecast as csv")
    chat.reply("Here is the file.")
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    if published:
        assert isinstance(outcome, phases.ExportPlan) and outcome.row_source == "prior_turn"
        assert len(rows) == 24 and read == [f"artifacts/{CID}/t1/call_1.json"]
    else:  # no group of the window is named by "forecast": a computation, no table
        assert decision_of(outcome) == "derived_output_without_table" and read == []


def test_passthrough_a_data_name_of_a_group_reach_back_would_not_export_is_derived() -> None:
    # "average" is in an earlier lookup's arguments, but reach-back would export the
    # readings: the request asks for an average of them, which no table holds.
    chat = Chat()
    chat.user("which statistics can you compute?")
    chat.tools(("get_stats", [{"stat": "average"}, {"stat": "max"}], {"stat": "average"}))
    chat.reply("Average and max.")
    chat.user("get the voltage readings")
    chat.tools(("list_readings", samples(100)))
    chat.reply("I have 100 readings.")
    chat.user("give me the average voltage as csv")
    chat.reply("The average voltage was 12.05 V.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "derived_output_without_table" and read == []


def test_passthrough_a_carried_request_may_name_the_data_of_the_clarified_turn() -> None:
    chat = Chat()
    chat.user("Export the forecast for Paris as csv")
    chat.tools(("get_forecast", samples(24)))
    chat.reply("Which columns should I include?")
    chat.user("all of them")
    chat.reply("Here it is.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.facts.carried
    assert outcome.row_source == "prior_turn" and len(rows) == 24


def test_passthrough_the_turns_own_groups_name_its_data_before_the_window() -> None:
    # The turn called a tool of its own: only its groups can be the data the cue names.
    chat = Chat()
    chat.user("get the forecast")
    chat.tools(("get_forecast", samples(24)))
    chat.reply("ok")
    chat.user("Export the forecast as csv")
    chat.tools(("list_readings", samples(30)))
    chat.reply("Done.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "derived_output_without_table" and read == []


def test_rows_that_held_only_secrets_are_no_rows() -> None:
    # Cleaned, they had no key left: the CSV held as many blank lines as the record's rows.
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_tokens", [{"access_token": f"t{i}"} for i in range(5)]))
    chat.reply("Done.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_rows"


def test_composed_table_wins_over_action_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(50)))
    chat.reply("```csv\ntimestamp,value,flag\nt0000,12.0,ok\nt0001,12.001,low\n```")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.row_source == "assistant_table"


def test_only_a_table_exports_the_table() -> None:
    chat = Chat()
    chat.user("put this in a spreadsheet")
    chat.reply("| a | b |\n|---|---|\n| 1 | 2 |")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and read == []
    assert outcome.format == "xlsx" and outcome.row_source == "assistant_table"


def test_dominant_group_used_alone_and_lookups_never_read() -> None:
    chat = Chat()
    chat.user("get the history and create a csv")
    chat.tools(("list_instances", [{"id": "sat-07"}]), ("list_parameters", [{"p": "V"}]))
    chat.tools(("history", samples(450)), ("history", samples(900, 450)))
    chat.reply("Done.")
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.actions == ("history",) and len(rows) == 900
    assert all("history" not in p or p in outcome.selection.source_artifacts for p in read)
    assert len(read) == 2


@pytest.mark.parametrize("cut", ["json_string", "rows_key_past_the_twelfth"])
def test_a_citation_whose_rows_compaction_cut_is_no_bound_for_dominance(cut: str) -> None:
    # Without a row_count the estimate comes from the compacted result. A JSON string cut at
    # 400 characters reads as 1 row, and so does a dict whose rows key compaction dropped:
    # 100 history rows then "dominated" 50 sites, and the sites were never read.
    sites = [{"site": f"s{i}", "status": "ok"} for i in range(50)]
    result: Any = json.dumps(sites)
    if cut == "rows_key_past_the_twelfth":
        result = {**{f"meta{i}": i for i in range(12)}, "items": sites}
    chat = Chat()
    chat.user("export everything as csv")
    chat.tools(("history", samples(100)), ("list_sites", result))
    for ref in chat.messages[-1]["results"]:
        if ref["name"] == "list_sites":
            del ref["citation"]["row_count"]
    chat.reply("Here you go.")
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.combined and len(read) == 2 and len(rows) == 150


def test_overstated_citation_makes_the_core_read_the_other_groups() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("lookup", [{"k": i} for i in range(3)]), ("history", samples(40)))
    # The stored citation claims 40 rows but the artifact repeats one page's rows only.
    chat.artifacts["artifacts/conv_t/t1/call_2.json"]["result"] = {"items": samples(4)["items"]}
    chat.reply("Done.")
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.combined and len(read) == 2 and len(rows) == 7
    assert outcome.selection.actions == ("lookup", "history")  # call order, not fetch order


def _instances_then_history(reply: str) -> Chat:
    chat = Chat()
    chat.user("get me the voltage history of sat-07 and create a csv")
    chat.tools(("list_instances", [{"id": "sat-07", "name": "Satellite 7"}, {"id": "sat-08"}]))
    chat.tools(("history", samples(900)))
    chat.reply(reply)
    return chat


@pytest.mark.parametrize("shown", ["sat-07", "[sat-07](https://portal.example/sat-07)"])
def test_a_table_showing_a_lookups_rows_loses_to_the_dominant_group(shown: str) -> None:
    # The model showed the instance it found (linked or not): retrieved rows, not a table
    # it composed, so the 900 samples are exported, not the discovery metadata.
    chat = _instances_then_history(
        f"Found it:\n\n| id | name |\n|---|---|\n| {shown} | Satellite 7 |\n\n900 samples."
    )
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert (outcome.row_source, outcome.why.rule) == ("action_rows", "excerpt_replaced")
    assert outcome.selection.actions == ("history",) and len(rows) == 900
    # The history first; the lookup only once the history did not show the table.
    assert read == [f"artifacts/{CID}/t1/call_2.json", f"artifacts/{CID}/t1/call_1.json"]


@pytest.mark.parametrize(
    ("reply", "read_lookup"),
    [
        # an excerpt of the history: the lookup is never read
        ("| timestamp | value |\n|---|---|\n| t0000 | 12.0 |\n", False),
        # a table the model composed: the lookup is read, and the table still wins
        ("| hour | mean |\n|---|---|\n| 00 | 12.01 |\n", True),
    ],
)
def test_the_lookups_are_read_only_when_the_dominant_group_does_not_show_the_table(
    reply: str, read_lookup: bool
) -> None:
    chat = _instances_then_history(reply)
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert (outcome.row_source == "assistant_table") == read_lookup
    assert (f"artifacts/{CID}/t1/call_1.json" in read) == read_lookup


def test_comparable_groups_are_combined_with_source_action() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("a", [{"x": 1}, {"x": 2}]), ("b", [{"y": 1}, {"y": 2}, {"y": 3}]))
    chat.reply("Done.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.columns == ("x", "y", "Source action")
    assert [r["Source action"] for r in rows] == ["a", "a", "b", "b", "b"]


def test_reach_back_reads_only_the_winning_group_of_an_earlier_turn() -> None:
    chat = history_then_a_csv_two_turns_later()
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert outcome.row_source == "prior_turn" and len(rows) == 900
    assert read == [f"artifacts/{CID}/t1/call_1.json", f"artifacts/{CID}/t1/call_2.json"]


def test_reach_back_to_an_artifact_outside_the_conversation_is_not_authorized() -> None:
    # An earlier turn's paths were judged when its own event came, which may have ended
    # not_authorized and left the message in the history: reach-back judges them again.
    chat = history_then_a_csv_two_turns_later()
    tool = next(m for m in chat.messages if m["role"] == "tool")
    tool["results"][1]["artifact"] = "artifacts/other_conv/t1/call_2.json"
    with pytest.raises(PermanentError) as caught:
        drive(chat.messages, chat.artifacts, chat.event())
    assert caught.value.reason == "not_authorized"


def test_the_file_is_named_after_its_one_group_else_export() -> None:
    history = history_then_a_csv_two_turns_later()
    outcome, _, _ = drive(history.messages, history.artifacts, history.event())
    assert isinstance(outcome, phases.ExportPlan)
    assert outcome.file_name == "history_20261120_090139.csv"  # the event's time, not NOW
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("a", [{"x": 1}, {"x": 2}]), ("b", [{"x": 3}, {"x": 4}, {"x": 5}]))
    chat.reply("Done.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.actions == ("a", "b")
    assert outcome.file_name.startswith("export_")


def test_an_event_time_that_does_not_parse_stamps_the_file_with_the_replys_time() -> None:
    # A redelivery or a replay of the event then names the file alike: the clock would not.
    chat = history_then_a_csv_two_turns_later()
    event = chat.event().model_copy(update={"occurred_at": "last tuesday"})
    reply = next(m for m in chat.messages if m["id"] == event.reply_message_id)
    reply["created_at"] = "2026-11-20T10:15:30.25+01:00"  # in its own offset, as the event's
    outcome, _, _ = drive(chat.messages, chat.artifacts, event)
    assert isinstance(outcome, phases.ExportPlan)
    assert outcome.file_name == "history_20261120_101530.csv"
    reply["created_at"] = "yesterday"  # neither parses: the clock stamps it
    outcome, _, _ = drive(chat.messages, chat.artifacts, event)
    assert isinstance(outcome, phases.ExportPlan)
    assert outcome.file_name == f"history_{NOW:%Y%m%d_%H%M%S}.csv"


def test_a_result_names_its_action_else_its_call_does() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_devices", [{"x": 1}, {"x": 2}]))
    tool = chat.messages[-1]
    tool["results"][0]["name"] = "list_parameter_history"  # the result's own name wins
    chat.reply("Done.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.actions == ("list_parameter_history",)
    tool["results"][0]["name"] = ""  # a result with an empty one takes its call's
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.actions == ("list_devices",)


def test_reach_back_skipped_when_the_turn_has_its_own_rows() -> None:
    chat = Chat()
    chat.user("get the history")
    chat.tools(("history", samples(900)))
    chat.reply("ok")
    chat.user("now the sites, create a csv")
    chat.tools(("sites", [{"s": 1}, {"s": 2}]))
    chat.reply("Done.")
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.row_source == "action_rows"
    assert len(rows) == 2 and all("/t2/" in p for p in read)


@pytest.mark.parametrize(
    "request_text", ["export that as csv", "export the thermal history as csv"]
)
def test_reach_back_to_a_group_that_stored_no_artifact_is_no_rows_never_another_dataset(
    request_text: str,
) -> None:
    # Phase 1 picks among the window's successful results; the winner's rows cannot be
    # read, and neither its citation nor an older group stands in for them.
    chat = Chat()
    chat.user("get the battery history")
    chat.tools(("get_battery", samples(20)))
    chat.reply("ok")
    chat.user("and the thermal history")
    chat.tools(("get_thermal", samples(50)), artifact=False)
    chat.reply("ok")
    chat.user(request_text)
    chat.reply("Here.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_rows" and read == []


def test_reach_back_to_a_group_whose_artifact_holds_no_rows_is_no_rows() -> None:
    # The citation promised 20 rows; the artifact read holds none: nothing to export.
    chat = Chat()
    chat.user("get the history")
    chat.tools(("history", samples(20)))
    chat.reply("ok")
    chat.user("create a csv")
    chat.reply("Here.")
    for artifact in chat.artifacts.values():
        artifact["result"] = []
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_rows" and read == [f"artifacts/{CID}/t1/call_1.json"]


def test_reach_back_sees_only_the_history_window() -> None:
    chat = Chat()
    chat.user("get the history")
    chat.tools(("history", samples(900)))
    chat.reply("ok")
    for _ in range(3):
        chat.user("tell me a joke")
        chat.reply("ha")
    chat.user("create a csv")
    chat.reply("Here.")
    outcome, read, _ = drive(chat.messages, chat.artifacts, chat.event(history_limit=6))
    assert decision_of(outcome) == "no_rows" and read == []
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event(history_limit=10))
    assert decision_of(outcome) == "published" and len(rows) == 900


def test_artifact_outside_the_conversation_is_not_authorized_and_not_read() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(20)))
    chat.reply("Done.")
    chat.messages[2]["results"][0]["artifact"] = "artifacts/other_conv/t1/call_1.json"
    with pytest.raises(PermanentError) as caught:
        drive(chat.messages, chat.artifacts, chat.event())
    assert caught.value.reason == "not_authorized"


@pytest.mark.parametrize("unread", ["derived_from_the_reply_table", "lookup_left_by_dominance"])
def test_artifact_outside_the_conversation_ends_the_turn_even_where_it_would_not_be_read(
    unread: str,
) -> None:
    # The same turn ended not_authorized on one branch and published on another.
    chat = Chat()
    if unread == "derived_from_the_reply_table":
        chat.user("summarize per hour and export as csv")
        chat.tools(("list_x", samples(60)))
        chat.reply("| hour | avg |\n|---|---|\n| 00 | 12.01 |\n| 01 | 12.02 |")
        foreign = 0
    else:
        chat.user("create a csv of the readings")
        chat.tools(("list_sites", samples(2)), ("list_readings", samples(900)))
        chat.reply("Done.")
        foreign = 0  # the 2-row lookup: dominance defers it, and it is never read
    results = chat.messages[-2]["results"]
    results[foreign]["artifact"] = "artifacts/other_conv/t1/call_1.json"
    with pytest.raises(PermanentError) as caught:
        drive(chat.messages, chat.artifacts, chat.event())
    assert caught.value.reason == "not_authorized"


@pytest.mark.parametrize(
    ("user_text", "reply", "result"),
    [
        ("create a csv of the readings", "Done.", "failed"),
        ("create a csv of the readings", "Done.", "unpaired"),
        ("hello there", "Hi!", "read"),
        ("make a pdf", "Done.", "read"),
        ("create a csv", "Which columns should be included?", "read"),
    ],
)
def test_artifact_outside_the_conversation_ends_any_turn_whatever_its_result_says(
    user_text: str, reply: str, result: str
) -> None:
    # SPEC 3 sets no condition: a turn that asks for nothing, a failed result, a result
    # whose call is not in the turn all name a path that is never read.
    chat = Chat()
    chat.user(user_text)
    chat.tools(("list_readings", samples(20)))
    if result == "failed":
        chat.tools(("lookup", samples(1)), success=False)
    chat.reply(reply)
    results = chat.messages[-2]["results"]
    results[-1]["artifact"] = "artifacts/other_conv/t1/call_9.json"
    if result == "unpaired":
        results[-1]["call_id"] = "call_without_a_call"
    with pytest.raises(PermanentError) as caught:
        drive(chat.messages, chat.artifacts, chat.event())
    assert caught.value.reason == "not_authorized"


def test_nothing_anywhere_is_no_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.reply("There is no data yet.")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert decision_of(outcome) == "no_rows"


# --------------------------------------------------------------------------------------
# Step 8: clean the rows
# --------------------------------------------------------------------------------------
def test_secret_keys_are_dropped_from_exported_rows() -> None:
    chat = Chat()
    chat.user("create a csv")
    rows_in = [{"id": i, "api_key": "k", "nested": {"password": "p", "ok": 1}} for i in range(12)]
    chat.tools(("list_x", rows_in))
    chat.reply("Done.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.selection is not None
    assert outcome.selection.columns == ("id", "nested")
    assert rows[0] == {"id": 0, "nested": {"ok": 1}}


def test_the_same_input_gives_the_same_decision_in_any_processing_order() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("list_x", samples(30)))
    chat.reply("Which columns do you want?")
    chat.user("all")
    chat.reply("Here.")
    second = chat.event()
    first = TurnCompleted.model_validate(
        {**second.model_dump(), "turn_id": "t1", "user_message_id": "m1", "reply_message_id": "m4"}
    )
    a = drive(chat.messages, chat.artifacts, second)
    drive(chat.messages, chat.artifacts, first)
    b = drive(chat.messages, chat.artifacts, second)
    assert a[0] == b[0] and a[2] == b[2]


def test_history_read_stops_after_the_look_back_before_the_user_message() -> None:
    chat = Chat()
    for n in range(60):
        chat.user(f"question {n}")
        chat.reply("answer")
    chat.user("create a csv")
    chat.reply("done")
    newest_first = [parse_message(m) for m in reversed(chat.messages)]
    newest_first[5] = newest_first[5].model_copy(update={"deleted": True})
    read = story.HistoryRead(chat.messages[-2]["id"])
    taken = 0
    for message in newest_first:
        taken += 1
        if read.add(message):
            break
    # 2 of the turn + 40 counted before it + 1 deleted that does not count.
    assert taken == 2 + story.STATE_LOOKBACK_MESSAGES + 1


def test_secret_columns_are_dropped_from_an_exported_table() -> None:
    chat = Chat()
    chat.user("put it in a csv")
    chat.reply("| host | password | port |\n|---|---|---|\n| db1 | hunter2 | 5432 |")
    outcome, _, _ = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, phases.ExportPlan) and outcome.table is not None
    assert outcome.table.columns == ("host", "port")
    assert outcome.table.rows == (("db1", "5432"),)


# --------------------------------------------------------------------------------------
# The phases: each fetch round is named, collectors are shared as documented, and a move
# the rules never make raises
# --------------------------------------------------------------------------------------
def rounds(
    messages: list[dict[str, Any]], artifacts: dict[str, Any], event: TurnCompleted
) -> list[tuple[str, int, int]]:
    """(phase name, artifacts fetched, collector id) for each fetch round, in order."""
    inp = turn_input(messages, event)
    phase = story.start(inp)
    seen: list[tuple[str, int, int]] = []
    collector = None
    while isinstance(phase, FETCH_PHASES):
        collector = story.collector_for(phase, collector)
        seen.append((type(phase).__name__, len(phase.fetch), id(collector)))
        for ref in phase.fetch:
            assert ref.artifact is not None
            list(collector.feed(ref, artifacts[ref.artifact]["result"]))
        phase = story.after_fetch(inp, phase, collector)
    return seen


def test_a_dominant_group_is_one_round_and_its_lookups_wait_in_deferred() -> None:
    chat = Chat()
    chat.user("get the history and create a csv")
    chat.tools(("list_instances", [{"id": "sat-07"}]), ("history", samples(450)))
    chat.reply("Done.")
    first = story.start(turn_input(chat.messages, chat.event()))
    assert isinstance(first, phases.FetchCurrentTurn) and first.deferred is not None
    assert [r.action for r in first.fetch] == ["history"]
    assert [r.action for r in first.deferred.refs] == ["list_instances"]
    assert first.deferred.estimate == 1
    assert [name for name, _, _ in rounds(chat.messages, chat.artifacts, chat.event())] == [
        "FetchCurrentTurn"
    ]


def test_deferred_groups_are_a_second_round_that_shares_the_collector() -> None:
    chat = Chat()
    chat.user("create a csv")
    chat.tools(("lookup", [{"k": i} for i in range(3)]), ("history", samples(40)))
    chat.artifacts["artifacts/conv_t/t1/call_2.json"]["result"] = {"items": samples(4)["items"]}
    chat.reply("Done.")
    seen = rounds(chat.messages, chat.artifacts, chat.event())
    assert [(name, fetched) for name, fetched, _ in seen] == [
        ("FetchCurrentTurn", 1),
        ("FetchDeferredGroups", 1),
    ]
    assert seen[0][2] == seen[1][2]


def test_reach_back_phase_two_carries_phase_ones_scan_and_a_fresh_collector() -> None:
    chat = Chat()
    chat.user("get the history")
    chat.tools(("history", samples(450)), ("history", samples(900, 450)))
    chat.reply("I have 900 samples.")
    chat.user("create a csv")
    chat.reply("Here is the file.")
    inp = turn_input(chat.messages, chat.event())
    first = story.start(inp)
    assert isinstance(first, phases.FetchCurrentTurn) and first.fetch == ()
    collector = story.collector_for(first, None)
    second = story.after_fetch(inp, first, collector)
    assert isinstance(second, phases.FetchReachBack)
    assert second.request.table is None
    assert [r.artifact for r in second.scan.chosen] == [
        f"artifacts/{CID}/t1/call_1.json",
        f"artifacts/{CID}/t1/call_2.json",
    ]
    assert second.fetch == second.scan.chosen
    assert story.collector_for(second, collector) is not collector


def test_an_ended_turn_cannot_move_and_deferred_groups_need_the_running_collector() -> None:
    chat = Chat()
    chat.user("summarize per hour and export as csv")
    chat.reply("| hour | avg |\n|---|---|\n| 00 | 12.01 |")
    inp = turn_input(chat.messages, chat.event())
    plan = story.start(inp)
    assert isinstance(plan, phases.ExportPlan)
    with pytest.raises(phases.IllegalTransition):
        story.after_fetch(inp, plan, RowCollector(None))
    with pytest.raises(phases.IllegalTransition):
        story.after_fetch(inp, story.conversation_deleted(), RowCollector(None))
    deferred = phases.FetchDeferredGroups(
        phases.ExportRequest(plan.facts, "csv", None, Considered()), fetch=(), window=()
    )
    with pytest.raises(phases.IllegalTransition):
        story.collector_for(deferred, None)


def test_phases_are_frozen_values() -> None:
    finished = story.conversation_deleted()
    with pytest.raises(AttributeError):
        finished.decision = "no_rows"  # type: ignore[misc]
