"""Text measured the way the stores and file formats count it."""

from __future__ import annotations


def utf16_units(text: str) -> int:
    """The length in UTF-16 code units: a code point past U+FFFF counts two. Blob Storage
    counts a blob name's characters so, and Excel a cell's."""
    return len(text.encode("utf-16-le")) // 2
