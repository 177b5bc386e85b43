"""Action rows: how a raw function result becomes rows, and which keys never leave.

The contract: docs/contract/decision.md steps 6 and 8.

Tools answer in many shapes (a list, an OData `{"value": [...]}`, a paged envelope, a JSON
string, one record, a columnar table of `columns` and `rows` as query services answer).
Every shape is first located (`locate_rows`: where the rows sit and which dicts were passed
on the way), so extraction, truncation flags and the row estimate of a compacted citation
all agree on the same walk.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, Final

import msgspec

Row = dict[str, Any]

# Checked in this order: the first key present with a non-empty value holds the rows.
ROW_KEYS: tuple[str, ...] = (
    "rows",
    "data",
    "items",
    "results",
    "records",
    "value",
    "values",
    "result",
    "body",
    "output",
    "payload",
)
# Envelope bookkeeping, not data: dropped when a dict is itself the row.
CONTROL_KEYS = frozenset({"count", "status", "message", "total", "nextlink", "page", "pagination"})
TRUNCATION_KEYS = frozenset({"truncated", "istruncated", "rowstruncated", "resulttruncated"})
# Blocks of an envelope that describe its paging: a truncation flag may sit in them.
_PAGING_KEYS: Final = CONTROL_KEYS | {"meta", "metadata", "paging", "pageinfo"}
SECRET_PARTS: tuple[str, ...] = (
    "token",
    "secret",
    "password",
    "passwd",
    "apikey",
    "accesskey",
    "accountkey",
    "privatekey",
    "subscriptionkey",
    "sharedaccess",
    "connectionstring",
    "credential",
    "authorization",
)
# The result itself is level 1; a dict reached at this level is a row, not an envelope.
MAX_LEVEL = 4
# A columnar table (Log Analytics, Azure Resource Graph, Kusto): its column names, and where
# a column object keeps its name. Query services put their tables under `tables`.
_COLUMNS: Final = "columns"
_COLUMN_NAME_KEYS: Final = ("name", "columnname")
# Where a columnar table keeps its lists: `rows`, or `data` (pandas' orient="split").
_COLUMNAR_ROW_KEYS: Final = frozenset({"rows", "data"})
_TABLES: Final = "tables"
# Values with nothing inside them: a row holding only these has no secret below its keys.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
# Past this many distinct keys found clean, new keys are checked row by row (rows keyed by
# ids or timestamps would otherwise grow the cache without end).
_CLEAN_KEYS_LIMIT: Final = 4096


# What `str.isalnum` refuses: the regular expressions' \w is `isalnum` or "_", code point by
# code point, so this drops in C what a per-character loop dropped.
_NOT_ALNUM: Final = re.compile(r"[\W_]+")


def normalize_key(key: object) -> str:
    """A key lower-cased, without anything but letters and digits ("Next-Link" -> "nextlink")."""
    return _NOT_ALNUM.sub("", str(key).lower())


class RowSource(msgspec.Struct, frozen=True):
    """Where the rows of a result sit: a list whose items are rows, or one row, or nothing."""

    items: Sequence[Any] | None
    row: Row | None
    holders: tuple[Mapping[str, Any], ...]


def locate_rows(result: Any) -> RowSource:
    """Walk a raw (or compacted) result down its row keys to the value that holds its rows."""
    holders: list[Mapping[str, Any]] = []
    value = _parse_text(result)
    level = 1
    while isinstance(value, Mapping):
        holders.append(value)
        key = _row_key(value) if level < MAX_LEVEL else None
        if key is None:
            table = _first_table(value) if level < MAX_LEVEL else None
            if table is not None:
                value = table
                level += 1
                continue
            if _is_empty_columnar(value):
                return RowSource(None, None, tuple(holders))
            row = {k: v for k, v in value.items() if normalize_key(k) not in CONTROL_KEYS}
            return RowSource(None, None if _is_bare_envelope(row) else row, tuple(holders))
        inner = _parse_text(value[key])
        table_rows = _columnar_rows(value, key, inner)
        if table_rows is not None:
            return RowSource(table_rows, None, tuple(holders))
        value = inner
        level += 1
    if _is_empty(value):
        return RowSource(None, None, tuple(holders))
    if isinstance(value, list | tuple):
        return RowSource(value, None, tuple(holders))
    return RowSource(None, {"value": value}, tuple(holders))


def extract_rows(result: Any) -> Iterator[Row]:
    """The rows of one raw function result (docs/contract/decision.md step 6)."""
    source = locate_rows(result)
    if source.row is not None:
        yield source.row
    for item in source.items or ():
        yield dict(item) if isinstance(item, Mapping) else {"value": item}


def clean_row(row: Row) -> Row:
    """The row without keys that name secrets, at any depth (docs/contract/decision.md step 8)."""
    return {k: _clean(v) for k, v in row.items() if not is_secret_key(k)}


class RowCleaner:
    """The rows of one page after another, each as `clean_row(extracted row)` gives it, but a
    page at a time: a page of flat rows (dicts of scalars) whose keys were all found clean
    before is taken as it is, checked in C; every other row is cleaned on its own."""

    def __init__(self) -> None:
        self._clean_keys: set[str] = set()  # keys already found not to name a secret

    def page(self, source: RowSource) -> tuple[list[Row], dict[str, None] | None]:
        """The cleaned rows of a located result, in order (extract_rows, then clean_row),
        and their keys in first-seen order when the page was taken as it is: the check reads
        every key anyway, so the collector need not read them again. None when the rows
        were cleaned one by one."""
        if source.row is not None:
            return [clean_row(source.row)], None
        items = source.items
        if not items:
            return [], None
        keys = self._flat_and_clean(items)
        if keys is not None:
            return list(items), keys  # nothing to remove: the parsed rows, not copies
        return [self._row(item) for item in items], None

    def _flat_and_clean(self, items: Sequence[Any]) -> dict[str, None] | None:
        """The keys of the items in first-seen order, if every item is a flat dict whose keys
        name no secret; else None."""
        if set(map(type, items)) != {dict}:
            return None
        if not _SCALARS.issuperset(map(type, chain.from_iterable(map(dict.values, items)))):
            return None
        keys = dict.fromkeys(chain.from_iterable(items))
        if self._clean_keys.issuperset(keys):
            return keys
        return keys if self._learn(keys) and self._clean_keys.issuperset(keys) else None

    def _row(self, item: Any) -> Row:
        if not isinstance(item, Mapping):
            return clean_row({"value": item})
        if (
            type(item) is dict
            and item.keys() <= self._clean_keys
            and _SCALARS.issuperset(map(type, item.values()))
        ):
            return item
        self._learn(item.keys())
        return clean_row(item if type(item) is dict else dict(item))

    def _learn(self, keys: Iterable[Any]) -> bool:
        """Remember the keys that are text and name no secret; whether every key was one."""
        clean = True
        for key in keys:
            if isinstance(key, str) and not is_secret_key(key):
                if len(self._clean_keys) < _CLEAN_KEYS_LIMIT:
                    self._clean_keys.add(key)
            else:
                clean = False
        return clean


def is_secret_key(key: object) -> bool:
    """Whether a key names a secret (lower-cased, without punctuation, it holds a secret word)."""
    if isinstance(key, str):
        return _is_secret_name(key)
    return _is_secret_name(str(key))


@functools.lru_cache(maxsize=4096)
def _is_secret_name(key: str) -> bool:
    # Every row of a page repeats the same few keys: normalise each once, not per row.
    norm = normalize_key(key)
    return any(part in norm for part in SECRET_PARTS)


def is_truncated(result: Any) -> bool:
    """Whether a raw result says it was truncated (truncated / is_truncated / rows_truncated)."""
    return says_truncated(locate_rows(result))


def says_truncated(source: RowSource) -> bool:
    """Whether a located result's envelopes say it was truncated: a flag of theirs, or of
    their paging block (`{"rows": [...], "pagination": {"is_truncated": true}}`)."""
    return any(_flags_truncation(holder) for holder in source.holders) or any(
        _flags_truncation(value)
        for holder in source.holders
        for key, value in holder.items()
        if isinstance(value, Mapping) and normalize_key(key) in _PAGING_KEYS
    )


def _flags_truncation(holder: Mapping[str, Any]) -> bool:
    return any(
        _truthy(value) for key, value in holder.items() if normalize_key(key) in TRUNCATION_KEYS
    )


def cell_text(value: Any) -> str:
    """A value as the text cells are compared by: stripped, true/false, '', repr or JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value).strip()


def _row_key(envelope: Mapping[str, Any]) -> str | None:
    """The envelope's key that holds rows: the first ROW_KEYS name it has with a non-empty value."""
    by_name: dict[str, str] = {}
    for key, value in envelope.items():
        if not _is_empty(value):
            by_name.setdefault(normalize_key(key), key)
    return next((by_name[name] for name in ROW_KEYS if name in by_name), None)


def _named(mapping: Mapping[str, Any], names: Collection[str]) -> Any:
    """The value of the first key that is one of `names` (compared as `normalize_key`
    gives it); None when there is none."""
    return next((v for k, v in mapping.items() if normalize_key(k) in names), None)


def _column_names(table: Mapping[str, Any]) -> list[str] | None:
    """A columnar table's column names (strings, or objects with a `name` / `ColumnName`),
    each given once; None for anything else."""
    columns = _named(table, (_COLUMNS,))
    if not isinstance(columns, list) or not columns:
        return None
    names: list[str] = []
    for column in columns:
        if isinstance(column, Mapping):
            column = _named(column, _COLUMN_NAME_KEYS)
        if not isinstance(column, str) or not column:
            return None
        names.append(column)
    # A name given twice would lose a value of each row.
    return names if len(set(names)) == len(names) else None


def _columnar_rows(holder: Mapping[str, Any], key: str, rows: Any) -> list[Any] | None:
    """The rows of a columnar table as dicts, when `holder[key]` holds rows as lists of the
    table's columns (`{"columns": [...], "rows": [[...], ...]}`, or `data` for `rows`);
    None for any other shape.

    The last item may be compaction's `{"remaining_items": n}`: it stays as it is, so a
    compacted table still estimates its rows."""
    if normalize_key(key) not in _COLUMNAR_ROW_KEYS or not isinstance(rows, list) or not rows:
        return None
    if type(rows[0]) is not list:
        return None
    names = _column_names(holder)
    if names is None:
        return None
    width = len(names)
    body = rows[:-1] if isinstance(rows[-1], Mapping) else rows
    if not all(type(row) is list and len(row) == width for row in body):
        return None
    return [dict(zip(names, row, strict=True)) for row in body] + rows[len(body) :]


def _first_table(envelope: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first table of a query service's `{"tables": [{"columns", "rows"}, ...]}`."""
    tables = _named(envelope, (_TABLES,))
    if not isinstance(tables, list) or not tables or not isinstance(tables[0], Mapping):
        return None
    first = tables[0]
    # Column names alone describe a schema (`{"tables": [{"name", "columns"}]}`): no rows.
    has_rows = any(
        normalize_key(k) in _COLUMNAR_ROW_KEYS and isinstance(v, list) for k, v in first.items()
    )
    return first if has_rows and _column_names(first) is not None else None


def _is_empty_columnar(table: Mapping[str, Any]) -> bool:
    """A columnar table that holds no rows: an answer with no rows, not a row of metadata."""
    return _column_names(table) is not None and any(
        normalize_key(k) in _COLUMNAR_ROW_KEYS and _is_empty(v) for k, v in table.items()
    )


def _is_bare_envelope(row: Row) -> bool:
    """Whether a dict-itself row is only an envelope: no data but empty row keys.

    `{"status": "ok"}` or `{"items": [], "count": 0}` answered with no rows; a record
    such as `{"name": "x", "value": null}` is still one row.
    """
    return all(normalize_key(k) in ROW_KEYS and _is_empty(v) for k, v in row.items())


def _parse_text(value: Any) -> Any:
    """A string holding a JSON object or array, parsed; any other value unchanged.

    Only containers are parsed: a tool that returns "42" or "true" meant that text, and a
    string compaction cut short stays the one-row text it now is.
    """
    if not isinstance(value, str) or value.lstrip()[:1] not in ("{", "["):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, dict | list) else value


def _is_empty(value: Any) -> bool:
    """None, or an empty string or container: nothing to make rows from."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    if isinstance(value, Mapping | list | tuple):
        return len(value) == 0
    return False


def _clean(value: Any) -> Any:
    """A cell value with secret keys removed from every dict inside it."""
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items() if not is_secret_key(k)}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _truthy(value: Any) -> bool:
    """A truncation flag's value read as a yes: true, a non-zero number, or "true"/"yes"/"1"."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return isinstance(value, int | float) and bool(value)
