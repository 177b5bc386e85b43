"""Header names every format can use: none blank, none equal to another ignoring case.

The user's own names win: the first occurrence of a name is always kept, and every name
made up here (`Column N` for a blank, `name 2` for a repeat) skips any name that appears
anywhere in the input, so no made-up name can push a real one aside. Case is compared
with `str.casefold`, the Unicode caseless match.
"""

from __future__ import annotations

from collections.abc import Sequence


def unique_headers(columns: Sequence[str]) -> list[str]:
    """Usable names: blank → 'Column N' (1-based), case-insensitive repeats get ' 2', ' 3', …"""
    reserved = {name.casefold() for name in columns if name.strip()}
    taken: set[str] = set()
    # Per base (case-folded), the last number tried: a base's numbers are taken in order,
    # so the next repeat starts there, not at " 2" again (n repeats cost n, not n²).
    last_tried: dict[str, int] = {}
    result = []
    for position, name in enumerate(columns, start=1):
        if name.strip() and name.casefold() not in taken:
            candidate = name
        else:
            base = name if name.strip() else f"Column {position}"
            n = last_tried.get(base.casefold(), 1)
            candidate = base if n == 1 else f"{base} {n}"
            while candidate.casefold() in taken or candidate.casefold() in reserved:
                n += 1
                candidate = f"{base} {n}"
            last_tried[base.casefold()] = n
        taken.add(candidate.casefold())
        result.append(candidate)
    return result
