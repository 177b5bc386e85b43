"""Tables the model wrote in its reply (docs/contract/decision.md step 6, assistant table)."""

from __future__ import annotations

import csv
import io
import re
from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate, pairwise
from typing import Final

import msgspec

from handlers.cell_keys import shows_a_value
from handlers.rows import is_secret_key, normalize_key


class Table(msgspec.Struct, frozen=True):
    """A table parsed from reply text: header names and rows of cell text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


# A fence opens with ``` or ~~~ and an optional info string and ends at a line of the same
# fence. A fence with no closing line is not a fence: its lines stay ordinary text. `_fences`
# reads them line by line (a pattern searching for each opening line's closer read the rest
# of the text again for every opening line that has none).
_OPENING: Final = re.compile(r"[ \t]*(`{3,}|~{3,})([^\n`]*)")
_CLOSING: Final = re.compile(r"[ \t]*(`+|~+)[`~]*[ \t]*")


class _Fence(msgspec.Struct, frozen=True):
    start: int  # the opening line's start
    end: int  # the closing line's end
    info: str  # the opening line after its fence
    body_start: int
    body: str


_CSV_LANGUAGES: Final = frozenset({"csv", "text/csv"})
# Fenced blocks in these languages may hold a table; code (python, json, ...) never does.
_TABLE_LANGUAGES: Final = _CSV_LANGUAGES | frozenset(
    {"", "tsv", "text", "txt", "plain", "plaintext", "table", "markdown", "md"}
)
_PIPE: Final = re.compile(r"(?<!\\)\|")
_SEPARATOR_CELL: Final = re.compile(r"\s*:?-+:?\s*")
_LIST_ITEM: Final = re.compile(r"\s*(?:[-*+]|\d+[.)])\s")
# A Markdown heading ("## Samples"): a "#" that starts a cell ("#,name,price") is data.
_HEADING: Final = re.compile(r"[ \t]*#{1,6}(?: |$)")
_WRAPPED_CELL: Final = re.compile(r"\*\*([^*]+)\*\*|__([^_]+)__|`([^`]+)`")
# "Source: ...", "*Citation:* ..." lines name where data came from; they are never rows.
_SOURCE_LINE: Final = re.compile(r"^[\W_]*(?:sources?|citations?)[\W_]*:", re.IGNORECASE)
_ELLIPSES: Final = frozenset({"...", "…", "..", "⋯"})
_PROSE_WORDS: Final = 8


class _Candidate(msgspec.Struct, frozen=True):
    position: int
    table: Table


class _Record(msgspec.Struct, frozen=True):
    """One delimited record: its cells, which were quoted, and the lines it spans."""

    cells: list[str]
    quoted: list[bool]
    text: str  # the record's own text, for the prose checks
    end: int  # index of the line after it
    # Reads like a sentence by its length alone (`_reads_like_prose`): a row only between
    # rows of its block, never its header or its last line.
    prose_like: bool = False


def find_table(text: str) -> Table | None:
    """The table the model wrote in its reply, or None."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    regions: list[tuple[int, str]] = []
    fenced_csv: list[str] = []
    cursor = 0
    for fence in _fences(text):
        regions.append((cursor, text[cursor : fence.start]))
        language = (fence.info.split() or [""])[0].lower()
        if language in _CSV_LANGUAGES:
            fenced_csv.append(fence.body)
        if language in _TABLE_LANGUAGES:
            regions.append((fence.body_start, fence.body))
        cursor = fence.end
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


def _fences(text: str) -> list[_Fence]:
    """The fenced blocks of `text`, in order. An opening line is a run of three or more
    backticks or tildes (after spaces or tabs) and an info string without backticks; its
    block ends at the first later line of the same character, at least as many of it, then
    only backticks, tildes, spaces and tabs. A run of tildes longer than every later closing
    line's leaves its extra tildes to the info string and closes at the longest one (so a
    pattern with a backtracking `~{3,}` reads it). No closing line: not a block."""
    lines = text.split("\n")
    starts = _line_starts(0, lines)
    closing: dict[str, list[tuple[int, int]]] = {"`": [], "~": []}  # (line, run length)
    for number, line in enumerate(lines):
        if (match := _CLOSING.fullmatch(line)) is not None:
            closing[match.group(1)[0]].append((number, len(match.group(1))))
    # the longest closing run at or after each entry of each list
    longest = {
        mark: list(accumulate(reversed([run for _, run in entries]), max))[::-1]
        for mark, entries in closing.items()
    }
    fences = []
    number = 0
    while number < len(lines) - 1:  # an opening line needs a line after it
        opening = _OPENING.fullmatch(lines[number])
        if opening is None:
            number += 1
            continue
        run, info = opening.group(1), opening.group(2)
        mark = run[0]
        entries = closing[mark]
        at = bisect_right(entries, (number, len(text) + 1))  # the first closing line after
        available = longest[mark][at] if at < len(entries) else 0
        width = len(run) if mark == "`" else min(len(run), available)
        if available < max(width, 3):
            number += 1
            continue
        while entries[at][1] < width:
            at += 1
        closer = entries[at][0]
        fences.append(
            _Fence(
                starts[number],
                starts[closer] + len(lines[closer]),
                run[width:] + info if width < len(run) else info.lstrip(" \t"),
                starts[number + 1],
                text[starts[number + 1] : starts[closer]],
            )
        )
        number = closer + 1
    return fences


def _line_starts(offset: int, lines: list[str]) -> list[int]:
    """Where each of `lines` (split at newlines from text starting at `offset`) starts."""
    return list(accumulate((len(line) + 1 for line in lines[:-1]), initial=offset))


def _fenced_csv_table(body: str) -> Table | None:
    """A fenced csv block read whole, so quoted cells may span lines; ragged rows are padded."""
    rows = [r for r in csv.reader(io.StringIO(body), skipinitialspace=True) if _has_text(r)]
    if len(rows) < 2:
        return None
    width = max(len(r) for r in rows)
    cleaned = [[_clean_cell(cell) for cell in row] for row in rows]
    return _table(cleaned[0], cleaned[1:], width)


def _region_tables(offset: int, region: str) -> list[_Candidate]:
    lines = region.split("\n")
    starts = _line_starts(offset, lines)
    pipe_tables, in_pipe_table = _pipe_tables(lines)
    found = [_Candidate(starts[i], t) for i, t in pipe_tables]
    loose = [None if in_pipe_table[i] else line for i, line in enumerate(lines)]
    # Only commas split a sentence into a record's fields: the sentence rules are CSV's.
    for read, sentences in ((_tsv_record, False), (_csv_record, True)):
        found.extend(_Candidate(starts[i], t) for i, t in _delimited_tables(loose, read, sentences))
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
        while (
            end < len(lines)
            and lines[end].strip()
            and _PIPE.search(lines[end])
            and not _SOURCE_LINE.match(lines[end])
        ):
            end += 1
        for k in range(i, end):
            used[k] = True
        # Markdown pads a short row and ignores a long row's extra cells.
        rows = [
            [_clean_cell(cell) for cell in _pipe_cells(line)[: len(columns)]]
            for line in lines[i + 2 : end]
        ]
        table = _table([_clean_cell(name) for name in columns], rows, len(columns))
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


_ReadRecord = Callable[[list[str | None], int], _Record | None]


def _delimited_tables(
    lines: list[str | None], read: _ReadRecord, sentences: bool
) -> list[tuple[int, Table]]:
    """Runs of consecutive records with as many cells as the run's first record (its header);
    with `sentences`, a sentence just above or below a run is not part of it.

    An elision record (only `...` or empty cells) inside a run does not end it; it is no row.
    """
    records: dict[int, _Record | None] = {}

    def record_at(index: int) -> _Record | None:
        if index not in records:
            records[index] = read(lines, index)
        return records[index]

    tables: list[tuple[int, Table]] = []
    sentences_above = 0  # sentences just passed over above the block at `i`
    i = 0
    while i < len(lines):
        header = record_at(i)
        if header is None:
            sentences_above = 0  # a line of no record: the next block is another one
            i += 1
            continue
        if len(header.cells) < 2 or _is_elision(header.cells):
            i += 1
            continue
        if header.prose_like:
            i += 1
            continue
        body: list[_Record] = []
        # Records that read like sentences wait here: rows if a plain row follows them in
        # the block (a long comment cell, say), prose after the block if none does.
        waiting: list[_Record] = []
        end = block_end = header.end
        while end < len(lines) and (row := record_at(end)) is not None:
            if _is_elision(row.cells):
                end = row.end
                continue
            if len(row.cells) != len(header.cells):
                break
            end = row.end
            if row.prose_like:
                waiting.append(row)
                continue
            body.extend(waiting)
            waiting.clear()
            body.append(row)
            block_end = end
        if waiting:
            end = block_end  # the block ended before them: they are prose after it
        # Each pass over a sentence reads the block again: a few at most, so a block of n
        # lines costs O(n), whatever its lines hold.
        if sentences and sentences_above < _SENTENCES_ABOVE and _is_sentence_before(header, body):
            sentences_above += 1
            i += 1  # the block's header is the record after this sentence
            continue
        sentences_above = 0
        if sentences and len(body) >= 2 and _is_sentence_after(body[-1], body[:-1]):
            body.pop()
            end = body[-1].end
        table = _table(_cleaned(header), [_cleaned(row) for row in body], len(header.cells))
        if table is not None:
            tables.append((i, table))
        i = max(end, i + 1)
    return tables


def _tsv_record(lines: list[str | None], index: int) -> _Record | None:
    line = lines[index]
    if line is None or not _is_row_like(line):
        return None
    if "\t" not in line:
        # A lone `...` is an elided-rows marker inside a block, not the end of it.
        return _Record([line], [False], line, index + 1) if _is_elision([line]) else None
    cells = line.split("\t")
    return _judged(_Record(cells, [False] * len(cells), line, index + 1))


def _csv_record(lines: list[str | None], index: int) -> _Record | None:
    """The CSV record starting at a line; a quoted field may run over lines, blank ones too."""
    line = lines[index]
    if line is None or not _is_row_like(line):
        return None
    record = _read_csv(lines, index)
    if record is None or (len(record.cells) < 2 and not _is_elision(record.cells)):
        # One field is no row, but an elided-rows marker (`...`) may sit inside a block.
        return None
    return _judged(record)


def _read_csv(lines: list[str | None], index: int) -> _Record | None:
    """RFC 4180 fields, spaces after a comma skipped; None when a quote never closes."""
    cells: list[str] = []
    quoted: list[bool] = []
    field: list[str] = []
    in_quotes = is_quoted = False
    at_start = True
    row = index
    text = lines[index] or ""
    taken = [text]
    pos = 0
    while True:
        if pos >= len(text):
            if not in_quotes:
                cells.append("".join(field))
                quoted.append(is_quoted)
                return _Record(cells, quoted, "\n".join(taken), row + 1)
            row += 1
            following = lines[row] if row < len(lines) else None
            if following is None:
                return None
            field.append("\n")
            text, pos = following, 0
            taken.append(text)
            continue
        char = text[pos]
        pos += 1
        if in_quotes:
            if char != '"':
                field.append(char)
            elif text[pos : pos + 1] == '"':
                field.append('"')
                pos += 1
            else:
                in_quotes = False
        elif char == ",":
            cells.append("".join(field))
            quoted.append(is_quoted)
            field, is_quoted, at_start = [], False, True
        elif (at_start or is_quoted) and char in " \t":
            continue  # spaces after a comma, or after a closing quote: not the cell's
        elif at_start and char == '"':
            in_quotes = is_quoted = True
            at_start = False
        else:
            at_start = False
            field.append(char)


def _is_row_like(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not _HEADING.match(line) and not _LIST_ITEM.match(line)


def _judged(record: _Record) -> _Record | None:
    """None for a line that is prose wherever it stands; the record, marked when it only
    reads like a sentence (its length, or a question or exclamation at its end)."""
    if _is_prose(record):
        return None
    if _reads_like_prose(record) or _asks_or_exclaims(record):
        return msgspec.structs.replace(record, prose_like=True)
    return record


def _is_prose(record: _Record) -> bool:
    """A line that introduces (ends in `:`) or names a source is not a row, even with a
    comma or a tab.

    Only unquoted cells are judged: a quoted cell is deliberate, whatever it holds.
    """
    stripped = record.text.strip()
    if _SOURCE_LINE.match(stripped):
        return True
    return not record.quoted[-1] and stripped.endswith(":")


def _asks_or_exclaims(record: _Record) -> bool:
    """A line ending in `?` or `!` reads like a question or an exclamation: prose above a
    block or below it, but a row between rows of its block (`1,Is the pump on?` in a
    question-and-answer table)."""
    return not record.quoted[-1] and record.text.rstrip().endswith(("!", "?"))


def _reads_like_prose(record: _Record) -> bool:
    """A sentence that runs on (a cell of many words), or several words ending in a full
    stop. Data cells can look so too (a comment column): such a record is a row between
    rows of its block, and prose before or after it (`_delimited_tables`)."""
    words = [len(c.split()) for c, q in zip(record.cells, record.quoted, strict=True) if not q]
    if not words:
        return False
    if max(words) >= _PROSE_WORDS:
        return True
    stripped = record.text.strip()
    return not record.quoted[-1] and stripped.endswith(".") and sum(words) >= 4 and max(words) >= 2


# A sentence split at its commas, next to a CSV block with as many fields: "Sure, here are
# the first samples" above `timestamp,value`, "Let me know if you need more, happy to help"
# below its rows. Each field count matches, so only the words tell: a sentence writes a
# space after each comma, speaks to the reader (a word of _SPEECH: a header or a row of
# data does not say "sure", "here", "I" or "you") and runs to several words in a column
# the block fills with short names or values.
_SPEECH: Final = frozenset(
    {"sure", "ok", "okay", "certainly", "here", "there", "yes", "below", "these", "hope",
     "thanks", "please", "let", "let's", "i", "i'm", "i've", "i'll", "me", "my", "we",
     "we've", "we'll", "you", "your", "you'll", "you're"}
)  # fmt: skip
_SPEECH_WORD: Final = re.compile(r"[a-z]+(?:'[a-z]+)?")
# A sign-off below a table of text opens with one of these and names its reader.
_SIGN_OFF: Final = frozenset({"hope", "hopefully", "let", "please", "thanks", "thank", "feel"})
_READER: Final = frozenset({"me", "you", "your", "us"})
_SENTENCE_WORDS: Final = 4  # words in the whole line
_SENTENCE_CELL_WORDS: Final = 3  # words in the cell that does not fit its column
_SHORT_CELL_WORDS: Final = 2  # the most words of a column of names or values
_SENTENCES_ABOVE: Final = 2  # sentences passed over above one block, at most


def _is_sentence_before(header: _Record, body: list[_Record]) -> bool:
    """Whether a block's first record is a sentence above it: the record after it reads as
    the header (no cell shows a value) and, in a column where this record runs to several
    words, every record after it is short."""
    if len(body) < 2 or not _reads_like_a_sentence(header):
        return False
    names = body[0]
    if any(shows_a_value(cell) for cell in names.cells):
        return False
    if len(body) >= 3 and _reads_like_a_sentence(body[-1]):
        body = body[:-1]  # a sentence below the block, too, is no measure of its columns
    return any(
        words >= _SENTENCE_CELL_WORDS
        and all(_words(row.cells[j]) <= _SHORT_CELL_WORDS for row in body)
        for j, words in _unquoted_words(header)
    )


def _is_sentence_after(last: _Record, rows: list[_Record]) -> bool:
    """Whether a block's last record is a sentence below it: in a column where every row
    above shows a value, it runs to several words, and it shows no value where they do (a
    total's figure, a dated note: a row). Below a table of text (no column of values), a
    sign-off: its first cell opens with a sign-off verb and runs to several words where
    every row above holds a short name, and it asks the reader ("Hope this helps, let me
    know" under `d1,Paris`; "Let It Be, The Beatles" stays a row)."""
    if not _reads_like_a_sentence(last):
        return False
    valued = [j for j in range(len(last.cells)) if all(shows_a_value(r.cells[j]) for r in rows)]
    if not valued:
        return _signs_off(last, rows)
    if any(shows_a_value(last.cells[j]) for j in valued):
        return False
    return any(words >= _SENTENCE_CELL_WORDS and j in valued for j, words in _unquoted_words(last))


def _signs_off(last: _Record, rows: list[_Record]) -> bool:
    """Whether the record's first cell opens with a sign-off verb and runs to several words
    in a column of short names, and the record names its reader (me, you, us): titles and
    names open with "Let", "Please" or "I" too, and rarely ask anything of anyone; one that
    does ("Please Please Me") is written in title case, which a sign-off is not."""
    first = last.cells[0]
    if last.quoted[0] or _words(first) < _SENTENCE_CELL_WORDS:
        return False
    if all(word[:1].isupper() for word in first.split()):
        return False  # "Please Please Me": a title's every word is capitalised
    spoken = _SPEECH_WORD.findall(last.text.lower().replace("\u2019", "'"))
    return (
        bool(spoken)
        and first.lstrip().lower().startswith(spoken[0])
        and spoken[0] in _SIGN_OFF
        and not _READER.isdisjoint(spoken[1:])
        and all(_words(row.cells[0]) <= _SHORT_CELL_WORDS for row in rows)
    )


def _reads_like_a_sentence(record: _Record) -> bool:
    """Unquoted cells joined by ", " that run to several words in all and speak."""
    if any(record.quoted) or ", " not in record.text:
        return False
    if sum(_words(cell) for cell in record.cells) < _SENTENCE_WORDS:
        return False
    spoken = _SPEECH_WORD.findall(record.text.lower().replace("\u2019", "'"))
    return not _SPEECH.isdisjoint(spoken)


def _unquoted_words(record: _Record) -> list[tuple[int, int]]:
    return [
        (j, _words(c))
        for j, (c, q) in enumerate(zip(record.cells, record.quoted, strict=True))
        if not q
    ]


def _words(cell: str) -> int:
    return len(cell.split())


def _is_elision(cells: list[str] | tuple[str, ...]) -> bool:
    """Whether a row only marks elided rows: every cell empty or an ellipsis, one an ellipsis."""
    stripped = [_clean_cell(cell) for cell in cells]
    return any(c in _ELLIPSES for c in stripped) and all(c in _ELLIPSES or not c for c in stripped)


def _table(header: list[str], rows: list[list[str]], width: int) -> Table | None:
    """The table, its cells cleaned (`_clean_cell`) by the caller, without elision rows and
    columns headed by an ellipsis; None when too small."""
    columns = _padded(header, width)
    keep = [i for i, name in enumerate(columns) if name not in _ELLIPSES]
    body = [_padded(row, width) for row in rows]
    body = [row for row in body if not _is_elision(row) and _has_text(list(row))]
    if len(keep) < 2 or not body:
        return None
    return Table(
        columns=tuple(columns[i] for i in keep),
        rows=tuple(tuple(row[i] for i in keep) for row in body),
    )


def _padded(cells: list[str], width: int) -> tuple[str, ...]:
    return tuple(cells[:width] + [""] * (width - len(cells)))


def _cleaned(record: _Record) -> list[str]:
    """A delimited record's cells, each cleaned but for a quoted one: nothing inside quotes
    is lost (its spaces, its asterisks)."""
    return [
        cell if quoted else _clean_cell(cell)
        for cell, quoted in zip(record.cells, record.quoted, strict=True)
    ]


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


# A first column that only numbers the rows a model pasted: "#", "No.", "Row", "Index" (or
# no name at all) over 1, 2, 3... or 0, 1, 2...
_ROW_NUMBER_NAMES: Final = frozenset(
    {"", "no", "nr", "num", "number", "row", "rowno", "rownumber", "index", "idx", "n"}
)
_ROW_NUMBER: Final = re.compile(r"(\d{1,9})\.?")


def without_row_numbers(table: Table) -> Table:
    """The table without a first column that only numbers its rows (excerpt matching,
    docs/contract/decision.md step 7): the action rows never held those numbers."""
    if len(table.columns) < 2 or normalize_key(table.columns[0]) not in _ROW_NUMBER_NAMES:
        return table
    found = [_ROW_NUMBER.fullmatch(row[0].strip()) if row else None for row in table.rows]
    numbers = [int(m.group(1)) for m in found if m is not None]
    if not numbers or len(numbers) != len(table.rows) or numbers[0] not in (0, 1):
        return table
    if any(later <= earlier for earlier, later in pairwise(numbers)):
        return table  # rows elided between two shown ones leave a gap, never a step back
    return Table(columns=table.columns[1:], rows=tuple(row[1:] for row in table.rows))
