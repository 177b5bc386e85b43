"""A long user message costs time in proportion to its length (handlers/context.py).

Format detection and the passthrough rule judge a mention or a cue by the words just before
it. They read back from it only as far as those words lie (`words_before`), and the phrase
before a mention is cut out by bisection (`formats._Pieces`); the judgement is the one the
whole text before the mention gives, which the property tests below check against a reading
of the whole text. Three patterns that searched from every position of a long run are
anchored where a match can start; each finds what the plain pattern finds.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers import formats, passthrough
from handlers.carry_forward import _SENTENCE_END
from handlers.context import MAX_CONTEXT_CHARS, words_before
from handlers.excerpt import _TRAILING_UNIT, column_name_key
from handlers.formats import detect_format
from handlers.passthrough import is_derived_request

# Words the rules react to, filler, and what fills a clause without being a word: numbers,
# ids, a path, text in another script, long runs.
_WORDS = (
    "csv", "json", "xml", "xlsx", "excel", "spreadsheet", "pdf", "word", "docx", "markdown",
    "data.csv", "the", "a", "an", "to", "into", "as", "in", "from", "this", "my", "our",
    "attached", "uploaded", "not", "no", "never", "don't", "without", "instead", "of",
    "rather", "than", "but", "however", "and", "or", "then", "so", "create", "make", "export",
    "give", "convert", "get", "want", "need", "what", "is", "how", "do", "i", "explain",
    "better", "than", "analyze", "validate", "check", "please", "can", "you", "could", "would",
    "mind", "possible", "rows", "with", "errors", "users", "who", "logged", "sensors",
    "reporting", "forget", "only", "just", "average", "sum", "summarise", "total", "mean",
    "filter", "sorted", "by", "group", "top", "per", "hour", "raw", "data", "all", "hourly",
    "well", "such", "same", "have", "got", "already", "we", "we've", "they", "it", "them",
    "are", "stored", "currently", "some", "these", "sure", "make", "here's", "here", "is",
    ",", ".", ";", ":", "?", "!", "-", "(", ")", "->", "=>", "→", "1001", "1002",
    "2026-11-19", "5", "10-minute", "/mnt/exports/2026/readings.json", "日本語のテキスト",
    "report.csv.csv", "x-foo", "it's", "a'b'c", "actually", "sorry", "wait", "meant", "also",
    "too", "will", "i'll", "going", "compute",
    "1234567890" * 25, "a" * 260, "語" * 120,
)  # fmt: skip
_SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\t", "\n", "\u00a0", "\u3000", ",", ""])
_TEXTS = st.lists(st.tuples(st.sampled_from(_WORDS), _SEPARATORS), max_size=90).map(
    lambda pairs: "".join(word + sep for word, sep in pairs)
)


def _whole_clause_words(
    text: str,
    position: int,
    count: int,
    word: re.Pattern[str],
    clause: re.Pattern[str] | None = None,
) -> list[str]:
    before = text[:position]
    return word.findall((clause.split(before)[-1] if clause is not None else before).lower())


def _whole_phrase(self: formats._Pieces, position: int) -> str:
    return self.sentence[:position]


# --- words_before ------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_BREAK = re.compile(r"[,;:!?()\n]|\.\s")


def test_words_before_reads_back_until_it_holds_the_words_asked_for() -> None:
    text = "alpha beta " * 500 + "gamma delta"
    words = words_before(text, len(text), 3, _WORD)
    assert 3 <= len(words) < 200  # not the thousand words before
    assert words[-3:] == ["beta", "gamma", "delta"]


def test_words_before_reads_past_numbers_and_other_scripts_to_the_words() -> None:
    text = "don't send " + "1001 " * 300 + "語" * 500 + " as"
    assert words_before(text, len(text), 4, _WORD) == ["don't", "send", "as"]


def test_words_before_stops_at_the_clause_start() -> None:
    text = "make it, " + "1001 " * 600 + "then as"
    assert words_before(text, len(text), 9, _WORD, _BREAK) == ["then", "as"]


def test_words_before_does_not_read_past_its_bound() -> None:
    text = "don't send " + "1001 " * (MAX_CONTEXT_CHARS // 5 + 10) + "as"
    assert words_before(text, len(text), 9, _WORD) == ["as"]


def test_words_before_a_run_of_joined_mentions_longer_than_its_bound_holds_no_word() -> None:
    text = "don't " + "csv'" * (MAX_CONTEXT_CHARS // 2) + "csv"
    for position in (len(text), len(text) - 4, MAX_CONTEXT_CHARS + 100):
        assert words_before(text, position, 9, _WORD, _BREAK) == []
    # within the bound the whole run is one clause: its last joined words
    short = "send " + "csv'" * 100 + "csv"
    assert words_before(short, len(short), 2, _WORD) == _whole_clause_words(
        short, len(short), 2, _WORD
    )


@given(st.text(alphabet="ab' 1,.\n\u00a0-", max_size=700), st.integers(0, 700), st.integers(1, 12))
def test_words_before_are_the_last_words_of_the_whole_clause(
    text: str, position: int, count: int
) -> None:
    position = min(position, len(text))
    whole = _whole_clause_words(text, position, count, _WORD, _BREAK)
    read = words_before(text, position, count, _WORD, _BREAK)
    assert whole[len(whole) - len(read) :] == read
    assert len(read) >= min(count, len(whole))


# --- the rules judge as a reading of the whole text would --------------------------------------


@settings(max_examples=800, deadline=None)
@given(_TEXTS)
def test_the_rules_judge_each_mention_and_cue_as_the_whole_text_before_it_would(
    text: str,
) -> None:
    read = (detect_format(text), is_derived_request(text))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formats, "words_before", _whole_clause_words)
        patch.setattr(formats._Pieces, "phrase_before", _whole_phrase)
        patch.setattr(passthrough, "words_before", _whole_clause_words)
        assert (detect_format(text), is_derived_request(text)) == read


def _choice(*options: str) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


# The longest phrases the rules read before a mention: "I have a csv" and "the data is in
# json" at their fullest ("so we already have already got the new csv", "i'm sure that all
# the we have got the data already in a data.json": five words ahead of its subject are
# read), in pieces that each may be left out. Random words rarely line up so many in a
# row.
_POSSESSIONS = st.tuples(
    _choice("", "so ", "can ", "could ", "and "),
    _choice("i ", "we ", "they ", "you "),
    _choice("", "already ", "now ", "just "),
    _choice("have ", "'ve "),
    _choice("", "already ", "now ", "also "),
    _choice("", "got "),
    _choice("", "a ", "the ", "two ", "our "),
    _choice("", "new ", "sales ", "to "),
).map(lambda parts: "".join(parts).replace(" 've", "'ve"))
_HELD_IN = st.tuples(
    _choice("", "so ", "sure ", "can ", "make ", "check ", "i'm sure ", "please make sure ",
            "so be sure ", "i know "),
    _choice("", "that ", "all ", "the ", "that all the "),
    _choice("the data is ", "it's ", "rows are ", "we have got it ", "i've got the rows ",
            "they have them ", "we have my data ", "we have got the data "),
    _choice("", "already ", "currently ", "stored ", "all "),
    _choice("in ", "in a ", "in an ", "in data.", "in a data.", "as "),
).map("".join)  # fmt: skip
_PHRASES = st.tuples(
    _choice("", "ok ", "here is the thing: ", "1001 2026-11-19 "),
    st.one_of(_POSSESSIONS, _HELD_IN),
    _choice("csv", "json", "xml", "excel"),
    _choice("", ", make it xml", ". Convert it to json", " please", "?"),
).map("".join)


def _detects_as_the_whole_text_would(text: str) -> None:
    read = detect_format(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formats._Pieces, "phrase_before", _whole_phrase)
        assert detect_format(text) == read


@settings(max_examples=600, deadline=None)
@given(_PHRASES)
def test_the_longest_phrases_before_a_mention_judge_as_the_whole_text_would(text: str) -> None:
    _detects_as_the_whole_text_would(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # seven and eight pieces before the mention: what the user holds is the input
        ("so I have already got a new csv", None),
        ("so we already have already got the new csv, make it xml", "xml"),
        # eight, and nine with the mention inside a tenth: where the data already is
        ("well we have got the data already in json, convert it to xml", "xml"),
        ("so we have got the data already in a data.json, convert it to xml", "xml"),
        ("can we have it already in json?", "json"),  # asked for, not held
        # fourteen: the word ahead of "sure" says who is sure (the words are only counted)
        ("i'm sure that all the we have got the data already in a data.json, make xml", "xml"),
        ("make sure that all the we have got the data already in a data.json", "json"),
    ],
)
def test_what_the_user_holds_is_read_however_many_words_say_it(
    text: str, expected: str | None
) -> None:
    assert detect_format(text) == expected


# Formats joined by arrows, spaced or not, among a few words: a target right after an arrow
# with nothing between is read as the whole text would read it.
_ARROW_TEXTS = st.lists(
    st.tuples(
        _choice("csv", "json", "xml", "excel", "data.csv", "a", "to", "not", "convert", "1001"),
        _choice("->", " -> ", "=>", "\u2192", " \u21d2 ", " ", "", ", ", "."),
    ),
    max_size=12,
).map(lambda pairs: "".join(word + sep for word, sep in pairs))


@settings(max_examples=600, deadline=None)
@given(_ARROW_TEXTS)
def test_a_target_after_an_arrow_is_judged_as_the_whole_text_would(text: str) -> None:
    _detects_as_the_whole_text_would(text)


@pytest.mark.parametrize("unit", ["csv->", "json->data.", "xml\u2192json=>"])
def test_a_piece_of_joined_arrows_is_not_read_again_for_each_mention(unit: str) -> None:
    # One piece holding thousands of mentions: each one's phrase is its arrow on, not the
    # piece from its start (which made the message's cost grow with its length squared).
    text = unit * 2000
    pieces = formats._Pieces(text)
    phrases = [pieces.phrase_before(m.start) for m in formats._mentions(text)]
    assert len(phrases) >= 2000
    assert max(len(p or "") for p in phrases) <= len("->data.")


def test_a_mention_glued_to_another_script_is_read_as_its_own_letters() -> None:
    # "CSVで" names csv; what is read after a mention stops at its letters, so a run of
    # glued mentions is not read to its end from each one (a cost of its length squared).
    assert detect_format("CSV\u3067" * 3) == "csv"
    glued = "CSV\u3067JSON\u3067 instead"
    assert formats._INSTEAD_AFTER.match(glued, 0) is None
    assert formats._ADDED_AFTER.match("CSV\u3067JSON\u3067 too", 0) is None
    assert formats._INSTEAD_AFTER.match("JSON file instead", 0) is not None


_NUMBERS = " ".join(str(n) for n in range(1001, 1046))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Please don't export sensors {_NUMBERS} as json, I need xml", "xml"),
        (f"Don't send the readings {_NUMBERS} as json", None),
        ("Don't send /mnt/exports/2026/11/19/" + "1000000/" * 28 + "readings.json again", None),
        ("Don't send " + "日本語" * 72 + " as json", None),
        ("export it " + "1001 " * 60 + "as data.csv", "csv"),
        ("export it " + "1001 " * 60 + "as 1.csv,csv", "csv"),
    ],
)
def test_a_negation_or_target_behind_numbers_paths_or_other_scripts_is_read(
    text: str, expected: str | None
) -> None:
    assert detect_format(text) == expected


def test_the_phrase_before_a_mention_holds_the_word_before_its_preposition() -> None:
    # "well as": a comparison, not a target, so the first mention wins; four pieces back
    assert detect_format("send the json well as a data.csv") == "json"


def test_a_negation_eight_words_back_behind_numbers_past_the_first_window_refuses() -> None:
    # the first 256 characters hold six words; the window grows to the negation
    assert detect_format("don't alpha " + "1001 " * 50 + "b c d e f g csv") is None


@pytest.mark.parametrize(
    "text",
    [
        "knot" + " 1001" * 49 + " x y zz average",  # the first window starts inside "knot"
        "1 " + "q" * 300 + "ab'cd'no x y z average",  # ... inside "q...ab'cd", then "no"
    ],
)
def test_a_window_starting_inside_a_word_reads_no_part_of_it(text: str) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passthrough, "words_before", _whole_clause_words)
        whole = is_derived_request(text)
    assert is_derived_request(text) == whole


def test_a_long_message_of_mentions_keeps_the_first_mention_rule() -> None:
    assert detect_format("json csv " * 5000) == "json"
    assert detect_format("don't create json, " * 2000 + "create a csv") == "csv"
    assert detect_format("here is what I described " * 500 + "convert the json to xml") == "xml"


def test_a_negated_derived_cue_behind_numbers_is_not_derived() -> None:
    assert not is_derived_request(f"export the readings without sensors {_NUMBERS} sorted")
    assert is_derived_request("export the rows as they are " * 500 + "and average them per hour")
    assert is_derived_request("create a csv per 5" + " " * 3000 + "minutes")


# --- patterns anchored where a match can start -------------------------------------------------


def _sentences(content: str) -> list[str]:
    """The plain reading: a sentence ends after "!", "?" or a newline, and at a "." that a
    space follows and then anything but a lower-case letter (the "." is dropped)."""
    pieces, current = [], ""
    for at, char in enumerate(content):
        after = content[at + 1 :]
        if char == "." and after[:1].isspace() and not after.lstrip()[:1].islower():
            pieces.append(current)
            current = ""
            continue
        current += char
        if char in "!?\n":
            pieces.append(current)
            current = ""
    return [*pieces, current]


@given(st.text(alphabet="aB1 .!?\n\t", max_size=60))
def test_sentences_end_where_the_plain_reading_ends_them(content: str) -> None:
    assert _SENTENCE_END.split(content) == _sentences(content)


@given(st.text(alphabet="a k \t()[]", max_size=30))
def test_trailing_unit_is_removed_as_the_plain_pattern_removes_it(name: str) -> None:
    plain = re.compile(r"\s*(?:\([^()]*\)|\[[^\[\]]*\])\s*$")
    assert _TRAILING_UNIT.sub("", name) == plain.sub("", name)


def test_column_name_with_a_long_run_of_spaces_keeps_its_unit_rule() -> None:
    assert column_name_key("Voltage" + " " * 5000 + "(V)") == column_name_key("Voltage (V)")
