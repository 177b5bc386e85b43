"""XML export: `<rows>`, one `<row>` per row, one element per column in column order.

Element names. Consumers parse with expat (Python's ElementTree, defusedxml), which knows
only the XML 1.0 4th-edition name characters, so a name keeps ASCII letters, digits, `_`,
`-`, `.` and the letters of the scripts in `_LETTERS` (all accepted by expat, checked in
the tests); every other character, `:` included (it would need a namespace), becomes `_`.
A name starting with a non-letter or with `xml` (reserved) gets a leading `_`; an empty
name is `_`. When the element name differs from the column name, the column name is kept
in a `name` attribute, so readers take `name` first and the tag otherwise.

Text. None is an empty element; scalars read as in the CSV file but never neutralised
(XML has no formulas); nested values are compact JSON. Characters XML 1.0 cannot hold
(controls other than tab, LF, CR; lone surrogates; U+FFFE, U+FFFF) are dropped, in text
and in `name`. CR is written as `&#13;` (and tab/LF inside `name` as references) because
parsers would otherwise normalise them away.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from handlers.serialisers import Cells, aligned, byte_chunks, each_row
from handlers.serialisers.csv_file import cell_text

# Letter ranges (inclusive) taken from XML 1.0 4th edition, Appendix B "BaseChar" and
# "Ideographic": Latin, Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai, Kana, CJK, Hangul.
_LETTERS: tuple[tuple[int, int], ...] = (
    (0x00C0, 0x00D6), (0x00D8, 0x00F6), (0x00F8, 0x00FF), (0x0100, 0x0131),
    (0x0134, 0x013E), (0x0141, 0x0148), (0x014A, 0x017E), (0x0180, 0x01C3),
    (0x01CD, 0x01F0), (0x01F4, 0x01F5), (0x01FA, 0x0217), (0x0250, 0x02A8),
    (0x0386, 0x0386), (0x0388, 0x038A), (0x038C, 0x038C), (0x038E, 0x03A1),
    (0x03A3, 0x03CE), (0x0401, 0x040C), (0x040E, 0x044F), (0x0451, 0x045C),
    (0x045E, 0x0481), (0x05D0, 0x05EA), (0x0621, 0x063A), (0x0641, 0x064A),
    (0x0905, 0x0939), (0x0E01, 0x0E2E), (0x1E00, 0x1E9B), (0x1EA0, 0x1EF9),
    (0x3041, 0x3094), (0x30A1, 0x30FA), (0x4E00, 0x9FA5), (0xAC00, 0xD7A3),
)  # fmt: skip
_LETTER_STARTS = tuple(first for first, _ in _LETTERS)
_ASCII_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_ASCII_NAME = _ASCII_START | frozenset("0123456789-.")

_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTRIBUTE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;",
     "\r": "&#13;"}
)  # fmt: skip


def _is_letter(char: str) -> bool:
    if char in _ASCII_START:
        return True
    code = ord(char)
    i = bisect_right(_LETTER_STARTS, code) - 1
    return i >= 0 and code <= _LETTERS[i][1]


def _is_name_char(char: str) -> bool:
    return char in _ASCII_NAME or _is_letter(char)


def safe_element_name(name: str) -> str:
    """An XML element name for a column: unusable characters → `_`, `_` before a bad start."""
    # NFC first so a letter typed as letter + combining accent stays one usable letter.
    composed = unicodedata.normalize("NFC", name)
    safe = "".join(char if _is_name_char(char) else "_" for char in composed) or "_"
    if not _is_letter(safe[0]) or safe[:3].lower() == "xml":
        safe = "_" + safe
    return safe


def xml_text(text: str) -> str:
    """Text escaped for element content, with characters XML 1.0 cannot hold dropped."""
    return _NOT_XML_CHAR.sub("", text).translate(_TEXT_ESCAPES)


def xml_chunks(
    columns: Sequence[str], rows: Iterable[Cells], *, chunk_size: int = 65536
) -> Iterator[bytes]:
    """`<rows><row>…</row></rows>`, safe element names, the original in `name` when changed."""
    return byte_chunks(_xml_texts(columns, each_row(rows)), chunk_size)


_PROLOGUE = '<?xml version="1.0" encoding="UTF-8"?>\n<rows>\n'
_EPILOGUE = "</rows>\n"


def least_bytes(columns: Sequence[str], row_count: int) -> int:
    """No XML file of these columns and this many rows is shorter: each row's element and,
    for every column, its empty element (no shorter than one with text)."""
    cells = sum(len(_tags(column)[2]) for column in columns)
    return len(_PROLOGUE) + len(_EPILOGUE) + row_count * (len("<row></row>\n") + cells)


def _xml_texts(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    tags = [_tags(column) for column in columns]
    yield _PROLOGUE
    for row in rows:
        parts = ["<row>"]
        for (start, end, empty), value in zip(tags, aligned(row, len(tags)), strict=True):
            text = xml_text(cell_text(value))
            parts.append(start + text + end if text else empty)
        parts.append("</row>\n")
        yield "".join(parts)
    yield _EPILOGUE


def _tags(column: str) -> tuple[str, str, str]:
    """Start tag, end tag and empty-element tag for one column."""
    tag = safe_element_name(column)
    attribute = ""
    if tag != column:
        attribute = ' name="' + _NOT_XML_CHAR.sub("", column).translate(_ATTRIBUTE_ESCAPES) + '"'
    return f"<{tag}{attribute}>", f"</{tag}>", f"<{tag}{attribute}/>"
