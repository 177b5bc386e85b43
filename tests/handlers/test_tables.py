"""docs/contract/decision.md step 6: the table the model wrote in its reply."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.tables import (
    Table,
    _fences,
    find_table,
    without_row_numbers,
    without_secret_columns,
)

_ROOT = Path(__file__).resolve().parents[2]
_FIXTURE_DIRS = (_ROOT / "tests" / "fixtures" / "public",)


def _message_content(fixture: str, message_id: str) -> str:
    for folder in _FIXTURE_DIRS:
        path = folder / f"{fixture}.fixture.json"
        if path.exists():
            messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
            return str(next(m for m in messages if m["id"] == message_id)["content"])
    pytest.skip(f"fixture {fixture} not found")


def test_headline_reply_fenced_csv_excerpt_is_three_rows_of_four_columns() -> None:
    table = find_table(_message_content("headline", "msg_headline_a_007"))
    assert table is not None
    assert table.columns == ("timestamp", "parameter", "value", "unit")
    assert len(table.rows) == 3
    assert table.rows[1] == ("2026-11-19T00:01:00Z", "BatteryVoltage1", "12.43", "V")


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I retrieved 900 samples, one per minute.",
        "Sure. Here it is, as requested: the file is attached.\nAnything else?",
        "Should each row be one sample, and which columns do you want?",
    ],
)
def test_prose_only_reply_has_no_table(reply: str) -> None:
    assert find_table(reply) is None


@pytest.mark.parametrize(
    "reply",
    [
        "The instances:\n- sat-05\n- sat-06\n- sat-07\n",
        "The instances:\n\n```\nsat-05\nsat-06\n```",
        "Instances:\n- sat-05, active\n- sat-06, active\n",
        "| name |\n|---|\n| sat-05 |\n| sat-06 |",
    ],
)
def test_single_column_list_is_not_a_table(reply: str) -> None:
    assert find_table(reply) is None


def test_header_without_data_rows_is_not_a_table() -> None:
    assert find_table("```csv\ntimestamp,value\n```") is None
    assert find_table("| a | b |\n|---|---|\n\nNo rows.") is None


def test_pipe_table_with_alignment_outer_pipes_and_escaped_pipe() -> None:
    reply = (
        "Here you go:\n\n"
        "| Instance | Site |\n"
        "|:---|:--:|\n"
        "| **sat-05** | `Kiruna` |\n"
        "| sat-06 | Svalbard \\| north |\n"
        "\nThat's all."
    )
    assert find_table(reply) == Table(
        columns=("Instance", "Site"),
        rows=(("sat-05", "Kiruna"), ("sat-06", "Svalbard | north")),
    )


def test_pipe_table_without_outer_pipes_pads_short_rows() -> None:
    reply = "a | b | c\n--- | --- | ---\n1 | 2 | 3\n4 | 5\n"
    assert find_table(reply) == Table(
        columns=("a", "b", "c"), rows=(("1", "2", "3"), ("4", "5", ""))
    )


def test_tsv_block_is_a_table() -> None:
    reply = "Tab separated:\n\ntimestamp\tvalue\n00:00\t12.45\n00:01\t12.43\n"
    assert find_table(reply) == Table(
        columns=("timestamp", "value"), rows=(("00:00", "12.45"), ("00:01", "12.43"))
    )


def test_unfenced_csv_keeps_quoted_commas() -> None:
    reply = 'site,description\nKiruna,"north, inland"\nSvalbard,"north, island"\n'
    table = find_table(reply)
    assert table is not None
    assert table.rows == (("Kiruna", "north, inland"), ("Svalbard", "north, island"))


@pytest.mark.parametrize(
    "prose",
    [
        "Here is the data, as requested:",
        "The series continues, one sample per minute.",
        "Note, values are in volts!",
        "Two sites, Kiruna and Svalbard, both in the north",
    ],
)
def test_prose_line_with_a_comma_next_to_csv_is_not_a_row(prose: str) -> None:
    reply = f"{prose}\nsite,code\nKiruna,KIR\nSvalbard,SVA\n{prose}"
    assert find_table(reply) == Table(
        columns=("site", "code"), rows=(("Kiruna", "KIR"), ("Svalbard", "SVA"))
    )


SAMPLES = "timestamp,value\n2026-11-19T00:00:00Z,12.45\n2026-11-19T00:01:00Z,12.43\n"
SAMPLE_TABLE = Table(
    columns=("timestamp", "value"),
    rows=(("2026-11-19T00:00:00Z", "12.45"), ("2026-11-19T00:01:00Z", "12.43")),
)


@pytest.mark.parametrize(
    "reply",
    [
        f"Sure, here are the first samples\n{SAMPLES}",
        f"Here are the first samples:\n{SAMPLES}Let me know if you need more, happy to help",
        f"Sure, here are the first samples\n{SAMPLES}Let me know if you need more, happy to help\n",
        f"I checked sensors A, B and C\n{SAMPLES}",
        f"OK, here you go\n{SAMPLES}",
    ],
)
def test_unfenced_csv_sentence_without_end_punctuation_is_prose_not_a_row(reply: str) -> None:
    # Split at its comma the sentence has the block's field count; its words do not fit.
    assert find_table(reply) == SAMPLE_TABLE


def test_unfenced_csv_sentence_above_a_text_only_block_is_prose() -> None:
    reply = "Sure, here are the sites we track\nsite,code\nKiruna,KIR\nSvalbard,SVA\n"
    assert find_table(reply) == Table(
        columns=("site", "code"), rows=(("Kiruna", "KIR"), ("Svalbard", "SVA"))
    )


@pytest.mark.parametrize(
    ("reply", "columns", "last"),
    [
        # A long header over values: the record after it shows values, so it is the header.
        (
            "Average battery voltage, site\n12.4,Kiruna\n12.5,Svalbard\n",
            ("Average battery voltage", "site"),
            ("12.5", "Svalbard"),
        ),
        # A header with no space after its comma is no sentence.
        (
            "Name of the sensor,City\nAnn,Paris\nBob,Rome\n",
            ("Name of the sensor", "City"),
            ("Bob", "Rome"),
        ),
        # A description column holds words in every row: the last one is a row.
        (
            "name,description\ngadget, Red and blue\nwidget, A small blue widget\n",
            ("name", "description"),
            ("widget", "A small blue widget"),
        ),
        # Headers of text columns written with ", ": they speak to no one, so no sentence.
        (
            "sensor_id, location, Notes from the technician\nS1, roof, ok\nS2, basement, new\n",
            ("sensor_id", "location", "Notes from the technician"),
            ("S2", "basement", "new"),
        ),
        (
            "Name, Role on the team\nAlice, Lead\nBob, QA\n",
            ("Name", "Role on the team"),
            ("Bob", "QA"),
        ),
        # A last row showing a value where the rows above do: a total, a dated note.
        (
            "year, revenue\n2021, 100\n2022, 120\nTotal across all years, 220\n",
            ("year", "revenue"),
            ("Total across all years", "220"),
        ),
        (
            "date, temperature\n2024-01-01, 12\n2024-01-02, 13\n2024-01-03, I saw no reading\n",
            ("date", "temperature"),
            ("2024-01-03", "I saw no reading"),
        ),
        # TSV: a comma inside a cell splits no sentence.
        (
            "date\tvalue\n2024-01-01\t12\n2024-01-02\t13\n"
            "2024-01-03\tno reading, sensor offline, sorry you\n",
            ("date", "value"),
            ("2024-01-03", "no reading, sensor offline, sorry you"),
        ),
        # Words in a column of values, but quoted: deliberate, a row.
        (
            'time,value\n00:00,12.4\n00:01,"no data, sensor offline"\n',
            ("time", "value"),
            ("00:01", "no data, sensor offline"),
        ),
    ],
)
def test_unfenced_csv_rows_and_headers_with_words_stay_in_the_block(
    reply: str, columns: tuple[str, ...], last: tuple[str, ...]
) -> None:
    table = find_table(reply)
    assert table is not None and table.columns == columns and table.rows[-1] == last


@pytest.mark.parametrize(
    "sign_off",
    [
        "Hope this helps, let me know if you need more",
        "Let me know, if you want the other sites",
        "Please let me know, if one is missing",
        "Thanks for asking, tell me if you need more",
    ],
)
def test_unfenced_csv_sign_off_below_a_table_of_text_is_prose_not_a_row(sign_off: str) -> None:
    # No column shows a value, so a sentence is told by its opening verb over short names
    # and by asking its reader.
    reply = f"device,location\nd1,Paris\nd2,Berlin\n{sign_off}\n"
    assert find_table(reply) == Table(
        columns=("device", "location"), rows=(("d1", "Paris"), ("d2", "Berlin"))
    )


@pytest.mark.parametrize(
    "last",
    [
        ("Carol", "I will be late today"),  # speaks, but its first cell is a name
        ("Carol Ann Smith", "please call back"),  # a long name that speaks to no one
        ("Here and there", "Lyon, Nice"),  # quoted below: not a sentence of ", " cells
        # Titles and names open with the words a sign-off does, and ask nothing of anyone.
        ("Let It Be", "The Beatles"),
        ("I Will Survive", "Gloria Gaynor"),
        ("We Will Rock You", "Queen"),
        ("There Will Be Blood", "P. T. Anderson"),
        ("Please confirm budget", "Carol"),
        ("Hope this helps", "cheers"),  # a sign-off, maybe, but it names no reader
        ("Please Please Me", "The Beatles"),  # names a reader, in title case
        ("Let Me Be There", "Olivia Newton-John"),
    ],
)
def test_unfenced_csv_last_row_of_a_table_of_text_stays_a_row(last: tuple[str, str]) -> None:
    cells = [f'"{cell}"' if "," in cell else cell for cell in last]
    reply = "name, note\nAlice, ok\nBob, fine\n" + ", ".join(cells) + "\n"
    table = find_table(reply)
    assert table is not None and table.columns == ("name", "note") and table.rows[-1] == last


@pytest.mark.parametrize(
    "last", [("My Fair Lady", "1964"), ("Let It Be", "80"), ("Here is the total", "460")]
)
def test_unfenced_csv_last_row_opening_like_a_sign_off_over_values_stays_a_row(
    last: tuple[str, str],
) -> None:
    # A column of values below: the sign-off rule is for tables of text only.
    reply = "title, figure\nCasablanca, 1942\nVertigo, 1958\n" + ", ".join(last) + "\n"
    table = find_table(reply)
    assert table is not None and table.rows[-1] == last


def test_a_header_that_speaks_is_the_header_when_the_record_after_it_shows_values() -> None:
    # "What you ordered" reads like a sentence's words; the next record's 2 shows a value,
    # so it is a row and the line above it the header.
    reply = "Item, What you ordered, Qty\nA1, Widget, 2\nB2, Gadget, 3\n"
    assert find_table(reply) == Table(
        columns=("Item", "What you ordered", "Qty"),
        rows=(("A1", "Widget", "2"), ("B2", "Gadget", "3")),
    )


@pytest.mark.parametrize(
    "last",
    [
        "s3,not yet measured",  # no ", ": not written as a sentence
        "s3,not measured by you",  # speaks, but its comma has no space after it
        's3, "not measured, ask you"',  # quoted: written as a cell
    ],
)
def test_a_last_row_that_is_not_written_as_a_sentence_stays_a_row(last: str) -> None:
    reply = f"sensor,reading\ns1,42\ns2,17\n{last}\n"
    table = find_table(reply)
    assert table is not None and len(table.rows) == 3 and table.rows[-1][0] == "s3"


def test_a_last_row_of_a_phrase_book_opening_with_two_words_stays_a_row() -> None:
    # It opens with a sign-off's words and names its reader, but a sign-off's first cell
    # runs to several words: two are a phrase.
    reply = "phrase, translation\nhello, salut\nsee you, a plus\nthank you, merci a vous\n"
    table = find_table(reply)
    assert table is not None and table.rows[-1] == ("thank you", "merci a vous")


def test_sentence_with_the_headers_cell_count_is_not_a_row() -> None:
    reply = "timestamp,parameter,value\n00:00,V1,12.45\nThe rest, as usual, follows.\n"
    table = find_table(reply)
    assert table is not None
    assert table.rows == (("00:00", "V1", "12.45"),)


@pytest.mark.parametrize(
    "comment",
    ["Voltage dropped below the threshold twice during the night shift", "Replaced the battery."],
)
@pytest.mark.parametrize("at", [0, 1, 2])
def test_a_row_that_reads_like_a_sentence_between_rows_of_its_block_is_a_row(
    comment: str, at: int
) -> None:
    # A comment column's long text ended the block: its rows after it were lost, or (at the
    # first row) the table was not found at all.
    rows = [["north", "1", "ok"], ["south", "2", "ok"], ["west", "4", "ok"]]
    rows.insert(at, ["east", "3", comment])
    reply = "Averages:\nsite,avg,comment\n" + "\n".join(",".join(r) for r in rows) + "\nDone."
    table = find_table(reply)
    assert table is not None and table.columns == ("site", "avg", "comment")
    assert table.rows == tuple(tuple(r) for r in rows)


def test_sentences_after_a_block_stay_out_of_it_however_many() -> None:
    reply = (
        "site,avg\nnorth,1\nsouth,2\n"
        "All in all, the voltage stayed within its limits for the whole week.\n"
        "Next week, we will look at the currents.\n"
    )
    assert find_table(reply) == Table(
        columns=("site", "avg"), rows=(("north", "1"), ("south", "2"))
    )


def test_nothing_inside_a_quoted_csv_field_is_lost() -> None:
    # Its spaces and asterisks were trimmed and unwrapped as a Markdown cell's are.
    reply = 'site,comment\nnorth,"  padded  " \nsouth,"**bold**"\neast, plain \n'
    table = find_table(reply)
    assert table is not None
    assert table.rows == (("north", "  padded  "), ("south", "**bold**"), ("east", "plain"))


def test_largest_candidate_wins() -> None:
    reply = "| a | b |\n|---|---|\n| 1 | 2 |\n\nx,y\n1,2\n3,4\n5,6\n\np\tq\n1\t2\n3\t4\n"
    table = find_table(reply)
    assert table is not None
    assert table.columns == ("x", "y")
    assert len(table.rows) == 3


def test_equal_sizes_first_written_wins() -> None:
    reply = "x,y\n1,2\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    table = find_table(reply)
    assert table is not None
    assert table.columns == ("x", "y")


def test_fenced_csv_beats_a_larger_pipe_table() -> None:
    reply = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n| 5 | 6 |\n\n```csv\nx,y\n1,2\n```"
    assert find_table(reply) == Table(columns=("x", "y"), rows=(("1", "2"),))


def test_first_fenced_csv_that_parses_wins() -> None:
    reply = "```csv\nonly\n1\n```\n\n```CSV\nx,y\n1,2\n```\n\n```csv\np,q\n1,2\n3,4\n```"
    assert find_table(reply) == Table(columns=("x", "y"), rows=(("1", "2"),))


@pytest.mark.parametrize("body", ["", "\n", " \n,\n"])
def test_an_empty_fenced_csv_block_is_no_table_and_the_text_after_it_is_read(body: str) -> None:
    reply = f"```csv\n{body}```\nx,y\n1,2\n"
    assert find_table(reply) == Table(columns=("x", "y"), rows=(("1", "2"),))


def test_fenced_csv_reads_quoted_cells_across_lines() -> None:
    reply = '```csv\nsite,note\nKiruna,"two\nlines"\n```'
    assert find_table(reply) == Table(columns=("site", "note"), rows=(("Kiruna", "two\nlines"),))


def test_plain_and_tsv_fences_are_candidates() -> None:
    assert find_table("```\nx,y\n1,2\n```") == Table(columns=("x", "y"), rows=(("1", "2"),))
    assert find_table("```tsv\nx\ty\n1\t2\n```") == Table(columns=("x", "y"), rows=(("1", "2"),))


def test_code_fences_are_not_tables() -> None:
    reply = (
        "```python\nrows = f(a, b)\nmore = g(c, d)\n```\n\n"
        '```json\n{"a": 1, "b": 2}\n{"a": 3, "b": 4}\n```'
    )
    assert find_table(reply) is None


def test_pipe_table_lines_are_not_read_again_as_csv() -> None:
    reply = "| a | b |\n|---|---|\n| 1,5 | 2 |\n| 3,5 | 4 |\n"
    assert find_table(reply) == Table(columns=("a", "b"), rows=(("1,5", "2"), ("3,5", "4")))


# --------------------------------------------------------------------------------------
# Fences: `csv` or `text/csv` in any case; a fence that never closes is no fence
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("label", ["csv", "CSV", "text/csv", "Text/CSV"])
def test_fence_labelled_csv_or_text_csv_in_any_case_is_read_first(label: str) -> None:
    reply = f"| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n```{label}\nx,y\n1,2\n```"
    assert find_table(reply) == Table(columns=("x", "y"), rows=(("1", "2"),))


def test_unterminated_fence_is_not_a_fence_its_lines_are_unfenced_text() -> None:
    # Were it a fence, its csv would win outright; as text, the larger pipe table wins.
    reply = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n```csv\nx,y\n1,2\n"
    assert find_table(reply) == Table(columns=("a", "b"), rows=(("1", "2"), ("3", "4")))
    assert find_table("```csv\nx,y\n1,2\n3,4\n") == Table(
        columns=("x", "y"), rows=(("1", "2"), ("3", "4"))
    )


# --------------------------------------------------------------------------------------
# Unfenced CSV blocks: quoted fields span lines, prose and Source lines end a block
# --------------------------------------------------------------------------------------
def test_unfenced_csv_quoted_field_keeps_blank_lines_and_every_paragraph() -> None:
    reply = (
        "Here are the notes:\n\n"
        'site,note\nKiruna,"first paragraph\n\nsecond paragraph, with a comma"\n'
        "Svalbard,short\n"
    )
    assert find_table(reply) == Table(
        columns=("site", "note"),
        rows=(
            ("Kiruna", "first paragraph\n\nsecond paragraph, with a comma"),
            ("Svalbard", "short"),
        ),
    )


def test_unfenced_csv_quoted_long_sentence_cell_is_not_prose() -> None:
    reply = 'id,comment\n1,"This is a long comment that has many words, more than eight."\n'
    table = find_table(reply)
    assert table is not None and len(table.rows) == 1


def test_unfenced_csv_unclosed_quote_is_not_a_row() -> None:
    reply = 'a,b\n1,2\n3,"never closed\n4,5\n'
    assert find_table(reply) == Table(columns=("a", "b"), rows=(("1", "2"),))


@pytest.mark.parametrize(
    "line",
    [
        "Source: list_parameter_history, pages 1 and 2",
        "Sources: history, sites",
        "*Citation:* get_facts, call 3",
        "> source: tool, result",
    ],
)
def test_source_and_citation_lines_end_an_unfenced_block(line: str) -> None:
    reply = f"t,v\n1,2\n3,4\n{line}\n"
    assert find_table(reply) == Table(columns=("t", "v"), rows=(("1", "2"), ("3", "4")))


def test_source_line_ends_a_pipe_table() -> None:
    reply = "| t | v |\n|---|---|\n| 1 | 2 |\nSource: history | page 1\n"
    assert find_table(reply) == Table(columns=("t", "v"), rows=(("1", "2"),))


def test_line_ending_in_a_colon_is_not_a_header() -> None:
    reply = "Values, in volts:\nt,v\n1,2\n"
    assert find_table(reply) == Table(columns=("t", "v"), rows=(("1", "2"),))


def test_line_of_another_field_count_ends_the_block() -> None:
    reply = "t,v\n1,2\n3,4,5\n6,7\n"
    assert find_table(reply) == Table(columns=("t", "v"), rows=(("1", "2"),))


@pytest.mark.parametrize(
    ("reply", "table"),
    [
        # A "#" that starts a cell is data: a row-number header, an id.
        ("#,name\n1,S 1\n2,S 2\n", Table(("#", "name"), (("1", "S 1"), ("2", "S 2")))),
        ("#\tname\n1\tSensor 1\n", Table(("#", "name"), (("1", "Sensor 1"),))),
        ("id,name\n#1,a\n#2,b\n", Table(("id", "name"), (("#1", "a"), ("#2", "b")))),
        # A Markdown heading above the block is not its header.
        ("## Samples\nt,v\n1,2\n", Table(("t", "v"), (("1", "2"),))),
        ("#\nt,v\n1,2\n", Table(("t", "v"), (("1", "2"),))),
    ],
)  # fmt: skip
def test_hash_starting_a_cell_is_data_and_a_heading_is_not(reply: str, table: Table) -> None:
    assert find_table(reply) == table


def test_a_row_ending_in_a_question_mark_between_rows_of_its_block_is_a_row() -> None:
    reply = "q,answer\n1,Is the pump on?\n2,yes\n3,Alarm!\n4,no\n\nMore rows, or done?"
    assert find_table(reply) == Table(
        ("q", "answer"), (("1", "Is the pump on?"), ("2", "yes"), ("3", "Alarm!"), ("4", "no"))
    )
    # Above the block or below its last row, such a line is prose.
    assert find_table("Want these, or others?\nt,v\n1,2\n") == Table(("t", "v"), (("1", "2"),))


def test_crlf_reply_text_parses_like_lf() -> None:
    assert find_table("t,v\r\n1,2\r\n3,4\r\n") == Table(
        columns=("t", "v"), rows=(("1", "2"), ("3", "4"))
    )


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_fences_and_quoted_lines_read_like_lf(newline: str) -> None:
    # A fence's closing line ends in its newline's CR: read as it was, no closing line was
    # found, the code block became text and its calls a table.
    code = "```python\nrows = f(a, b)\nmore = g(c, d)\nlast = h(e, f)\n```\n"
    assert find_table(code.replace("\n", newline)) is None
    # A quoted cell running over lines keeps LF between its lines, never a CR.
    reply = 'site,note\nnorth,"two\nlines"\nsouth,ok\n'
    assert find_table(reply.replace("\n", newline)) == Table(
        columns=("site", "note"), rows=(("north", "two\nlines"), ("south", "ok"))
    )


# --------------------------------------------------------------------------------------
# Elisions: rows of only `...`/`…` or empty cells, columns headed by an ellipsis
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply",
    [
        "t,v\n1,2\n...\n3,4\n",
        "t,v\n1,2\n…,…\n3,4\n",
        "```csv\nt,v\n1,2\n...\n3,4\n```",
        "| t | v |\n|---|---|\n| 1 | 2 |\n| ... | ... |\n| 3 | 4 |",
        "| t | v |\n|---|---|\n| 1 | 2 |\n| … | |\n| 3 | 4 |",
        "t\tv\n1\t2\n…\n3\t4\n",
    ],
)
def test_elision_row_is_not_a_row_and_does_not_end_the_table(reply: str) -> None:
    assert find_table(reply) == Table(columns=("t", "v"), rows=(("1", "2"), ("3", "4")))


def test_column_headed_by_an_ellipsis_is_not_a_column() -> None:
    reply = "| t | v | … |\n|---|---|---|\n| 1 | 2 | x |\n| 3 | 4 | y |"
    assert find_table(reply) == Table(columns=("t", "v"), rows=(("1", "2"), ("3", "4")))
    assert find_table("t,...,v\n1,,2\n") == Table(columns=("t", "v"), rows=(("1", "2"),))


def test_empty_rows_are_not_rows() -> None:
    assert find_table("| t | v |\n|---|---|\n|  |  |\n| 1 | 2 |") == Table(
        columns=("t", "v"), rows=(("1", "2"),)
    )


# --- fenced blocks, read line by line ----------------------------------------------------------

_PLAIN_FENCE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)"
    r"^[ \t]*(?P=fence)[`~]*[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
_FENCE_LINES = st.sampled_from(
    ["```", "````", "`````", "~~~", "~~~~", "~~~~~", "```csv", "~~~ csv", "``` `x`", "a,b",
     "1,2", "  ```", "\t~~~", "```~~", "~~~```", "`", "", "x | y", "~~~~a", " ``` ", "``",
     "```` ", "~~~~~~ text", "|a|b|", "|-|-|", "~~~ ~~", "``` ~", "a```"]
)  # fmt: skip


@settings(max_examples=1000, deadline=None)
@given(st.lists(_FENCE_LINES, max_size=14), st.booleans())
def test_fenced_blocks_are_the_ones_the_fence_pattern_finds(
    lines: list[str], final_newline: bool
) -> None:
    text = "\n".join(lines) + ("\n" if final_newline else "")
    plain = [
        (m.start(), m.end(), m.group("info"), m.start("body"), m.group("body"))
        for m in _PLAIN_FENCE.finditer(text)
    ]
    assert [(f.start, f.end, f.info, f.body_start, f.body) for f in _fences(text)] == plain


def test_many_unclosed_fence_lines_are_ordinary_text() -> None:
    text = "\n".join(["~~~a"] * 3000 + ["a,b", "1,2", "3,4"])
    assert find_table(text) == Table(("a", "b"), (("1", "2"), ("3", "4")))


def test_unfenced_csv_passes_over_at_most_two_sentences_above_a_block() -> None:
    # Each pass reads the block again; the cap keeps a block's cost linear in its lines.
    sentences = [", ".join("here you go" if j == k else "x" for j in range(4)) for k in range(4)]
    reply = "\n".join([*sentences, "a,b,c,d", "x,x,x,x", "x,x,x,x"])
    table = find_table(reply)
    assert table is not None and table.columns == tuple(sentences[2].split(", "))


@pytest.mark.parametrize(
    ("text", "columns", "rows"),
    [
        # Pipe-table lines are not read again as CSV.
        ("| a | b |\n|---|---|\n| 1,2 | x |\n| 3,4 | y |\n5,6\n7,8\n", ("a", "b"), 2),
        # A heading before the block, and a sign-off or remark after it, are prose.
        ("## Sites, cities\ndevice,location\nd1,Paris\nd2,Berlin\n", ("device", "location"), 2),
        ("Okay, that covers the sites\ndevice,location\nd1,Paris\nd2,Berlin\n", None, 2),
        ("device,location\nd1,Paris\nd2,Berlin\nHope you like it, thanks\n", None, 2),
        (
            "device,location\nd1,Paris\nd2,Berlin\nHopefully that helps, tell me more\n",
            None,
            2,
        ),
        ("device,location\nd1,Paris\nd2,Berlin\nThanks for asking, tell your team\n", None, 2),
        # Quoted cells are data; a short row of data is not a sentence.
        ('x,y\n1,2\n"3","4"\n', ("x", "y"), 2),
        ("name,value\nA,1\nB,2\nSure thing you know, ok\n", ("name", "value"), 3),
    ],
)
def test_an_unfenced_csv_block_is_told_from_the_prose_around_it(
    text: str, columns: tuple[str, ...] | None, rows: int
) -> None:
    table = find_table(text)
    assert table is not None
    assert table.columns == (columns or ("device", "location")) and len(table.rows) == rows


def test_a_line_with_a_cell_of_eight_words_above_a_block_is_prose() -> None:
    # An unquoted cell of 8 words or more reads like a sentence: above the header, prose.
    reply = "Readings were taken at the main pump site, today\ntime,value\n00:00,12.4\n00:01,12.5"
    assert find_table(reply) == Table(("time", "value"), (("00:00", "12.4"), ("00:01", "12.5")))


def test_a_sentence_below_a_block_of_one_row_stays_out_of_it() -> None:
    reply = "site,value\na,12.4\nLet me know if you need more, happy to help"
    assert find_table(reply) == Table(("site", "value"), (("a", "12.4"),))


def test_a_sentence_opening_with_sure_above_a_block_is_prose() -> None:
    reply = (
        "Sure, the hourly samples for the site\n"
        "timestamp,value\n2026-01-01T00:00:00Z,12.4\n2026-01-01T01:00:00Z,12.5"
    )
    table = find_table(reply)
    assert table is not None and table.columns == ("timestamp", "value")


@pytest.mark.parametrize(
    "sign_off", ["Feel free to ask me, anytime", "Let us know if this helps, thanks"]
)
def test_a_sign_off_opening_with_feel_or_naming_us_is_prose(sign_off: str) -> None:
    reply = f"id,city\nd1,Paris\nd2,Lyon\n{sign_off}"
    assert find_table(reply) == Table(("id", "city"), (("d1", "Paris"), ("d2", "Lyon")))


def test_a_line_of_only_commas_with_another_field_count_ends_the_block() -> None:
    # Only an elision marker (`...`) inside a block does not end it; empty fields do.
    assert find_table("a,b\n1,2\n,,,\n3,4") == Table(("a", "b"), (("1", "2"),))


def test_a_numbered_list_item_with_a_parenthesis_is_prose() -> None:
    assert find_table("1) Paris, France\n2) Lyon, France\n3) Nice, France") is None


def test_a_table_written_before_a_code_fence_is_read() -> None:
    reply = "t,v\n1,2\n3,4\n\n```python\nx = 1\n```\n"
    assert find_table(reply) == Table(("t", "v"), (("1", "2"), ("3", "4")))


def test_a_horizontal_rule_below_csv_rows_is_no_pipe_table_separator() -> None:
    # "---" under a line reads like a separator row; without pipes it is a rule, and the
    # row above it stays a row.
    assert find_table("t,v\n1,2\n3,4\n---\n") == Table(("t", "v"), (("1", "2"), ("3", "4")))


def test_lines_with_pipes_and_no_separator_row_are_no_pipe_table() -> None:
    assert find_table("a | b\nc | d\ne | f\n") is None


def test_an_elision_above_a_block_is_no_header() -> None:
    assert find_table("…,…\n1,2\n3,4\n") == Table(("1", "2"), (("3", "4"),))


def test_a_quoted_first_cell_keeps_its_comma() -> None:
    reply = 'name,age\n"Smith, J",42\n  "Doe, A",17\n'
    assert find_table(reply) == Table(("name", "age"), (("Smith, J", "42"), ("Doe, A", "17")))


def test_columns_naming_secrets_are_dropped_with_their_cells() -> None:
    table = Table(
        ("device", "api_key", "Access Token", "value"),
        (("d1", "k1", "t1", "12"), ("d2", "k2", "t2", "13")),
    )
    assert without_secret_columns(table) == Table(("device", "value"), (("d1", "12"), ("d2", "13")))
    plain = Table(("device", "value"), (("d1", "12"),))
    assert without_secret_columns(plain) == plain


@pytest.mark.parametrize("above", [["here you go, x"], ["here you go, x", "x, here you go"]])
def test_each_block_passes_over_its_own_two_sentences_above(above: list[str]) -> None:
    # The count of sentences passed over starts again at each block.
    reply = "\n".join(
        [
            "here you go, x, x",
            "x, here you go, x",
            "a,b,c\nx,x,x\nx,x,x",
            *above,
            "p,q\nx,x\nx,x\nx,x",
        ]
    )
    assert find_table(reply) == Table(("p", "q"), (("x", "x"),) * 3)


def test_a_separator_row_of_another_cell_count_makes_no_pipe_table() -> None:
    assert find_table("| a | b | c |\n|---|---|\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n") is None


def test_a_line_with_a_cell_of_eight_words_that_does_not_speak_is_no_header() -> None:
    prose = "Voltage dropped below the threshold twice during the night, 3"
    reply = f"{prose}\nsite,avg\nnorth,1\nsouth,2\n"
    assert find_table(reply) == Table(("site", "avg"), (("north", "1"), ("south", "2")))


def test_a_record_over_lines_is_judged_by_all_its_lines() -> None:
    # Its last line ends in "!": an exclamation below the block, not a row.
    reply = 'id,note,status\n1,ok,fine\n2,"two\nlines",done!\n'
    assert find_table(reply) == Table(("id", "note", "status"), (("1", "ok", "fine"),))


def test_four_words_ending_in_a_full_stop_below_a_block_are_a_sentence() -> None:
    reply = "status,note\nok,fine\nok,fine\nAll done, all good.\n"
    assert find_table(reply) == Table(("status", "note"), (("ok", "fine"), ("ok", "fine")))


@pytest.mark.parametrize("below", ["", "Hope this helps, let me know\n"])
def test_a_sentence_above_a_block_of_one_row_is_prose(below: str) -> None:
    # One row, and a sign-off below it that is no measure of the block's columns.
    reply = f"Sure, here are the sites\ndevice,location\nd1,Paris\n{below}"
    assert find_table(reply) == Table(("device", "location"), (("d1", "Paris"),))


def test_a_block_starts_right_below_a_line_of_another_field_count() -> None:
    assert find_table("a,b,c\nx,y\n1,2\n3,4\n") == Table(("x", "y"), (("1", "2"), ("3", "4")))


def test_a_quoted_cell_keeps_its_doubled_quotes_as_one() -> None:
    reply = 'name,quote\na,"say ""hi"""\nb,ok\n'
    assert find_table(reply) == Table(("name", "quote"), (("a", 'say "hi"'), ("b", "ok")))


def test_a_fenced_csv_reads_a_quoted_cell_after_a_space() -> None:
    reply = '```csv\nname,note\na, "x, y"\nb,z\n```'
    assert find_table(reply) == Table(("name", "note"), (("a", "x, y"), ("b", "z")))


def test_tsv_cells_are_cleaned_as_csv_cells_are() -> None:
    assert find_table("t\tv\n 1 \t**2**\n") == Table(("t", "v"), (("1", "2"),))


def test_a_row_number_column_beside_one_other_column_is_dropped() -> None:
    table = Table(("#", "name"), (("1", "a"), ("2", "b")))
    assert without_row_numbers(table) == Table(("name",), (("a",), ("b",)))


def test_a_sentence_above_a_block_whose_column_holds_two_words_a_row_is_prose() -> None:
    reply = "Sure, here are the devices\nname,location\nd1,north hall\nd2,south hall\n"
    assert find_table(reply) == Table(
        ("name", "location"), (("d1", "north hall"), ("d2", "south hall"))
    )


@pytest.mark.parametrize(
    ("rows", "sign_off"),
    [
        ("north pump,Paris\nsouth pump,Berlin", "Hope this helps, let me know"),  # two words
        ("d1,Paris\nd2,Berlin", "Hope you enjoy, cheers mate"),  # the reader second
    ],
)
def test_a_sign_off_below_names_of_two_words_or_naming_its_reader_second_is_prose(
    rows: str, sign_off: str
) -> None:
    table = find_table(f"device,location\n{rows}\n{sign_off}\n")
    assert table is not None and len(table.rows) == 2
