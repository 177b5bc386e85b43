"""docs/contract/files.md, XML: an element name keeps every character the parser accepts.

The tables in `handlers/serialisers/xml_names.py` are expat's answers; here expat is asked
again, code point by code point, so a parser that reads names otherwise fails this test.
"""

from __future__ import annotations

import xml.parsers.expat
from collections.abc import Callable

import pytest

from handlers.serialisers.xml_file import safe_element_name, xml_chunks
from handlers.serialisers.xml_names import NAME_RANGES, NAME_START_RANGES


def _parses(document: str) -> bool:
    parser = xml.parsers.expat.ParserCreate("UTF-8")
    try:
        parser.Parse(document.encode("utf-8", "surrogatepass"), True)
    except xml.parsers.expat.ExpatError:
        return False
    return True


def _ranges(accepted: Callable[[str], bool]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    for code in range(0x80, 0x10000):
        if 0xD800 <= code <= 0xDFFF or not accepted(chr(code)):
            continue
        if found and found[-1][1] == code - 1:
            found[-1] = (found[-1][0], code)
        else:
            found.append((code, code))
    return found


def test_the_name_start_table_is_what_expat_accepts_first_in_a_name() -> None:
    assert list(NAME_START_RANGES) == _ranges(lambda char: _parses(f"<{char}/>"))


def test_the_name_table_is_what_expat_accepts_after_a_first_letter() -> None:
    assert list(NAME_RANGES) == _ranges(lambda char: _parses(f"<a{char}/>"))


def test_no_character_past_the_basic_plane_is_kept_in_a_name() -> None:
    assert not _parses("<\U00010400/>") and not _parses("<a\U00010400/>")
    assert safe_element_name("a\U00010400") == "a_"


@pytest.mark.parametrize(
    ("column", "tag"),
    [
        ("სახელი", "სახელი"),  # Georgian
        ("Բարեւ", "Բարեւ"),  # Armenian
        ("Բարև", "Բար_"),  # its ligature of ե and ւ is not a name character
        ("नमस्ते", "नमस्ते"),  # Devanagari, with its combining vowel signs
        ("temp·max", "temp·max"),  # an extender
        ("x١", "x١"),  # an Arabic-Indic digit after a letter
        ("١x", "_١x"),  # a digit cannot start a name
        ("°C", "_C"),
    ],
)
def test_letters_marks_digits_and_extenders_of_any_listed_script_stay(
    column: str, tag: str
) -> None:
    assert safe_element_name(column) == tag
    data = b"".join(xml_chunks([column], [["v"]]))
    assert _parses(data.decode("utf-8"))
