"""Eval scenarios of requests carried after one clarification (docs/contract/decision.md step 4)."""

from __future__ import annotations

import random
from collections.abc import Callable

from .builders import Case
from .talk import PHRASES, Made, history, turn_with

# --- carried requests after a clarification (docs/contract/decision.md step 4) --------------------
CLARIFY = [
    ("Should each row be one sample, and which columns do you want?", None),
    ("Which columns should the file hold?", None),
    ("Before I build it: one row per sample, or one row per minute?", True),
]


def clarified(case: Case, rng: random.Random, made: Made, text: str, fmt: str, fetch: bool) -> None:
    """A request whose reply asks one clarification: label it and leave the state awaiting."""
    case.user(text)
    if fetch:
        history(case, made, "BatteryVoltage1", 900)
    question, flag = rng.choice(CLARIFY)
    case.reply(question, clarification=flag)
    case.event(40)
    case.expect("clarification", fmt)


def carried_cases() -> list[tuple[str, str, Callable[[Case, random.Random], None]]]:
    def fixture_like(case: Case, rng: random.Random) -> None:
        made: Made = {}
        fmt = rng.choice(["csv", "json", "xml"])
        clarified(
            case,
            rng,
            made,
            f"create {rng.choice(PHRASES[fmt])} of the BatteryVoltage1 history",
            fmt,
            True,
        )
        t1 = case.turn_id
        case.user(rng.choice(["yes, one row per sample", "one row per sample, all columns", "yes"]))
        case.reply("Here is the file.", clarification=False)
        case.event(40)
        group = made[(t1, "list_parameter_history")]
        case.expect(
            "published",
            fmt,
            carried=True,
            source="prior_turn",
            rule="reach_back_named",
            rows=group.rows,
            groups=[group],
        )

    def original_text_names(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "get the Temperature1 history",
            "ok",
            lambda: history(case, made, "Temperature1", 300),
        )
        t1 = case.turn_id
        turn_with(
            case, "and BatteryVoltage1", "ok", lambda: history(case, made, "BatteryVoltage1", 200)
        )
        clarified(case, rng, made, "export the Temperature1 samples as json", "json", False)
        case.user(rng.choice(["all columns please", "yes, one per sample", "just do it"]))
        case.reply("Done.", clarification=False)
        case.event(40)
        group = made[(t1, "list_parameter_history")]
        case.expect(
            "published",
            "json",
            carried=True,
            source="prior_turn",
            rule="reach_back_named",
            rows=group.rows,
            groups=[group],
        )

    def answer_names_another_dataset(case: Case, rng: random.Random) -> None:
        made: Made = {}
        turn_with(
            case,
            "get the Temperature1 history",
            "ok",
            lambda: history(case, made, "Temperature1", 300),
        )
        clarified(case, rng, made, "export the BatteryVoltage1 history to xml", "xml", True)
        t2 = case.turn_id
        case.user("yes, and one row per Temperature1 sample too")
        case.reply("Done.", clarification=False)
        case.event(40)
        group = made[(t2, "list_parameter_history")]
        case.expect(
            "published",
            "xml",
            carried=True,
            source="prior_turn",
            rule="reach_back_named",
            rows=group.rows,
            groups=[group],
        )

    def other_format_is_fresh(case: Case, rng: random.Random) -> None:
        made: Made = {}
        clarified(case, rng, made, "create a csv of the BatteryVoltage1 history", "csv", True)
        t1 = case.turn_id
        case.user("actually, make it json")
        case.reply("Done.", clarification=False)
        case.event(40)
        group = made[(t1, "list_parameter_history")]
        case.expect(
            "published",
            "json",
            source="prior_turn",
            rule="reach_back_newest",
            rows=group.rows,
            groups=[group],
        )

    def unsupported_answer(case: Case, rng: random.Random) -> None:
        made: Made = {}
        clarified(case, rng, made, "create a csv of the BatteryVoltage1 history", "csv", True)
        case.user(rng.choice(["actually make it a pdf", "a word document instead"]))
        case.reply("I can't produce that here.", clarification=False)
        case.event(40)
        fmt = "pdf" if "pdf" in case.messages[-2]["content"] else "docx"
        case.expect("unsupported_format", fmt)

    def second_clarification(case: Case, rng: random.Random) -> None:
        made: Made = {}
        clarified(case, rng, made, "create a csv", "csv", True)
        case.user("the usual ones")
        case.reply("Which columns exactly do you mean?")
        case.event(40)
        case.expect("clarification_limit", "csv", carried=True)

    def empty_answer(case: Case, rng: random.Random) -> None:
        made: Made = {}
        clarified(case, rng, made, "export the BatteryVoltage1 history as xml", "xml", True)
        case.user("")
        case.reply("Did you want the file?", clarification=False)
        case.event(40)
        case.expect("no_request", None)

    def same_format_again(case: Case, rng: random.Random) -> None:
        made: Made = {}
        clarified(
            case, rng, made, "I need the BatteryVoltage1 history as a spreadsheet", "xlsx", True
        )
        t1 = case.turn_id
        case.user("yes, the spreadsheet with one row per sample")
        case.reply("Done.", clarification=False)
        case.event(40)
        group = made[(t1, "list_parameter_history")]
        case.expect(
            "published",
            "xlsx",
            carried=True,
            source="prior_turn",
            rule="reach_back_named",
            rows=group.rows,
            groups=[group],
        )

    return [
        ("fixture_like", "the clarified turn's rows carried to the answer", fixture_like),
        ("original_text", "the original text names the dataset, not recency", original_text_names),
        (
            "answer_names_other",
            "the answer's words do not stand for the request",
            answer_names_another_dataset,
        ),
        ("other_format", "another format drops the pending request", other_format_is_fresh),
        ("unsupported", "an unsupported format drops the pending request", unsupported_answer),
        ("second_clarification", "one clarification per request", second_clarification),
        ("empty_answer", "empty text is no request", empty_answer),
        ("same_format", "the same format named again still carries", same_format_again),
    ]
