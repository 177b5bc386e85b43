"""What a pasted cell shows, as keys an action value can share (excerpt matching:
docs/contract/decision.md step 7).

A table cell shows an action value when the two share a key:

- text: trimmed, case-folded, inner whitespace collapsed;
- number: the cell is a number (a currency symbol may lead it; thousands grouped by `,`
  `_` or a space allowed, then optionally a unit of at most 6 letters or a symbol such as
  `%` or `°C`, with or without a space) and the value equals it or rounds to it, half-up
  or half-even, at the decimals shown;
- date-time: the cell is a date, `T` or a space, a time (seconds and fraction optional),
  then `Z`, an offset or nothing (UTC), and the value is the same instant cut to the
  precision shown;
- boolean: the cell is true/false/yes/no and the value is that boolean;
- nothing: the cell is a marker of no value (`null`, `none`, `n/a`, a dash) and the value is
  missing, null or empty;
- a cut text: the cell ends in an ellipsis (`...`, `…`), and the value's text is longer
  than what is shown before it and begins with it (a bare ellipsis: any value not empty);
- a Markdown link (`[text](target)`) shows what its text shows.

A column's `Readings` say which decimals, date-time precisions and offsets its cells use,
so an action value is read only the ways the column needs. Action values stream past one a
row, so their reading takes fast paths: a float is checked against the column's scaled
numbers before any exact decimal arithmetic, an ISO date-time is parsed by the C parser.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Final

import msgspec

from handlers.rows import cell_text

_SPACES: Final = " \u00a0\u202f"
_NUMBER: Final = re.compile(
    # a currency symbol may lead, before or after the sign ("$12.50", "-$3.20", "€ 1,234")
    rf"(?:[$€£¥][{_SPACES}]?(?=[+\-\u2212]))?(?P<sign>[+\-\u2212])?(?:[$€£¥][{_SPACES}]?)?"
    rf"(?P<int>\d{{1,3}}(?P<sep>[,_{_SPACES}])\d{{3}}(?:(?P=sep)\d{{3}})*|\d+)"
    r"(?:\.(?P<frac>\d+))?"
    rf"(?:[{_SPACES}]?(?:[^\W\d_]{{1,6}}(?:/[^\W\d_]{{1,6}})?|%|‰|°[^\W\d_]{{0,2}}|[$€£¥]))?"
)
_SEPARATORS: Final = re.compile(rf"[,_{_SPACES}]")
_DATE_TIME: Final = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[Tt ](?P<h>\d{2}):(?P<mi>\d{2})"
    r"(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r" ?(?:(?P<z>[Zz]|UTC)|(?P<off>[+\-\u2212]\d{2}:?\d{2}))?"
)
_DATE_OR_TIME: Final = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?")
_BOOLEANS: Final = {"true": True, "false": False, "yes": True, "no": False}
# A whole cell that is a Markdown link: its text, then its target (no space, no parenthesis).
_LINK: Final = re.compile(r"\[(?P<text>[^\[\]]+)\]\([^()\s]*\)")
# What a model writes for a missing or null value.
_NOTHING: Final = frozenset({"null", "none", "n/a", "-", "\u2013", "\u2014"})
# What ends a cut text ("Sensor reading abo…"); alone, it elides the whole value.
_ELLIPSES: Final = ("...", "\u2026")
_ROUNDINGS: Final = (ROUND_HALF_UP, ROUND_HALF_EVEN)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH: Final = datetime(1970, 1, 1)  # a date-time without a zone means UTC
_ONE_US: Final = timedelta(microseconds=1)
_MINUTE_US: Final = 60_000_000

Key = tuple[Any, ...]


class Readings(msgspec.Struct, frozen=True):
    """How a column's cells may be read: decimals shown, date-time precisions, booleans."""

    decimals: frozenset[int] = frozenset()
    # Each number shown, scaled to an integer at its decimals: a cheap first test for floats.
    scaled: frozenset[tuple[int, int]] = frozenset()
    instants: frozenset[tuple[int, int]] = frozenset()  # (precision µs, UTC offset µs)
    booleans: bool = False
    cuts: frozenset[int] = frozenset()  # the lengths of text shown before an ellipsis

    @property
    def kind_rank(self) -> int:
        """How selective and cheap the column is to look rows up by: text best, booleans last."""
        if self.booleans:
            return 0
        if self.decimals:
            return 1
        return 2 if self.instants else 3


def merged(readings: Iterable[Readings]) -> Readings:
    """The readings of a whole column."""
    parts = list(readings)
    return Readings(
        frozenset().union(*(r.decimals for r in parts)),
        frozenset().union(*(r.scaled for r in parts)),
        frozenset().union(*(r.instants for r in parts)),
        any(r.booleans for r in parts),
        frozenset().union(*(r.cuts for r in parts)),
    )


def text_key(text: str) -> Key:
    """The text reading: trimmed, inner whitespace collapsed, case-folded."""
    return ("t", " ".join(text.split()).casefold())


_EMPTY: Final = text_key("")


def cell_keys(text: str) -> tuple[frozenset[Key], Readings]:
    """The keys a table cell shows, and the readings its column must offer action values."""
    shown = text.strip()
    link = _LINK.fullmatch(shown) if shown.startswith("[") else None
    if link is not None:
        # A Markdown link shows its text ("[sat-07](https://...)" shows "sat-07"), and
        # still the whole, as any cell does.
        inner, readings = cell_keys(link["text"])
        return inner | {text_key(shown)}, readings
    keys = {text_key(shown)}
    decimals: set[int] = set()
    scaled: set[tuple[int, int]] = set()
    instants: set[tuple[int, int]] = set()
    number = _number(shown)
    if number is not None:
        value, places = number
        keys.add(("n", places, value))
        decimals.add(places)
        scaled.add((places, int(value.scaleb(places))))
    instant = _instant(shown)
    if instant is not None:
        at, precision, offset = instant
        keys.add(("d", precision, offset, (at + offset) // precision))
        instants.add((precision, offset))
    folded = shown.casefold()
    flag = _BOOLEANS.get(folded)
    if flag is not None:
        keys.add(("b", flag))
    if folded in _NOTHING:
        keys.add(_EMPTY)
    cuts: frozenset[int] = frozenset()
    if shown.endswith(_ELLIPSES):
        # A bare ellipsis in a row of values is a cut of everything: a value elided.
        _, before = text_key(shown.removesuffix("...").removesuffix("\u2026"))
        keys.add(("c", before))
        cuts = frozenset({len(before)})
    readings = Readings(
        frozenset(decimals), frozenset(scaled), frozenset(instants), flag is not None, cuts
    )
    return frozenset(keys), readings


def shows_a_value(text: str) -> bool:
    """Whether a cell shows a value (a number, a date, a time, a date-time, a boolean), not
    words."""
    shown = text.strip()
    return (
        _NUMBER.fullmatch(shown) is not None
        or _DATE_TIME.fullmatch(shown) is not None
        or _DATE_OR_TIME.fullmatch(shown) is not None
        or shown.casefold() in _BOOLEANS
    )


def value_keys(value: Any, readings: Readings) -> list[Key]:
    """The keys an action value shows at the readings a column offers."""
    keys: list[Key] = [text_key(value if isinstance(value, str) else cell_text(value))]
    if readings.cuts:
        whole = keys[0][1]
        keys.extend(("c", whole[:length]) for length in readings.cuts if len(whole) > length)
    if isinstance(value, bool):
        if readings.booleans:
            keys.append(("b", value))
        return keys
    if readings.decimals:
        keys.extend(_number_keys(value, readings))
    if readings.instants and isinstance(value, str):
        at = _value_instant(value)
        if at is not None:
            keys.extend(
                ("d", precision, offset, (at + offset) // precision)
                for precision, offset in readings.instants
            )
    return keys


def cell_matches(text: str, value: Any) -> bool:
    """Whether a table cell shows an action value (text, number, date-time or boolean)."""
    keys, readings = cell_keys(text)
    return not keys.isdisjoint(value_keys(value, readings))


# --- numbers -----------------------------------------------------------------------------
def _number(text: str) -> tuple[Decimal, int] | None:
    """The number a cell shows and its decimals, or None."""
    found = _NUMBER.fullmatch(text)
    if found is None:
        return None
    sign = "-" if found.group("sign") in ("-", "\u2212") else ""
    digits = _SEPARATORS.sub("", found.group("int"))
    fraction = found.group("frac") or ""
    value = Decimal(f"{sign}{digits}.{fraction}" if fraction else f"{sign}{digits}")
    return value, len(fraction)


def _number_keys(value: Any, readings: Readings) -> list[Key]:
    if isinstance(value, float):
        if not math.isfinite(value):
            return []
        # A float far from every number shown cannot round to one: skip the exact check.
        # Past a float's 17 significant digits (and before 10.0**places overflows, at 309)
        # the exact check decides alone.
        near = [
            places
            for places in readings.decimals
            if places > _FLOAT_DIGITS or _near(value * 10.0**places, places, readings.scaled)
        ]
        if not near:
            return []
        exact = Decimal(repr(value))
        return [key for places in near for key in _rounded(exact, places)]
    if isinstance(value, int):
        return [("n", places, Decimal(value)) for places in readings.decimals]
    if isinstance(value, str):
        number = _number(value.strip())
        if number is not None:
            return [key for places in readings.decimals for key in _rounded(number[0], places)]
    return []


_FLOAT_DIGITS = 17


def _near(scaled: float, places: int, shown: frozenset[tuple[int, int]]) -> bool:
    if abs(scaled) > 1e15:  # beyond a float's integer precision: let the exact check decide
        return True
    whole = math.floor(scaled + 0.5)
    return any((places, whole + step) in shown for step in (-1, 0, 1))


def _rounded(exact: Decimal, places: int) -> list[Key]:
    quantum = Decimal(1).scaleb(-places)
    try:
        return [("n", places, exact.quantize(quantum, rounding=mode)) for mode in _ROUNDINGS]
    except InvalidOperation:  # more digits than the context holds: not a shown number
        return []


# --- date-times --------------------------------------------------------------------------
def _instant(text: str) -> tuple[int, int, int] | None:
    """(µs since the epoch, precision in µs, UTC offset in µs) of a shown date-time, or None."""
    found = _DATE_TIME.fullmatch(text)
    if found is None:
        return None
    offset = 0
    if found.group("off"):
        raw = found.group("off").replace("\u2212", "-").replace(":", "")
        minutes = int(raw[1:3]) * 60 + int(raw[3:5])
        offset = (-minutes if raw[0] == "-" else minutes) * _MINUTE_US
    fraction = (found.group("f") or "")[:6]
    if found.group("f") is not None:
        precision = 10 ** (6 - len(fraction))
    elif found.group("s") is not None:
        precision = 1_000_000
    else:
        precision = _MINUTE_US
    try:
        local = datetime(
            int(found.group("y")),
            int(found.group("mo")),
            int(found.group("d")),
            int(found.group("h")),
            int(found.group("mi")),
            int(found.group("s") or 0),
            int(fraction.ljust(6, "0")),
            tzinfo=UTC,
        )
    except ValueError:
        return None
    return (local - _EPOCH) // _ONE_US - offset, precision, offset


def _value_instant(value: str) -> int | None:
    """µs since the epoch of an action value that is a date-time, or None."""
    text = value.strip()
    # An ISO date-time with a time part: the C parser reads it (naive means UTC).
    if len(text) >= 16 and text[4] == "-" and text[10] in "Tt ":
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            since = at - (_NAIVE_EPOCH if at.tzinfo is None else _EPOCH)
            # Integer fields, not timedelta division: this runs once per action row.
            return (since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds
    instant = _instant(text)
    return None if instant is None else instant[0]
