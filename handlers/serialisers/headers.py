"""Column names each format can use.

CSV and XLSX headers (`unique_headers`): none blank, none equal to another ignoring case,
as a spreadsheet's reader needs them. JSON keys and XML columns (`distinct_keys`) are the
keys as retrieved: "amount" beside "Amount" and a blank key stay as they are, and only a
name given twice exactly (a pasted table's header can repeat one) is made distinct.

The user's own names win: the first occurrence of a name is always kept, and every name
made up here (`Column N` for a blank, `name 2` for a repeat) skips any name that appears
anywhere in the input, so no made-up name can push a real one aside. Case is compared
with `str.casefold`, the Unicode caseless match.

A format that changes a name as it writes it (CSV's formula guard, XLSX's cell limit) passes
that as `shown`: names are compared as the file shows them, and a made-up suffix is given
to `shown` apart from its base, so a format that cuts a name can keep the suffix whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from schemas.text import utf16_units

XLSX_CELL_UNITS: Final = 32_767  # UTF-16 units an XLSX cell holds


# How a file shows a name: (base, made-up suffix, "" for none) → the name as written.
Shown = Callable[[str, str], str]


def _joined(base: str, suffix: str) -> str:
    return base + suffix


def _same(name: str) -> str:
    return name


def unique_headers(columns: Sequence[str], shown: Shown | None = None) -> list[str]:
    """Usable names: blank → 'Column N' (1-based), case-insensitive repeats get ' 2', ' 3', …

    With `shown` (CSV's formula guard, XLSX's cell limit), names are compared, and returned,
    as the file shows them: a blank is one before it is shown, and a made-up name is shown
    before it is compared ("-1" is a number, "-1 2" needs the guard)."""
    return _distinct(columns, str.casefold, keep_blank=False, shown=shown or _joined)


def xlsx_header(base: str, suffix: str) -> str:
    """A header name as a sheet shows it: cut to a cell's limit, and a made-up suffix (" 2")
    kept whole by cutting the base further, so names unique before the cut stay so."""
    room = XLSX_CELL_UNITS - len(suffix)  # a suffix is ASCII: one unit a character
    if len(base) > room // 2 and utf16_units(base) > room:
        base = utf16_prefix(base, room)
    return base + suffix


def utf16_prefix(text: str, units: int) -> str:
    """The longest prefix of at most `units` UTF-16 units, no character split."""
    length = 0
    for index, char in enumerate(text):
        length += 2 if ord(char) > 0xFFFF else 1
        if length > units:
            return text[:index]
    return text


def distinct_keys(columns: Sequence[str]) -> list[str]:
    """The names as given; a repeat of an earlier name (exactly) gets ' 2', ' 3', …, and a
    repeated blank 'Column N'."""
    return _distinct(columns, _same, keep_blank=True)


def _distinct(
    columns: Sequence[str],
    fold: Callable[[str], str],
    *,
    keep_blank: bool,
    shown: Shown = _joined,
) -> list[str]:
    shown_names = [shown(name, "") for name in columns]
    reserved = {fold(seen) for name, seen in zip(columns, shown_names, strict=True) if name.strip()}
    taken: set[str] = set()
    # Per base (folded), the last number tried: a base's numbers are taken in order, so the
    # next repeat starts there, not at " 2" again (n repeats cost n, not n²).
    last_tried: dict[str, int] = {}
    result = []
    for position, (name, seen) in enumerate(zip(columns, shown_names, strict=True), start=1):
        usable = keep_blank or bool(name.strip())
        if usable and fold(seen) not in taken:
            candidate = seen
        else:
            base = name if name.strip() else f"Column {position}"
            n = last_tried.get(fold(base), 1)
            candidate = shown(base, "" if n == 1 else f" {n}")
            while fold(candidate) in taken or fold(candidate) in reserved:
                n += 1
                candidate = shown(base, f" {n}")
            last_tried[fold(base)] = n
        taken.add(fold(candidate))
        result.append(candidate)
    return result
