"""Column names each format can use.

CSV and XLSX headers (`unique_headers`): none blank, none equal to another ignoring case,
as a spreadsheet's reader needs them. JSON keys and XML columns (`distinct_keys`) are the
keys as retrieved: "amount" beside "Amount" and a blank key stay as they are, and only a
name given twice exactly (a pasted table's header can repeat one) is made distinct.

The user's own names win: the first occurrence of a name is always kept, and every name
made up here (`Column N` for a blank, `name 2` for a repeat) skips any name that appears
anywhere in the input, so no made-up name can push a real one aside. Case is compared
with `str.casefold`, the Unicode caseless match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def unique_headers(columns: Sequence[str]) -> list[str]:
    """Usable names: blank → 'Column N' (1-based), case-insensitive repeats get ' 2', ' 3', …"""
    return _distinct(columns, str.casefold, keep_blank=False)


def distinct_keys(columns: Sequence[str]) -> list[str]:
    """The names as given; a repeat of an earlier name (exactly) gets ' 2', ' 3', …, and a
    repeated blank 'Column N'."""
    return _distinct(columns, _same, keep_blank=True)


def _same(name: str) -> str:
    return name


def _distinct(columns: Sequence[str], fold: Callable[[str], str], *, keep_blank: bool) -> list[str]:
    reserved = {fold(name) for name in columns if name.strip()}
    taken: set[str] = set()
    # Per base (folded), the last number tried: a base's numbers are taken in order, so the
    # next repeat starts there, not at " 2" again (n repeats cost n, not n²).
    last_tried: dict[str, int] = {}
    result = []
    for position, name in enumerate(columns, start=1):
        usable = keep_blank or bool(name.strip())
        if usable and fold(name) not in taken:
            candidate = name
        else:
            base = name if name.strip() else f"Column {position}"
            n = last_tried.get(fold(base), 1)
            candidate = base if n == 1 else f"{base} {n}"
            while fold(candidate) in taken or fold(candidate) in reserved:
                n += 1
                candidate = f"{base} {n}"
            last_tried[fold(base)] = n
        taken.add(fold(candidate))
        result.append(candidate)
    return result
