"""Tables the model wrote in its reply (docs/contract/decision.md step 6, assistant table)."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from handlers.rows import is_secret_key


@dataclass(frozen=True)
class Table:
    """A table parsed from reply text: header names and rows of cell text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


# A fence opens with ``` or ~~~ and an optional info string; an unclosed fence runs to the end.
_FENCE: Final = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)"
    r"(?:^[ \t]*(?P=fence)[`~]*[ \t]*$|\Z)",
    re.MULTILINE | re.DOTALL,
)
# Fenced blocks in these languages may hold a table; code (python, json, ...) never does.
_TABLE_LANGUAGES: Final = frozenset(
    {"", "csv", "tsv", "text", "txt", "plain", "plaintext", "table", "markdown", "md"}
)
_PIPE: Final = re.compile(r"(?<!\\)\|")
_SEPARATOR_CELL: Final = re.compile(r"\s*:?-+:?\s*")
_LIST_ITEM: Final = re.compile(r"\s*(?:[-*+]|\d+[.)])\s")
_WRAPPED_CELL: Final = re.compile(r"\*\*([^*]+)\*\*|__([^_]+)__|`([^`]+)`")
_PROSE_WORDS: Final = 8


@dataclass(frozen=True)
class _Candidate:
    position: int
    table: Table


def find_table(text: str) -> Table | None:
    """The table the model wrote in its reply, or None."""
    regions: list[tuple[int, str]] = []
    fenced_csv: list[str] = []
    cursor = 0
    for fence in _FENCE.finditer(text):
        regions.append((cursor, text[cursor : fence.start()]))
        language = (fence.group("info").split() or [""])[0].lower()
        if language == "csv":
            fenced_csv.append(fence.group("body"))
        if language in _TABLE_LANGUAGES:
            regions.append((fence.start("body"), fence.group("body")))
        cursor = fence.end()
    regions.append((cursor, text[cursor:]))

    for body in fenced_csv:
        table = _fenced_csv_table(body)
        if table is not None:
            return table
    candidates = [c for offset, region in regions for c in _region_tables(offset, region)]
    if not candidates:
        return None
    # Most data rows wins; on a tie, the one written first.
    return max(candidates, key=lambda c: (len(c.table.rows), -c.position)).table


def _fenced_csv_table(body: str) -> Table | None:
    """A fenced csv block read whole, so quoted cells may span lines; ragged rows are padded."""
    rows = [r for r in csv.reader(io.StringIO(body), skipinitialspace=True) if _has_text(r)]
    if len(rows) < 2:
        return None
    width = max(len(r) for r in rows)
    return _table(rows[0], rows[1:], width)


def _region_tables(offset: int, region: str) -> list[_Candidate]:
    lines = region.split("\n")
    starts = [offset]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    pipe_tables, in_pipe_table = _pipe_tables(lines)
    found = [_Candidate(starts[i], t) for i, t in pipe_tables]
    loose = [None if in_pipe_table[i] else line for i, line in enumerate(lines)]
    for split in (_tsv_cells, _csv_cells):
        found.extend(_Candidate(starts[i], t) for i, t in _delimited_tables(loose, split))
    return found


def _pipe_tables(lines: list[str]) -> tuple[list[tuple[int, Table]], list[bool]]:
    """Markdown pipe tables: header, separator row, then every following line with a pipe."""
    tables: list[tuple[int, Table]] = []
    used = [False] * len(lines)
    i = 0
    while i + 1 < len(lines):
        header, separator = lines[i], lines[i + 1]
        if not (_PIPE.search(header) and _PIPE.search(separator)):
            i += 1
            continue
        columns = _pipe_cells(header)
        separators = _pipe_cells(separator)
        if len(columns) != len(separators) or not all(
            _SEPARATOR_CELL.fullmatch(s) for s in separators
        ):
            i += 1
            continue
        end = i + 2
        while end < len(lines) and lines[end].strip() and _PIPE.search(lines[end]):
            end += 1
        for k in range(i, end):
            used[k] = True
        # Markdown pads a short row and ignores a long row's extra cells.
        rows = [_pipe_cells(line)[: len(columns)] for line in lines[i + 2 : end]]
        table = _table(columns, rows, len(columns))
        if table is not None:
            tables.append((i, table))
        i = end
    return tables, used


def _pipe_cells(line: str) -> list[str]:
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    return [cell.replace("\\|", "|") for cell in _PIPE.split(inner)]


def _delimited_tables(
    lines: list[str | None], split: Callable[[str], list[str] | None]
) -> list[tuple[int, Table]]:
    """Runs of consecutive lines with as many cells as the run's first line (its header)."""
    cells = [None if line is None else split(line) for line in lines]
    tables: list[tuple[int, Table]] = []
    i = 0
    while i < len(cells):
        header = cells[i]
        if header is None or len(header) < 2:
            i += 1
            continue
        end = i + 1
        while end < len(cells) and (row := cells[end]) is not None and len(row) == len(header):
            end += 1
        rows = [row for row in cells[i + 1 : end] if row is not None]
        table = _table(header, rows, len(header))
        if table is not None:
            tables.append((i, table))
        i = max(end, i + 1)
    return tables


def _tsv_cells(line: str) -> list[str] | None:
    if "\t" not in line or not _is_row_like(line):
        return None
    cells = line.strip("\r\n").split("\t")
    return None if _is_prose(line, cells) else cells


def _csv_cells(line: str) -> list[str] | None:
    if "," not in line or not _is_row_like(line):
        return None
    cells = next(csv.reader([line.strip()], skipinitialspace=True), [])
    return None if _is_prose(line, cells) else cells


def _is_row_like(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#") and not _LIST_ITEM.match(line)


def _is_prose(line: str, cells: list[str]) -> bool:
    """A sentence with a comma or a tab is not a row: it introduces, exclaims, asks or runs on."""
    stripped = line.strip()
    if stripped.endswith((":", "!", "?")):
        return True
    if max((len(cell.split()) for cell in cells), default=0) >= _PROSE_WORDS:
        return True
    # A data cell may end with a full stop; a row of several words that does is a sentence.
    words = [len(cell.split()) for cell in cells]
    return stripped.endswith(".") and sum(words) >= 4 and max(words) >= 2


def _table(header: list[str], rows: list[list[str]], width: int) -> Table | None:
    if width < 2 or not rows:
        return None
    return Table(
        columns=_padded(header, width),
        rows=tuple(_padded(row, width) for row in rows),
    )


def _padded(cells: list[str], width: int) -> tuple[str, ...]:
    clean = [_clean_cell(cell) for cell in cells]
    return tuple(clean + [""] * (width - len(clean)))


def _clean_cell(cell: str) -> str:
    """Strip whitespace, and bold or code markers that wrap the whole cell."""
    stripped = cell.strip()
    wrapped = _WRAPPED_CELL.fullmatch(stripped)
    if wrapped is None:
        return stripped
    return next(g for g in wrapped.groups() if g is not None).strip()


def _has_text(row: list[str]) -> bool:
    return any(cell.strip() for cell in row)


def without_secret_columns(table: Table) -> Table:
    """The table without columns whose names name secrets (docs/contract/decision.md step 8)."""
    keep = [i for i, name in enumerate(table.columns) if not is_secret_key(name)]
    if len(keep) == len(table.columns):
        return table
    return Table(
        columns=tuple(table.columns[i] for i in keep),
        rows=tuple(tuple(row[i] for i in keep if i < len(row)) for row in table.rows),
    )

