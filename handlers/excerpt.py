"""Excerpt matching (SPEC 5.7): whether a reply table only shows rows the actions returned.

Models paste excerpts loosely, so a table cell shows an action value when any of these holds:

- text: trimmed, case-folded, inner whitespace collapsed, the two are equal;
- number: the cell is a number (thousands grouped by `,` `_` or a space allowed, then
  optionally a unit of at most 6 letters or a symbol such as `%` or `°C`, with or without a
  space) and the value equals it or rounds to it, half-up or half-even, at the decimals shown;
- date-time: the cell is a date, `T` or a space, a time (seconds and fraction optional),
  then `Z`, an offset or nothing (UTC), and the value is the same instant cut to the
  precision shown;
- boolean: the cell is true/false/yes/no and the value is that boolean.

Each cell therefore has a small set of *keys* (its text, and its number, date-time or
boolean reading), and an action value has the keys it would have at each precision a
column shows. A cell shows a value when the two share a key. Action rows stream past one
at a time; the table is indexed on its most selective column, so a row costs a few dict
look-ups however long the dataset is. The streaming pass lives in `handlers.dataset`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any, Final

from handlers.rows import Row, cell_text, normalize_key
from handlers.tables import Table

_SPACES: Final = " \u00a0\u202f"
_NUMBER: Final = re.compile(
    rf"(?P<sign>[+\-\u2212])?"
    rf"(?P<int>\d{{1,3}}(?P<sep>[,_{_SPACES}])\d{{3}}(?:(?P=sep)\d{{3}})*|\d+)"
    r"(?:\.(?P<frac>\d+))?"
    rf"(?:[{_SPACES}]?(?:[^\W\d_]{{1,6}}(?:/[^\W\d_]{{1,6}})?|%|‰|°[^\W\d_]{{0,2}}|[$€£¥]))?"
)
_DATE_TIME: Final = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[Tt ](?P<h>\d{2}):(?P<mi>\d{2})"
    r"(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r" ?(?:(?P<z>[Zz]|UTC)|(?P<off>[+\-\u2212]\d{2}:?\d{2}))?"
)
_BOOLEANS: Final = {"true": True, "false": False, "yes": True, "no": False}
_ROUNDINGS: Final = (ROUND_HALF_UP, ROUND_HALF_EVEN)
_TRAILING_UNIT: Final = re.compile(r"\s*(?:\([^()]*\)|\[[^\[\]]*\])\s*$")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US: Final = timedelta(microseconds=1)
_MINUTE_US: Final = 60_000_000
# Past this many distinct row keys the name cache stops growing (rows keyed by ids).
_NAME_CACHE_LIMIT: Final = 4096

Key = tuple[Any, ...]


def column_name_key(name: str) -> str:
    """A column name as compared: no trailing unit in brackets, case and punctuation ignored."""
    bare = normalize_key(_TRAILING_UNIT.sub("", name))
    return bare or normalize_key(name)


def has_table_columns(table: Table, action_columns: Collection[str]) -> bool:
    """Whether every table column is an action column (ignoring case, punctuation, units)."""
    names = {column_name_key(column) for column in action_columns}
    return all(column_name_key(column) in names for column in table.columns)


# --- what a cell shows -----------------------------------------------------------------


@dataclass(frozen=True)
class _Readings:
    """The readings one column's cells allow: which decimals and date-time precisions."""

    decimals: frozenset[int]
    instants: frozenset[tuple[int, int]]  # (precision in µs, UTC offset in µs)
    booleans: bool


def _text_key(text: str) -> Key:
    return ("t", " ".join(text.split()).casefold())


def _number(text: str) -> tuple[Decimal, int] | None:
    """The number a cell shows and its decimals, or None."""
    found = _NUMBER.fullmatch(text)
    if found is None:
        return None
    sign = "-" if found.group("sign") in ("-", "\u2212") else ""
    digits = re.sub(rf"[,_{_SPACES}]", "", found.group("int"))
    fraction = found.group("frac") or ""
    try:
        value = Decimal(f"{sign}{digits}.{fraction}" if fraction else f"{sign}{digits}")
    except InvalidOperation:
        return None
    return value, len(fraction)


def _instant(text: str) -> tuple[int, int, int] | None:
    """(µs since the epoch, precision in µs, UTC offset in µs) of a date-time, or None."""
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
    local_us = (local - _EPOCH) // _ONE_US
    return local_us - offset, precision, offset


def _cell_keys(text: str) -> tuple[set[Key], _Readings]:
    """The keys a table cell shows, and the readings its column must offer action values."""
    shown = text.strip()
    keys = {_text_key(shown)}
    decimals: set[int] = set()
    instants: set[tuple[int, int]] = set()
    number = _number(shown)
    if number is not None:
        keys.add(("n", number[1], number[0]))
        decimals.add(number[1])
    instant = _instant(shown)
    if instant is not None:
        at, precision, offset = instant
        keys.add(("d", precision, offset, (at + offset) // precision))
        instants.add((precision, offset))
    flag = _BOOLEANS.get(shown.casefold())
    if flag is not None:
        keys.add(("b", flag))
    return keys, _Readings(frozenset(decimals), frozenset(instants), flag is not None)


def _value_keys(value: Any, readings: _Readings) -> set[Key]:
    """The keys an action value shows at the readings a column offers."""
    text = cell_text(value)
    keys = {_text_key(text)}
    if isinstance(value, bool):
        if readings.booleans:
            keys.add(("b", value))
        return keys
    if readings.decimals:
        exact = _exact_number(value)
        if exact is not None:
            for places in readings.decimals:
                keys.update(("n", places, rounded) for rounded in _rounded(exact, places))
    if readings.instants and isinstance(value, str):
        instant = _instant(value.strip())
        if instant is not None:
            at = instant[0]
            keys.update(
                ("d", precision, offset, (at + offset) // precision)
                for precision, offset in readings.instants
            )
    return keys


def _exact_number(value: Any) -> Decimal | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        except InvalidOperation:  # NaN and infinities round to nothing
            return None
    if isinstance(value, str):
        number = _number(value.strip())
        return None if number is None else number[0]
    return None


def _rounded(exact: Decimal, places: int) -> set[Decimal]:
    if not exact.is_finite():
        return set()
    quantum = Decimal(1).scaleb(-places)
    try:
        return {exact.quantize(quantum, rounding=mode) for mode in _ROUNDINGS}
    except InvalidOperation:  # more digits than the context holds: not a shown number
        return set()


def cell_matches(text: str, value: Any) -> bool:
    """Whether a table cell shows an action value (text, number, date-time or boolean)."""
    keys, readings = _cell_keys(text)
    return not keys.isdisjoint(_value_keys(value, readings))


# --- one table against a stream of action rows --------------------------------------------


def _merged(readings: Iterable[_Readings]) -> _Readings:
    decimals: set[int] = set()
    instants: set[tuple[int, int]] = set()
    booleans = False
    for r in readings:
        decimals |= r.decimals
        instants |= r.instants
        booleans = booleans or r.booleans
    return _Readings(frozenset(decimals), frozenset(instants), booleans)


class TableMatcher:
    """Finds the rows of a small reply table that an action row shows, one action row at a time."""

    def __init__(self, table: Table) -> None:
        self.table = table
        width = len(table.columns)
        self._names = [column_name_key(column) for column in table.columns]
        cells = [
            [_cell_keys(row[i] if i < len(row) else "") for i in range(width)] for row in table.rows
        ]
        self._keys = [[keys for keys, _ in row] for row in cells]
        self._readings = [_merged(row[i][1] for row in cells) for i in range(width)]
        # Index the table on its most selective column: an action row is then compared only
        # with the table rows that share a key with it there.
        self._by_key: dict[Key, list[int]] = {}
        self._anchor = 0
        if width:
            self._anchor = max(
                range(width), key=lambda i: len({k for row in self._keys for k in row[i]})
            )
            for index, row_keys in enumerate(self._keys):
                for key in row_keys[self._anchor]:
                    self._by_key.setdefault(key, []).append(index)
        self._columns_of: dict[str, tuple[int, ...]] = {}

    def matches(self, row: Row, skip: Collection[int] = ()) -> set[int]:
        """The indexes of the table rows (other than `skip`) the action row shows."""
        values = self._values(row)
        anchor = self._anchor
        candidates: set[int] = set()
        for key in _value_keys(values[anchor], self._readings[anchor]):
            candidates.update(self._by_key.get(key, ()))
        candidates.difference_update(skip)
        found: set[int] = set()
        # The anchor column already shares a key; the others are read once, when needed.
        others: dict[int, set[Key]] = {}
        for index in sorted(candidates):
            for column in range(len(self._names)):
                if column == anchor:
                    continue
                if column not in others:
                    others[column] = _value_keys(values[column], self._readings[column])
                if others[column].isdisjoint(self._keys[index][column]):
                    break
            else:
                found.add(index)
        return found

    def _values(self, row: Mapping[str, Any]) -> list[Any]:
        """The action row's value under each table column (None when it has none)."""
        values: list[Any] = [None] * len(self._names)
        filled = [False] * len(self._names)
        for key, value in row.items():
            for column in self._columns(key):
                if not filled[column]:  # the first key of a name wins, like the columns do
                    values[column], filled[column] = value, True
        return values

    def _columns(self, key: str) -> tuple[int, ...]:
        """The table columns an action key fills; the decision is cached per key."""
        columns = self._columns_of.get(key)
        if columns is None:
            name = column_name_key(key)
            columns = tuple(i for i, n in enumerate(self._names) if n == name)
            if len(self._columns_of) < _NAME_CACHE_LIMIT:
                self._columns_of[key] = columns
        return columns


def is_excerpt(
    table: Table,
    action_columns: Collection[str],
    action_row_count: int,
    matched_rows: Collection[int],
) -> bool:
    """Whether the table is an excerpt, given the indexes of its rows the action rows matched."""
    return (
        len(table.rows) < action_row_count
        and has_table_columns(table, action_columns)
        and all(index in matched_rows for index in range(len(table.rows)))
    )
