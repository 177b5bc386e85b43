"""docs/contract/decision.md step 7, relevance in reach-back: the request names the dataset
it means."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from handlers import relevance
from handlers import turn as story
from handlers.reach_back import Candidate, GroupNames, scan
from handlers.relevance import (
    STOP_WORDS,
    group_score,
    group_words,
    score,
    subject_words,
    words,
)
from handlers.selection import ResultRef
from schemas.documents import CompactCitation
from tests.chat import Chat, decision_of, drive


# --- words ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("BatteryVoltage1", ["battery", "voltage", "1"]),
        ("list_parameter_history", ["list", "parameter", "history"]),
        ("sat-07", ["sat", "07"]),
        ("abc123def", ["abc", "123", "def"]),
        ("HTTPServer", ["httpserver"]),
        ("TemperatureSensor2B", ["temperature", "sensor", "2", "b"]),
        ("Ünïcode2Ämbar", ["ünïcode", "2", "ämbar"]),
        ("a.b/c d", ["a", "b", "c", "d"]),
    ],
)
def test_words_split_on_non_alphanumerics_case_and_letter_digit_boundaries(
    text: str, expected: list[str]
) -> None:
    assert list(words(text)) == expected


def test_subject_words_drop_short_all_digit_and_stop_words() -> None:
    assert subject_words("create a csv of the BatteryVoltage1 samples") == {"battery", "voltage"}
    assert subject_words("export sat-07 2026 data as json") == {"sat"}
    assert subject_words("Give me all the rows as an excel file please") == set()


@pytest.mark.parametrize(
    "word",
    [
        # formats and their synonyms
        "csv", "json", "xml", "xlsx", "excel", "spreadsheet", "pdf", "docx", "word", "markdown",
        # asking for a file or for data (the contract's list)
        "create", "make", "export", "generate", "give", "get", "pull", "fetch", "retrieve",
        "show", "put", "turn", "send", "download", "convert", "save", "produce", "attach",
        "file", "data", "dataset", "table", "row", "rows", "record", "records", "value",
        "values", "result", "results", "sample", "samples", "list", "all", "every",
        # English function words
        "the", "and", "for", "with", "from", "this", "that", "into", "about", "which",
    ],
)  # fmt: skip
def test_stop_words_hold_the_specs_list(word: str) -> None:
    assert word in STOP_WORDS
    assert subject_words(word) == set()


def test_english_function_words_are_stop_words_too() -> None:
    # SPEC 5 step 7's stop words include English function words, beyond the listed ones.
    assert subject_words("csv of only the battery readings, though") == {"battery", "reading"}
    assert subject_words("the battery readings before and after the outage") == {
        "battery",
        "reading",
        "outage",
    }


def test_group_words_come_from_action_arguments_columns_and_citation_strings() -> None:
    found = group_words(
        "list_parameter_history",
        [{"parameter": "BatteryVoltage1", "page": 2, "filter": {"site": ["Kiruna"]}}],
        ["timestamp", "cellTemp"],
        [{"items": [{"label": "Solar array", "n": 3}, "<dict with 4 keys>"], "note": "x" * 3}],
    )
    assert {"list", "parameter", "history", "battery", "voltage", "kiruna"} <= found
    assert {"timestamp", "cell", "temp", "solar", "array", "xxx"} <= found
    assert not {"page", "dict", "keys", "label", "items"} & found  # keys and markers: no


def test_truncated_citation_string_loses_only_the_marker() -> None:
    found = group_words("a", [], [], ["Voltage readings…[truncated 120 chars]"])
    assert found == {"a", "voltage", "reading"}


@pytest.mark.parametrize(
    ("plural", "singular_"),
    [("voltages", "voltage"), ("batteries", "battery"), ("boxes", "box"),
     ("switches", "switch"), ("statuses", "status"), ("alarms", "alarm")],
)  # fmt: skip
def test_a_plural_and_its_singular_name_the_same_group(plural: str, singular_: str) -> None:
    assert subject_words(f"export the {plural} to csv") == {singular_}
    assert group_words(f"get_{singular_}_history", [], [], []) == {"get", singular_, "history"}
    assert group_words(f"list_{plural}", [], [], []) == {"list", singular_}


@pytest.mark.parametrize("word", ["status", "class", "analysis", "gas", "bus"])
def test_a_word_that_is_no_regular_plural_is_kept(word: str) -> None:
    assert relevance.singular(word) == word


def test_a_plural_folding_to_a_stop_word_is_no_subject_word() -> None:
    assert subject_words("the exports as csv") == frozenset()


def test_reach_back_a_plural_names_the_group_of_its_singular() -> None:
    chat = Chat()
    chat.user("get the battery voltage history")
    chat.tools(("get_voltage_history", {"items": [{"t": i, "voltage": 12.0} for i in range(50)]}))
    chat.reply("Got 50 voltage samples.")
    chat.user("now the temperature history")
    chat.tools(("get_temperature_history", {"items": [{"t": i, "celsius": 20} for i in range(40)]}))
    chat.reply("Got 40 temperature samples.")
    chat.user("export the voltages to csv")
    chat.reply("Here is the CSV.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event())
    assert isinstance(outcome, story.ExportPlan) and outcome.why is not None
    assert outcome.why.rule == "reach_back_named" and len(rows) == 50


def test_score_counts_distinct_subject_words_found() -> None:
    subject = subject_words("csv of the BatteryVoltage1 history for sat-07")
    assert score(subject, frozenset({"battery", "voltage", "history", "sats"})) == 3
    assert score(subject, frozenset({"temperature"})) == 0


# --- phase 1 with relevance -------------------------------------------------------------
class Calls:
    """Refs in call order, as the window hands them over."""

    def __init__(self) -> None:
        self.refs: list[ResultRef] = []

    def add(
        self, turn: str, action: str, rows: int, arguments: dict[str, Any] | None = None
    ) -> ResultRef:
        order = len(self.refs)
        citation = {"result": {"items": []}, "row_count": rows, "columns": ["timestamp", "v"]}
        ref = ResultRef(
            turn,
            action,
            f"call_{order}",
            f"artifacts/conv/{turn}/{order}.json",
            CompactCitation.model_validate(citation),
            order,
            arguments or {},
        )
        self.refs.append(ref)
        return ref


def test_reach_back_named_group_wins_over_a_newer_dataset() -> None:
    calls = Calls()
    volts = calls.add("m1", "list_parameter_history", 900, {"parameter": "BatteryVoltage1"})
    calls.add("m2", "list_parameter_history", 600, {"parameter": "Temperature1"})
    found = scan(calls.refs, subject_words("create a csv of the BatteryVoltage1 samples"))
    assert found.rule == "reach_back_named" and found.picked == [volts]


def test_reach_back_named_needs_an_estimate_of_ten() -> None:
    calls = Calls()
    calls.add("m1", "get_parameter", 1, {"parameter": "BatteryVoltage1"})
    newest = calls.add("m2", "history", 40)
    found = scan(calls.refs, subject_words("csv of BatteryVoltage1"))
    assert found.rule == "reach_back_newest" and found.picked == [newest]


def test_reach_back_named_takes_an_estimate_of_exactly_ten() -> None:
    calls = Calls()
    named = calls.add("m1", "get_parameter", 10, {"parameter": "BatteryVoltage1"})
    calls.add("m2", "history", 40)
    found = scan(calls.refs, subject_words("csv of BatteryVoltage1"))
    assert found.rule == "reach_back_named" and found.picked == [named]


def test_reach_back_named_highest_score_wins() -> None:
    calls = Calls()
    both = calls.add("m1", "history", 50, {"parameter": "BatteryVoltage1"})
    calls.add("m2", "history", 50, {"parameter": "Voltage2"})
    found = scan(calls.refs, subject_words("the BatteryVoltage1 csv"))
    assert found.chosen is not None and found.chosen.score == 2 and found.picked == [both]


def test_reach_back_named_tie_goes_to_the_newest_turn_then_most_rows_then_first_called() -> None:
    calls = Calls()
    calls.add("m1", "history", 500, {"parameter": "Voltage"})
    calls.add("m2", "history_a", 20, {"parameter": "Voltage"})
    most = calls.add("m2", "history_b", 30, {"parameter": "Voltage"})
    calls.add("m2", "history_c", 30, {"parameter": "Voltage"})
    assert scan(calls.refs, subject_words("voltage csv")).picked == [most]


def test_reach_back_without_a_named_group_keeps_recency_then_volume() -> None:
    calls = Calls()
    calls.add("m1", "history", 900, {"parameter": "BatteryVoltage1"})
    newer = calls.add("m2", "history", 600, {"parameter": "Temperature1"})
    found = scan(calls.refs, subject_words("create a csv"))
    assert found.rule == "reach_back_newest" and found.picked == [newer]
    assert [c.score for c in found.candidates] == [0, 0]


def test_reach_back_any_is_the_newest_group_with_rows() -> None:
    calls = Calls()
    calls.add("m1", "lookup", 3, {"parameter": "BatteryVoltage1"})
    newest = calls.add("m2", "facts", 1)
    found = scan(calls.refs, subject_words("BatteryVoltage1 csv"))
    assert found.rule == "reach_back_any" and found.picked == [newest]


def test_reach_back_any_group_is_as_new_as_its_latest_call() -> None:
    calls = Calls()
    paged = calls.add("m1", "lookup", 2)
    calls.add("m1", "facts", 1)
    calls.add("m1", "lookup", 2)
    found = scan(calls.refs, subject_words("csv"))
    assert found.rule == "reach_back_any" and found.chosen is not None
    assert found.chosen.action == "lookup" and found.picked[0] == paged


def test_reach_back_scan_lists_every_group_with_estimate_and_score() -> None:
    calls = Calls()
    calls.add("m1", "list_instances", 1, {"name_filter": "sat-07"})
    calls.add("m1", "history", 450, {"parameter": "BatteryVoltage1"})
    calls.add("m1", "history", 450, {"parameter": "BatteryVoltage1"})
    found = scan(calls.refs, subject_words("csv of the sat-07 BatteryVoltage1 history"))
    assert [(c.action, c.estimate, c.score) for c in found.candidates] == [
        ("list_instances", 1, 1),
        ("history", 900, 3),
    ]


# --- the seed's example through the whole core -----------------------------------------
def telemetry(parameter: str, start: int, end: int, base: float) -> dict[str, Any]:
    unit = "V" if "Voltage" in parameter else "C"
    items = [
        {
            "timestamp": f"2026-11-19T{i // 60:02d}:{i % 60:02d}:00Z",
            "parameter": parameter,
            "value": round(base + (i % 7) / 100, 2),
            "unit": unit,
        }
        for i in range(start, end)
    ]
    return {"parameter": parameter, "items": items, "total": end - start}


def seed_conversation() -> Chat:
    """BatteryVoltage1 (two pages of 450) two turns back, a newer Temperature1 dataset."""
    volts = {"instance_id": "sat-07", "parameter": "BatteryVoltage1"}
    chat = Chat()
    chat.user("Retrieve the BatteryVoltage1 history for sat-07")
    chat.tools(
        (
            "list_parameter_history",
            telemetry("BatteryVoltage1", 0, 450, 12.4),
            {**volts, "page": 1},
        ),
        (
            "list_parameter_history",
            telemetry("BatteryVoltage1", 450, 900, 12.4),
            {**volts, "page": 2},
        ),
    )
    chat.reply("I retrieved 900 BatteryVoltage1 samples.")
    chat.user("and the Temperature1 history?")
    temperature = {"instance_id": "sat-07", "parameter": "Temperature1"}
    chat.tools(("list_parameter_history", telemetry("Temperature1", 0, 600, 21.0), temperature))
    chat.reply("Here are 600 Temperature1 samples.")
    return chat


def test_seed_example_batteryvoltage1_two_turns_back_wins_over_newer_temperature1() -> None:
    chat = seed_conversation()
    chat.user("create a csv of the BatteryVoltage1 samples")
    chat.reply("Here is the file.")
    outcome, read, rows = drive(chat.messages, chat.artifacts, chat.event(history_limit=20))
    assert isinstance(outcome, story.ExportPlan) and outcome.why is not None
    assert outcome.row_source == "prior_turn" and len(rows) == 900
    assert {r["parameter"] for r in rows} == {"BatteryVoltage1"}
    assert read == [f"artifacts/conv_t/t1/call_{n}.json" for n in (1, 2)]
    assert outcome.why.rule == "reach_back_named"
    assert [(g.turn_id, g.estimate, g.rows, g.score, g.chosen) for g in outcome.why.groups] == [
        ("t1", 900, 900, 2, True),
        ("t2", 600, None, 0, False),
    ]


def test_seed_example_without_naming_the_dataset_takes_the_newest() -> None:
    chat = seed_conversation()
    chat.user("create a csv")
    chat.reply("Here is the file.")
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event(history_limit=20))
    assert isinstance(outcome, story.ExportPlan) and outcome.why is not None
    assert outcome.why.rule == "reach_back_newest" and len(rows) == 600
    assert {r["parameter"] for r in rows} == {"Temperature1"}


def test_carried_request_is_scored_by_its_original_text() -> None:
    chat = seed_conversation()
    chat.user("export the BatteryVoltage1 samples as json")
    chat.reply("Should each row be one sample, or one per minute?", clarification=True)
    chat.user("one row per sample")
    chat.reply("Done.", clarification=False)
    outcome, _, rows = drive(chat.messages, chat.artifacts, chat.event(history_limit=20))
    assert decision_of(outcome) == "published" and outcome.facts.carried
    assert isinstance(outcome, story.ExportPlan) and outcome.why is not None
    assert outcome.why.rule == "reach_back_named" and len(rows) == 900


def _words_char_by_char(text: str) -> Iterator[str]:
    """The splitting rule as written first, every piece walked a character at a time."""
    for piece in re.findall(r"[^\W_]+", text):
        start = 0
        for at in range(1, len(piece)):
            before, char = piece[at - 1], piece[at]
            if (before.islower() and char.isupper()) or before.isalpha() != char.isalpha():
                yield piece[start:at].lower()
                start = at
        yield piece[start:].lower()


@given(
    st.text()
    | st.text(alphabet="aZ09_- .ǅßİıΣσ٣²½\u0301")
    | st.from_regex(r"[a-z]+[0-9]*[A-Z]?[a-z]*", fullmatch=True)
)
def test_words_are_what_the_character_by_character_rule_gives(text: str) -> None:
    assert list(words(text)) == list(_words_char_by_char(text))


# Texts that split and lower-case unusually: title case, the sharp s, the dotted and dotless
# i, the Kelvin sign (lower-cases to ASCII k), the Greek sigma (its lower case depends on
# its neighbours), other scripts' digits, a combining accent, and the citation markers.
_TRICKY = st.text(alphabet="aKkZz09_- .ǅßİıΣσςΟΔ٣²½\u0301\u212a", max_size=24)
_GROUP_TEXT = (
    _TRICKY
    | st.text(max_size=24)
    | st.sampled_from(
        [
            "BatteryVoltage1",
            "list_parameter_history",
            "<dict with 3 keys>",
            "Volt…[truncated 9 chars]",
            "BATTERIES_voltages",
            "battery-Boxes classes",
        ]
    )
)


@given(
    subject=st.frozensets(
        st.sampled_from(
            ["battery", "voltage", "kelvin", "οδος", "σας", "ǆa", "i̇d", "volt", "box", "class"]
        )
        | st.text(alphabet="akzοσςß0İı", min_size=1, max_size=5),
        max_size=4,
    ),
    action=_GROUP_TEXT,
    arguments=st.lists(st.dictionaries(st.text(max_size=3), _GROUP_TEXT, max_size=3), max_size=2),
    columns=st.lists(_GROUP_TEXT, max_size=3),
    results=st.lists(
        st.recursive(_GROUP_TEXT | st.integers(), lambda inner: st.lists(inner, max_size=3)),
        max_size=3,
    ),
)
# A sigma that ends a word but not the text: the word has the final form, the text
# lower-cased the other one, so a non-ASCII subject word is never looked for as a substring.
@example(subject=frozenset({"οδος"}), action="ΟΔΟΣ\u0301Β", arguments=[], columns=[], results=[])
def test_group_score_is_the_score_of_the_group_words(
    subject: frozenset[str],
    action: str,
    arguments: list[dict[str, str]],
    columns: list[str],
    results: list[Any],
) -> None:
    expected = score(subject, group_words(action, arguments, columns, results))
    assert group_score(subject, action, arguments, columns, results) == expected


_MEMBER = st.tuples(
    st.dictionaries(st.text(max_size=3), _GROUP_TEXT, max_size=2),  # the call's arguments
    st.none() | st.tuples(st.lists(_GROUP_TEXT, max_size=2), st.lists(_GROUP_TEXT, max_size=2)),
)


@given(
    groups=st.lists(st.tuples(_GROUP_TEXT, st.lists(_MEMBER, min_size=1, max_size=2)), max_size=3),
    questions=st.lists(
        st.frozensets(st.sampled_from(["battery", "voltage", "list", "kelvin", "σας", "a"])),
        max_size=5,
    ),
)
def test_group_names_answers_as_the_group_scores_do_however_often_asked(
    groups: list[tuple[str, list[tuple[dict[str, str], tuple[list[str], list[str]] | None]]]],
    questions: list[frozenset[str]],
) -> None:
    candidates = []
    for g, (action, members) in enumerate(groups):
        refs = tuple(
            ResultRef(
                f"t{g}", action, f"c{g}_{m}", None,
                None if cited is None else CompactCitation(columns=cited[0], result=cited[1]),
                order=m, arguments=arguments,
            )
            for m, (arguments, cited) in enumerate(members)
        )  # fmt: skip
        candidates.append(Candidate(f"t{g}", action, refs, None, 0))
    names = GroupNames(candidates)
    for named in questions:
        expected = any(
            group_score(
                named,
                c.action,
                [r.arguments for r in c.refs],
                [col for r in c.refs if r.citation is not None for col in r.citation.columns],
                [r.citation.result for r in c.refs if r.citation is not None],
            )
            > 0
            for c in candidates
        )
        assert names(named) == expected


def _oracle_texts(
    action: str, arguments: list[Any], columns: list[str], results: list[Any], bound: int
) -> list[str]:
    """The texts of a group as the rules give them, one value at a time: the action, the
    columns, then the string values (not keys) of the arguments and of the citations, depth
    first, at most `bound` of those from each argument set and each citation and none deeper
    than 8 levels; a citation's placeholder is dropped and its truncation marker removed."""
    strings: list[tuple[bool, str]] = []

    def walk(value: Any, depth: int, cited: bool, own: list[str]) -> None:
        if len(own) >= bound or depth > 8:
            return
        if isinstance(value, str):
            own.append(value)
            strings.append((cited, value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1, cited, own)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item, depth + 1, cited, own)

    for argument_set in arguments:
        walk(argument_set, 0, False, [])
    for result in results:
        walk(result, 0, True, [])
    texts = [action, *columns]
    for cited, text in strings:
        if not cited:
            texts.append(text)
        elif not re.fullmatch(r"<(?:dict|list) with \d+ (?:keys|items)>", text):
            texts.append(re.sub(r"…\[truncated \d+ chars\]$", "", text))
    return texts


_CITED_TEXT = st.sampled_from(
    [
        "<dict with 3 keys>",
        "<list with 12 items>",
        "<list with 12 items> ",
        "x<dict with 3 keys>",
        "Volt…[truncated 9 chars]",
        "Volt…[truncated 9 chars]\n",
        "Volt…[truncated 9 chars] then",
        "[truncated 9 chars]",
    ]
) | st.text(alphabet="ab<>[]…\n 9", max_size=8)
_JSON_VALUE = st.recursive(
    _CITED_TEXT | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none(),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=2).map(tuple)
        | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value, f"at {depth - level}"] if level % 2 else {"k": value}
    return value


@given(
    arguments=st.lists(
        st.dictionaries(
            st.text(max_size=2), _JSON_VALUE | st.integers(0, 12).map(_deep), max_size=3
        ),
        max_size=2,
    ),
    results=st.lists(_JSON_VALUE | st.integers(0, 12).map(_deep), max_size=3),
    bound=st.sampled_from([0, 1, 3, 7, 2000]),
)
@example(
    arguments=[{"a": "<list with 2 items>"}],
    results=[["<list with 12 items>", {"k": "<dict with 3 keys>"}, "V…[truncated 9 chars]\n"]],
    bound=2000,
)
def test_group_texts_are_the_string_values_depth_first_within_the_bound(
    arguments: list[dict[str, Any]], results: list[Any], bound: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(relevance, "_MAX_STRINGS", bound)
        texts = list(relevance._texts("act", arguments, ["col"], results))
    assert texts == _oracle_texts("act", arguments, ["col"], results, bound)


@pytest.mark.parametrize(("before", "read"), [(1_999, True), (2_000, False)])
def test_a_calls_first_2000_argument_strings_are_read_and_no_more(before: int, read: bool) -> None:
    subject = subject_words("export the temperature as csv")
    arguments = {"ids": [*(f"id{n}" for n in range(before)), "temperature"]}
    assert group_score(subject, "get_items", [arguments], [], []) == int(read)


def test_a_calls_many_arguments_leave_its_citation_words_read() -> None:
    # One call's 2,000 ids used the group's whole bound, so "temperature" in its citation
    # was never read and the named group lost to the newest.
    subject = subject_words("export the temperature as csv")
    ids = {"ids": [f"id{n}" for n in range(2_000)]}
    cited = [{"sensor": "temperature", "value": 1}]
    assert group_score(subject, "get_items", [ids], ["sensor", "value"], [cited]) == 1
    assert group_score(subject, "get_items", [ids, {"kind": "temperature"}], [], []) == 1
