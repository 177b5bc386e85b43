"""Eval scenarios about the user's and the model's text: format intent
(docs/contract/decision.md step 4) and the tables a reply holds (step 6). Every label is
written from the contract."""

from __future__ import annotations

import random
from collections.abc import Callable

from .builders import Case, csv_lines, pipe_table, telemetry, tsv_lines
from .talk import DONE, ask

# --- format intent (docs/contract/decision.md step 4) ---------------------------------------------
INTENTS: list[tuple[str, str | None]] = [
    ("Convert JSON to XML", "xml"),
    ("convert the json to xml please", "xml"),
    ("Turn this PDF into XML.", "xml"),
    ("the json as csv", "csv"),
    ("Could you give me the JSON as a CSV?", "csv"),
    ("Analyze this spreadsheet.", None),
    ("validate this JSON object", None),
    ("Please check the uploaded spreadsheet for gaps", None),
    ("Summarize the trends in my xlsx", None),
    ("what is XML?", None),
    ("don't create a csv", None),
    ("xml or json?", None),
    ("export to excel", "xlsx"),
    ("a csv I can open in excel", "csv"),
    ("Export it as JSON, not XML", "json"),
    ("make it a pdf", "pdf"),
    ("put it in a word document", "docx"),
]


# Phrasings a user plausibly writes that the first rules missed: a negation reaching past
# the format it refused, the user's own file, verbs of asking and looking.
MORE_INTENTS: list[tuple[str, str | None]] = [
    ("instead of json give me xml", "xml"),
    ("I don't want json I want xml", "xml"),
    ("forget the csv, give me json", "json"),
    ("I have a csv, make json from it", "json"),
    ("the data is in json, convert it to csv", "csv"),
    ("Attached is a spreadsheet, fix the formulas", None),
    ("can you show me the csv?", "csv"),
    ("could I see it as json?", "json"),
    ("can you see the csv?", None),
    ("Can you make a device list csv?", "csv"),
    ("ok do it in csv", "csv"),
]


def format_intent(case: Case, rng: random.Random, text: str, fmt: str | None) -> None:
    rows = telemetry("BusVoltage", rng.randint(20, 60), seed=case.number)
    case.user(text)
    [group] = case.tools(("list_parameter_history", {"parameter": "BusVoltage"}, rows))
    case.reply(rng.choice(DONE))
    case.event()
    if fmt is None:
        case.expect("no_request", None)
    elif fmt in ("pdf", "docx", "md"):
        case.expect("unsupported_format", fmt)
    else:
        case.expect(
            "published",
            fmt,
            source="action_rows",
            rule="single_group",
            rows=len(rows),
            groups=[group],
        )


# --- table parsing (docs/contract/decision.md step 6) ---------------------------------------------
SITE_ROWS = [
    ["Kiruna", "SE", "12"],
    ["Svalbard", "NO", "31"],
    ["Troll", "AQ", "4"],
    ["Inuvik", "CA", "6"],
    ["Hartebeesthoek", "ZA", "5"],
]


def only_table(case: Case, rng: random.Random, reply: str, rows: int, fmt: str) -> None:
    case.user(ask(rng, fmt))
    case.reply(reply)
    case.event()
    case.expect("published", fmt, source="assistant_table", rule="assistant_table", rows=rows)


def table_cases() -> list[tuple[str, str, Callable[[Case, random.Random], None]]]:
    header = ["site", "country", "antennas"]

    def text_csv_fence(case: Case, rng: random.Random) -> None:
        label = rng.choice(["text/csv", "Text/CSV", "TEXT/CSV"])
        body = csv_lines(header, SITE_ROWS[:4])
        only_table(case, rng, f"The sites:\n\n```{label}\n{body}\n```", 4, "csv")

    def quoted_paragraphs(case: Case, rng: random.Random) -> None:
        rows = [
            ["Kiruna", "First pass at dawn.\n\nSecond pass, after the handover, was clean."],
            ["Svalbard", "Nominal"],
            ["Troll", "Antenna 2 offline.\n\nTicket raised, see notes."],
        ]
        only_table(case, rng, "Pass notes:\n\n" + csv_lines(["site", "note"], rows), 3, "json")

    def source_lines(case: Case, rng: random.Random) -> None:
        source = rng.choice(  # as many fields as the block: only the rule keeps them out
            ["Source: list_sites, page 1, call 2", "Citation: list_sites, call 2, page 1"]
        )
        reply = "Here are the sites, as requested:\n" + csv_lines(header, SITE_ROWS) + f"\n{source}"
        only_table(case, rng, reply, 5, "xml")

    def unterminated_fence_is_text(case: Case, rng: random.Random) -> None:
        rows = telemetry("BatteryVoltage1", 40, seed=case.number)
        case.user(ask(rng, "csv"))
        case.tools(("list_parameter_history", {"parameter": "BatteryVoltage1"}, rows))
        composed = pipe_table(
            ["Hour", "Mean (V)"], [["00:00", "12.81"], ["01:00", "12.79"], ["02:00", "12.84"]]
        )
        excerpt = csv_lines(["timestamp", "value"], [[rows[0]["timestamp"], str(rows[0]["value"])]])
        case.reply(f"Hourly means:\n\n{composed}\n\nA raw sample:\n\n```csv\n{excerpt}\n")
        case.event()
        case.expect("published", "csv", source="assistant_table", rule="assistant_table", rows=3)

    def unterminated_fence_excerpt(case: Case, rng: random.Random) -> None:
        rows = telemetry("BatteryVoltage1", 45, seed=case.number)
        case.user(ask(rng, "json"))
        [group] = case.tools(("list_parameter_history", {"parameter": "BatteryVoltage1"}, rows))
        body = csv_lines(
            ["timestamp", "value"], [[r["timestamp"], str(r["value"])] for r in rows[:3]]
        )
        case.reply(f"The first samples:\n\n```csv\n{body}\n")
        case.event()
        case.expect(
            "published",
            "json",
            source="action_rows",
            rule="excerpt_replaced",
            rows=45,
            groups=[group],
        )

    def tsv_with_elision(case: Case, rng: random.Random) -> None:
        body = tsv_lines(header, [SITE_ROWS[0], SITE_ROWS[1], ["…"], SITE_ROWS[4]])
        only_table(case, rng, body, 3, "csv")

    def ellipsis_column(case: Case, rng: random.Random) -> None:
        rows = [[*r, "…"] for r in SITE_ROWS[:3]] + [["…", "…", "…", "…"]]
        only_table(case, rng, pipe_table([*header, "…"], rows), 3, "xlsx")

    def largest_wins(case: Case, rng: random.Random) -> None:
        small = pipe_table(["a", "b"], [["1", "2"], ["3", "4"], ["5", "6"]])
        reply = f"{small}\n\nAnd the sites:\n\n{csv_lines(header, SITE_ROWS)}\n"
        only_table(case, rng, reply, 5, "json")

    def fenced_csv_first(case: Case, rng: random.Random) -> None:
        big = pipe_table(header, SITE_ROWS)
        fenced = csv_lines(["site", "pass_count"], [["Kiruna", "14"], ["Troll", "3"]])
        only_table(case, rng, f"{big}\n\nPer site:\n\n```csv\n{fenced}\n```", 2, "csv")

    def sentence_after_block(case: Case, rng: random.Random) -> None:
        note = "Note, all antenna counts are provisional, pending the audit."  # 3 fields
        reply = csv_lines(header, SITE_ROWS[:4]) + "\n" + note
        only_table(case, rng, reply, 4, "xml")

    def field_count_ends_block(case: Case, rng: random.Random) -> None:
        rows = [*SITE_ROWS[:2], ["Troll", "AQ", "4", "winter only"], *SITE_ROWS[3:]]
        reply = csv_lines(header, rows)
        # The 4-field line ends the first block (2 data rows) and is a run of one line; the
        # Inuvik line then heads a block with one data row. The largest block wins.
        only_table(case, rng, reply, 2, "csv")

    def prose_with_colon(case: Case, rng: random.Random) -> None:
        reply = "Antennas, by site:\n" + tsv_lines(header, SITE_ROWS[:3]) + "\nThat is all."
        only_table(case, rng, reply, 3, "json")

    return [
        ("text_csv_fence", "a fence labelled text/csv in any case is a fenced csv", text_csv_fence),
        ("quoted_paragraphs", "quoted cells hold blank lines; no row is lost", quoted_paragraphs),
        ("source_line", "a Source:/Citation: line is not a row", source_lines),
        (
            "unterminated_fence_text",
            "an unclosed fence is text: the larger composed table wins",
            unterminated_fence_is_text,
        ),
        (
            "unterminated_fence_excerpt",
            "an unclosed fence's excerpt is still an excerpt",
            unterminated_fence_excerpt,
        ),
        ("tsv_elision", "a lone ellipsis line inside a TSV block is no row", tsv_with_elision),
        ("ellipsis_column", "a column headed by an ellipsis is no column", ellipsis_column),
        ("largest_wins", "the largest table wins", largest_wins),
        ("fenced_csv_first", "a fenced csv beats a larger pipe table", fenced_csv_first),
        ("sentence_after", "a sentence after the block is not a row", sentence_after_block),
        ("field_count", "a line of another field count ends the block", field_count_ends_block),
        ("prose_colon", "a line ending in a colon introduces, it is no header", prose_with_colon),
    ]
