"""A long user message costs time in proportion to its length (handlers/context.py).

Format detection and the passthrough rule judge a mention or a cue by the words just before
it. They read at most `CONTEXT_CHARS` characters there, cut at whitespace; where the words
they look at fit in that bound (every natural text), the judgement is the one the whole
text before the mention gives. Three patterns that searched from every position of a long
run are anchored where a match can start; each finds what the plain pattern finds.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers import formats, passthrough
from handlers.carry_forward import _QUESTION
from handlers.context import CONTEXT_CHARS, text_before
from handlers.excerpt import _TRAILING_UNIT, column_name_key
from handlers.formats import detect_format
from handlers.passthrough import is_derived_request

# Words the rules react to, and filler; none longer than 12 characters, so nine of them
# and their spaces always fit in the bound.
_WORDS = (
    "csv", "json", "xml", "xlsx", "excel", "spreadsheet", "pdf", "word", "docx", "markdown",
    "data.csv", "the", "a", "an", "to", "into", "as", "in", "from", "this", "my", "our",
    "attached", "not", "no", "never", "don't", "without", "instead", "of", "rather", "than",
    "but", "however", "and", "or", "then", "so", "create", "make", "export", "give", "convert",
    "get", "want", "need", "what", "is", "how", "do", "i", "explain", "better", "than",
    "analyze", "validate", "check", "please", "can", "you", "could", "would", "mind",
    "possible", "rows", "with", "errors", "users", "who", "logged", "sensors", "reporting",
    "forget", "only", "just", "average", "sum", "summarise", "total", "mean", "filter",
    "sorted", "by", "group", "top", "per", "hour", "raw", "data", "all", "hourly", "well",
    "such", "same", ",", ".", ";", ":", "?", "!", "-", "(", ")",
)  # fmt: skip
_SEPARATORS = st.sampled_from([" ", " ", " ", "  ", "\t", "\n", ""])
_TEXTS = st.lists(st.tuples(st.sampled_from(_WORDS), _SEPARATORS), max_size=90).map(
    lambda pairs: "".join(word + sep for word, sep in pairs)
)


def _whole_text_before(text: str, position: int, limit: int = 0) -> str:
    return text[:position]


# --- text_before -------------------------------------------------------------------------------


def test_text_before_a_position_within_the_bound_is_all_of_it() -> None:
    text = "x" * CONTEXT_CHARS + " csv"
    assert text_before(text, CONTEXT_CHARS) == "x" * CONTEXT_CHARS


def test_text_before_a_far_position_starts_at_whitespace_and_ends_at_the_position() -> None:
    text = "abc " * 100 + "csv"
    before = text_before(text, 400)
    assert len(before) <= CONTEXT_CHARS
    assert before == text[400 - len(before) : 400]
    assert before[0] == " "  # the word the bound fell in is left out whole


def test_text_before_holds_nothing_when_the_bound_falls_in_one_long_word() -> None:
    text = "make " + "x" * 500 + " csv"
    assert text_before(text, len(text) - 3) == " "
    assert text_before("make " + "x" * 500, 505) == ""


@given(st.text(alphabet="ab \n\u00a0", max_size=600), st.integers(min_value=0, max_value=600))
def test_text_before_is_a_bounded_suffix_of_the_text_before(text: str, position: int) -> None:
    position = min(position, len(text))
    before = text_before(text, position)
    assert text[:position].endswith(before)
    assert len(before) <= CONTEXT_CHARS
    if position > CONTEXT_CHARS and before:
        assert before[0].isspace()


# --- the rules read no further back than the bound --------------------------------------------


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_format_detection_judges_a_mention_as_the_whole_text_before_it_would(text: str) -> None:
    bounded = detect_format(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(formats, "text_before", _whole_text_before)
        patch.setattr(formats, "_last_words", lambda before: before)
        assert detect_format(text) == bounded


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_passthrough_judges_a_cue_as_the_whole_text_before_it_would(text: str) -> None:
    bounded = is_derived_request(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passthrough, "text_before", _whole_text_before)
        assert is_derived_request(text) == bounded


def test_a_negation_further_back_than_the_bound_does_not_refuse() -> None:
    near = "don't make " + "x" * 20 + " a csv"
    far = "don't make " + "x" * (CONTEXT_CHARS + 50) + " a csv"
    assert detect_format(near) is None
    assert detect_format(far) == "csv"


def test_a_conversion_target_far_into_a_long_message_is_still_found() -> None:
    text = "here is the export I described earlier " * 500 + "convert the json to xml"
    assert detect_format(text) == "xml"
    assert detect_format("don't " + text) == "xml"  # the negation is far from the mention


def test_a_long_message_of_mentions_keeps_the_first_mention_rule() -> None:
    assert detect_format("json csv " * 5000) == "json"
    assert detect_format("don't create json, " * 2000 + "create a csv") == "csv"


def test_a_derived_cue_far_into_a_long_message_is_still_derived() -> None:
    text = "export the rows as they are " * 500 + "and average them per hour"
    assert is_derived_request(text)
    assert not is_derived_request("export the rows as they are " * 500 + "as a csv")


# --- patterns anchored where a match can start -------------------------------------------------


@given(st.text(alphabet="ab .!?\n", max_size=60))
def test_question_search_finds_each_sentence_ending_in_a_question_mark(content: str) -> None:
    plain = re.compile(r"[^.!?\n]*\?")
    assert [m.span() for m in _QUESTION.finditer(content)] == [
        m.span() for m in plain.finditer(content)
    ]


@given(st.text(alphabet="a k \t()[]", max_size=30))
def test_trailing_unit_is_removed_as_the_plain_pattern_removes_it(name: str) -> None:
    plain = re.compile(r"\s*(?:\([^()]*\)|\[[^\[\]]*\])\s*$")
    assert _TRAILING_UNIT.sub("", name) == plain.sub("", name)


def test_column_name_with_a_long_run_of_spaces_keeps_its_unit_rule() -> None:
    assert column_name_key("Voltage" + " " * 5000 + "(V)") == column_name_key("Voltage (V)")
