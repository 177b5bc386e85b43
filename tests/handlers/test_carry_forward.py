"""docs/contract/decision.md step 4: clarification detection and the carry-forward state machine."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from handlers.carry_forward import (
    Awaiting,
    Idle,
    State,
    Step,
    TurnText,
    is_clarification,
    state_after_record,
    state_before,
    step,
)
from schemas.documents import AssistantMessage
from schemas.records import StateAfter
from schemas.vocabulary import RequestFormat

SEED_CLARIFICATION = "Should each row be one sample, and which columns do you want?"
ANSWER = "Here is the CSV with one row per sample for all 900 samples."


def reply(content: str | None, clarification: bool | None = None) -> AssistantMessage:
    return AssistantMessage(
        id="msg_reply",
        conversation_id="conv",
        turn_id="turn",
        seq=2,
        created_at="2026-11-19T00:00:00Z",
        role="assistant",
        content=content,
        clarification=clarification,
    )


# --- is_clarification ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        SEED_CLARIFICATION,
        "Which columns should I include?",
        "What fields do you need in the file?",
        "Sure. Should each row be one sample or one minute?",
        "Do you want one row per sample or one row per parameter?",
        "How should the rows be laid out?",
        "I have 900 samples. Which format for the rows do you prefer, wide or long?",
        "Before I export: which of the columns do you want, and should the timestamp be first?",
        "Do you want all the columns or just the voltage?",
        "Should I include the timestamp column?",
        "Would you like me to include the unit column?",
        "Which parameters should I export?",
        "Do you want the unit column included?",
        "Would you like me to include the timestamp and value columns only?",
        "Should the CSV have one line per reading?",
        "Before I export: do you want the raw samples or hourly averages?",
        "Daily averages or all samples?",
        # A "." that ends no sentence: an abbreviation, a decimal.
        "Which columns do you need, e.g. timestamp and value?",
        "Should each row be one sample at 0.5 s resolution?",
        "Raw samples vs. hourly averages?",
        # Column and row questions put other ways (an outside audit's list).
        "What should the columns be?",
        "Do you want the timestamp column?",
        "Do you need the unit column too?",
        "Any particular columns you want?",
        "Would you like the columns timestamp and value only, or also the unit?",
        "Should rows be one per sample?",
        "Should I put each sample on its own row?",
        "Should each line be one sample?",
        "How should I lay out the rows?",
        "Quick question: columns?",
        "Should I export rows per sensor or per reading?",
        "What format for the rows?",
        # The grain with a pause before its "or"; how fields become columns.
        "Do you want the raw samples, or hourly averages?",
        "Hourly averages, or the raw samples?",
        "Should I flatten the nested fields into separate columns?",
        "Should nested objects be flattened (e.g. location.lat, location.lon)?",
        "Should each sensor get its own column?",
        "Should the header row use the original field names?",
    ],
)
def test_short_question_about_rows_or_columns_is_a_clarification(content: str) -> None:
    assert is_clarification(reply(content))


@pytest.mark.parametrize(
    "content",
    [
        ANSWER,
        f"{ANSWER} Anything else?",
        "Here is the CSV with one row per sample. Would you like a chart too?",
        "Do you want it as a csv or as json?",
        "Here is the CSV with every column. Shall I also plot the voltage?",
        # Said after the file was delivered, a question about columns offers more.
        "Here's the CSV with the columns you asked for, anything else?",
        "Done! The file has 120 rows and 4 columns. Want me to add a temperature column?",
        "Your export is ready (timestamp, value). Any questions about these fields?",
        "I've created the JSON. Let me know if any of the fields look wrong?",
        "Done, exported as csv. Is the timestamp column in the timezone you expected?",
        "Exported 96 samples as XML. Should I also create a JSON version with the same fields?",
        # Columns and fields named, but not asked about.
        "480 readings from the north field. Should I include readings from the east field?",
        "Did you know the status field is deprecated?",
        "Which metrics would you like me to chart next?",
        "Did you know the timestamp column is in UTC?",
        "Did you know the field names changed?",
        "Here is the CSV. Should I flatten the nested fields too?",
        "Do you want a chart of the voltage?",
        "Any particular reason you need this?",
        # Questions about which data, not about the rows' shape or columns.
        "What time range should the CSV cover?",
        "Which instances should I include?",
        "Should I export all 900 samples or only the last 100?",
        "I retrieved the data.",
        "",
        None,
    ],
)
def test_reply_not_asking_about_row_shape_is_not_a_clarification(content: str | None) -> None:
    assert not is_clarification(reply(content))


def test_long_question_text_is_not_a_clarification() -> None:
    long = "I retrieved 900 samples. " * 20 + SEED_CLARIFICATION
    assert len(long) > 500
    assert not is_clarification(reply(long))


def test_question_of_exactly_500_chars_may_be_a_clarification() -> None:
    padded = SEED_CLARIFICATION.rjust(500)
    assert len(padded) == 500
    assert is_clarification(reply(padded))


def test_question_of_501_chars_is_not_a_clarification() -> None:
    padded = SEED_CLARIFICATION.rjust(501)
    assert len(padded) == 501
    assert not is_clarification(reply(padded))


@pytest.mark.parametrize(
    "content",
    [
        "Which columns do you want.",
        "Should each row be one sample",
        "I will keep all the columns. One row per sample!",
    ],
)
def test_row_shape_words_without_a_question_mark_are_not_a_clarification(content: str) -> None:
    assert not is_clarification(reply(content))


def test_reply_holding_a_table_is_not_a_clarification() -> None:
    content = "timestamp,value\n00:00,12.45\n00:01,12.43\n\nWhich columns do you want?"
    assert not is_clarification(reply(content))


def test_explicit_flag_beats_the_heuristic() -> None:
    assert is_clarification(reply(ANSWER, clarification=True))
    assert not is_clarification(reply(SEED_CLARIFICATION, clarification=False))


def test_missing_reply_is_not_a_clarification() -> None:
    assert not is_clarification(None)


# --- step: the seed's table -------------------------------------------------------------------


def _after_seed_clarification() -> State:
    first = step(Idle(), "create a csv", is_clarification(reply(SEED_CLARIFICATION)))
    assert first == Step(
        "clarification", "csv", False, "create a csv", Awaiting("csv", "create a csv")
    )
    return first.state_after


def test_answer_after_clarification_carries_the_pending_format() -> None:
    carried = step(_after_seed_clarification(), "yes, one row per sample", False)
    assert carried == Step("request", "csv", True, "create a csv", Idle())


def test_other_unsupported_format_after_clarification_drops_the_request() -> None:
    dropped = step(_after_seed_clarification(), "actually make it a pdf", False)
    assert dropped == Step("unsupported_format", "pdf", False, "actually make it a pdf", Idle())


def test_reply_with_no_prior_clarification_carries_nothing() -> None:
    assert step(Idle(), "yes, one row per sample", False) == Step(
        "no_request", None, False, "yes, one row per sample", Idle()
    )


@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_empty_user_text_drops_the_pending_request(empty: str) -> None:
    assert step(_after_seed_clarification(), empty, False) == Step(
        "no_request", None, False, empty, Idle()
    )
    assert step(Idle(), empty, True).outcome == "no_request"


@pytest.mark.parametrize(("text", "fmt"), [("export it as json", "json"), ("xml please", "xml")])
def test_json_and_xml_requests_carry_too(text: str, fmt: RequestFormat) -> None:
    first = step(Idle(), text, True)
    assert first.state_after == Awaiting(fmt, text)
    carried = step(first.state_after, "all of them", False)
    assert (carried.outcome, carried.format, carried.carried) == ("request", fmt, True)
    assert carried.request_text == text


def test_carried_request_answered_with_a_clarification_lapses() -> None:
    lapsed = step(_after_seed_clarification(), "one row per sample", True)
    assert lapsed == Step("clarification_limit", "csv", True, "create a csv", Idle())


def test_awaiting_lasts_exactly_one_user_turn() -> None:
    carried = step(_after_seed_clarification(), "whatever you think", False)
    assert carried.state_after == Idle()
    assert step(carried.state_after, "yes, one row per sample", False).outcome == "no_request"


def test_different_supported_format_drops_the_pending_one_and_is_fresh() -> None:
    fresh = step(_after_seed_clarification(), "make it json instead", False)
    assert fresh == Step("request", "json", False, "make it json instead", Idle())
    asks_again = step(_after_seed_clarification(), "make it json instead", True)
    assert asks_again.outcome == "clarification"
    assert asks_again.state_after == Awaiting("json", "make it json instead")


@pytest.mark.parametrize(
    "answer",
    ["never mind", "Nevermind.", "no thanks", "No, thank you.", "cancel that",
     "actually, don't bother", "Don\u2019t bother", "forget it", "skip it",
     "ok never mind then", "nah, forget it, thanks!", "never mind, I'll do it myself"],
)  # fmt: skip
def test_an_answer_that_calls_the_request_off_drops_it(answer: str) -> None:
    assert step(_after_seed_clarification(), answer, False) == Step(
        "no_request", None, False, answer, Idle()
    )


@pytest.mark.parametrize(
    "answer", ["forget the csv", "don't make a csv, just tell me the average", "no csv needed"]
)
def test_an_answer_that_refuses_the_pending_format_by_name_drops_it(answer: str) -> None:
    assert step(_after_seed_clarification(), answer, False) == Step(
        "no_request", None, False, answer, Idle()
    )


@pytest.mark.parametrize(
    "answer",
    ["no", "no, one row per minute", "never mind the columns", "never mind the json",
     "the csv should have one row per sample"],
)  # fmt: skip
def test_an_answer_about_the_shape_or_another_format_still_carries(answer: str) -> None:
    carried = step(_after_seed_clarification(), answer, False)
    assert carried == Step("request", "csv", True, "create a csv", Idle())


def test_same_format_named_again_is_carried() -> None:
    again = step(_after_seed_clarification(), "a csv, one row per sample", False)
    assert again == Step("request", "csv", True, "create a csv", Idle())


def test_request_answered_without_clarification_is_a_request() -> None:
    assert step(Idle(), "create a csv", False) == Step(
        "request", "csv", False, "create a csv", Idle()
    )


def test_unsupported_format_from_idle_is_unsupported_even_with_a_clarification() -> None:
    assert step(Idle(), "a word document please", True) == Step(
        "unsupported_format", "docx", False, "a word document please", Idle()
    )


# --- state_before and the record --------------------------------------------------------------


def test_state_before_nothing_is_idle() -> None:
    assert state_before([]) == Idle()


def test_state_before_after_the_seed_clarification_is_awaiting() -> None:
    earlier = [TurnText("create a csv", reply(SEED_CLARIFICATION))]
    assert state_before(earlier) == Awaiting("csv", "create a csv")


def test_state_before_after_an_answered_turn_is_idle() -> None:
    earlier = [
        TurnText("create a csv", reply(SEED_CLARIFICATION)),
        TurnText("yes, one row per sample", reply(ANSWER)),
    ]
    assert state_before(earlier) == Idle()


def test_state_before_over_a_chain_of_clarifications_matches_stepping() -> None:
    clar = reply(SEED_CLARIFICATION)
    chain = [
        TurnText("hello", clar),
        TurnText("create a csv", clar),
        TurnText("one row per sample", clar),
        TurnText("export json", clar),
    ]
    # hello: idle; csv: awaiting; answer: lapses (idle); json: awaiting json
    assert [state_before(chain[:n]) for n in range(len(chain) + 1)] == [
        Idle(),
        Idle(),
        Awaiting("csv", "create a csv"),
        Idle(),
        Awaiting("json", "export json"),
    ]


def test_state_before_ignores_turns_before_the_newest_answered_turn() -> None:
    clar = reply(SEED_CLARIFICATION)
    tail = [TurnText("ok", reply(ANSWER)), TurnText("export json", clar)]
    assert state_before([TurnText("create a csv", clar), *tail]) == state_before(tail)
    assert state_before(tail) == Awaiting("json", "export json")


def test_state_after_record_names_the_state_and_format() -> None:
    assert state_after_record(Idle()) == StateAfter(state="idle", format=None)
    assert state_after_record(Awaiting("xml", "x")) == StateAfter(state="awaiting", format="xml")


# --- property: the fold is stepping turn by turn ---------------------------------------------

_USER_TEXTS = [
    "",
    "create a csv",
    "export it as json",
    "xml please",
    "put it in a spreadsheet",
    "actually make it a pdf",
    "yes, one row per sample",
    "what is XML?",
    "don't create a csv",
    "thanks",
]
_REPLIES = [
    None,
    reply(SEED_CLARIFICATION),
    reply(SEED_CLARIFICATION, clarification=False),
    reply(ANSWER),
    reply(ANSWER, clarification=True),
    reply(""),
]
_turns = st.lists(
    st.builds(TurnText, st.sampled_from(_USER_TEXTS), st.sampled_from(_REPLIES)), max_size=12
)


def _stepped(turns: Sequence[TurnText]) -> list[State]:
    states: list[State] = [Idle()]
    for turn in turns:
        states.append(step(states[-1], turn.user_text, is_clarification(turn.reply)).state_after)
    return states


@given(_turns)
def test_state_before_every_prefix_equals_stepping_turn_by_turn(turns: list[TurnText]) -> None:
    assert [state_before(turns[:n]) for n in range(len(turns) + 1)] == _stepped(turns)


@given(_turns, _turns)
def test_state_before_depends_only_on_turns_after_the_newest_answered_turn(
    older: list[TurnText], newer: list[TurnText]
) -> None:
    answered = TurnText("create a csv", reply(ANSWER))
    assert state_before([*older, answered, *newer]) == state_before(newer)
