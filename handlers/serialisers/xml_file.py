"""XML export: `<rows>`, one `<row>` per row, one element per column in column order.

Element names. Consumers parse with expat (Python's ElementTree, defusedxml), which knows
the XML 1.0 4th-edition name characters, so a name keeps ASCII letters, digits, `_`, `-`,
`.` and the characters past ASCII expat accepts (`xml_names`: letters of every script it
lists, combining marks, other digits, extenders); every other character, `:` included (it
would need a namespace), becomes `_`. A name starting with a character that may not start
one, or with `xml` (reserved), gets a leading `_`; an empty name is `_`. When the element
name differs from the column name, the column name is kept in a `name` attribute, so readers
take `name` first and the tag otherwise.

Text. None is an empty element; scalars read as in the CSV file but never neutralised
(XML has no formulas); nested values are compact JSON. Characters XML 1.0 cannot hold
(controls other than tab, LF, CR; lone surrogates; U+FFFE, U+FFFF) are dropped, in text
and in `name`. CR is written as `&#13;` (and tab/LF inside `name` as references) because
parsers would otherwise normalise them away.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from handlers.serialisers import Cells, aligned, byte_chunks, each_row
from handlers.serialisers.csv_file import cell_text
from handlers.serialisers.xml_names import may_be_in_a_name, may_start_a_name

_ASCII_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_ASCII_NAME = _ASCII_START | frozenset("0123456789-.")

_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTRIBUTE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;",
     "\r": "&#13;"}
)  # fmt: skip


def _may_start(char: str) -> bool:
    """Whether the character may start an element name."""
    return char in _ASCII_START or (char > "\x7f" and may_start_a_name(ord(char)))


def _is_name_char(char: str) -> bool:
    return char in _ASCII_NAME or (char > "\x7f" and may_be_in_a_name(ord(char)))


def safe_element_name(name: str) -> str:
    """An XML element name for a column: unusable characters → `_`, `_` before a bad start."""
    # NFC first so a letter typed as letter + combining accent stays one usable letter.
    composed = unicodedata.normalize("NFC", name)
    safe = "".join(char if _is_name_char(char) else "_" for char in composed) or "_"
    if not _may_start(safe[0]) or safe[:3].lower() == "xml":
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
