"""A CSV export's spool writes each batch of one shape as the file's records at once
(`RowSpool.write_as(plain_text)`): the file holds the bytes its rows would have written."""

from __future__ import annotations

from itertools import chain
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from handlers.file_layout import action_cells, dataset_cells, layout
from handlers.selection import Selection
from handlers.serialisers import CsvRecords, each_row
from handlers.serialisers.csv_file import PlainCsvBatch, csv_chunks, plain_text
from worker.spool import BATCH_ROWS, RowSpool

# Values no CSV rule applies to, and, now and then, one a rule applies to (a comma, a
# formula's start, a line break, a quote, a bool, None, NaN, a nested value).
PLAIN_KINDS = (
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet="abcXYZ019 .:_", max_size=6).filter(lambda t: not t.startswith(" ")),
)
RULED = st.sampled_from(["a,b", "=1+1", "-x", "l1\nl2", 'say "hi"', True, None, float("nan"), [1]])
NAMES = st.lists(st.sampled_from(["ts", "value", "unit", "x", "=z", ""]), min_size=1, max_size=4)
# A record has two cells at least: a page of one key is never written as records.
WIDE_NAMES = NAMES.filter(lambda names: len(set(names)) >= 2)


@st.composite
def pages(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows of one shape, enough for a few marshalled batches; sometimes keys in another
    order, a row of other keys, or a value a CSV rule applies to."""
    names = list(dict.fromkeys(draw(st.one_of(WIDE_NAMES, NAMES))))
    count = draw(st.sampled_from([0, 3, BATCH_ROWS, 2 * BATCH_ROWS + 7, 2 * BATCH_ROWS + 7]))
    # A column of one kind, as a call's results have them; now and then of mixed kinds (its
    # batches are written as values).
    column = st.one_of(
        *(st.lists(kind, min_size=1, max_size=5) for kind in PLAIN_KINDS),
        st.lists(st.one_of(*PLAIN_KINDS), min_size=1, max_size=5),
    )
    columns = {name: draw(column) for name in names}
    ruled_at = draw(st.sampled_from([None, None, 0, BATCH_ROWS + 1]))
    ruled = draw(RULED)
    odd_at = draw(st.sampled_from([None, None, 5, BATCH_ROWS + 2]))
    reordered = draw(st.booleans())
    rows: list[dict[str, Any]] = []
    for n in range(count):
        keys = names[::-1] if reordered and n % 3 == 1 else names
        row = {name: columns[name][n % len(columns[name])] for name in keys}
        if n == ruled_at:
            row[names[-1]] = ruled
        if n == odd_at:
            row = {"other": n}
        rows.append(row)
    return rows


def selection_of(
    appended: list[tuple[str, list[dict[str, Any]]]], source: str | None, extra: tuple[str, ...]
) -> Selection:
    columns = dict.fromkeys(chain((k for _, rows in appended for row in rows for k in row), extra))
    actions = tuple(dict.fromkeys(action for action, _ in appended))
    return Selection(
        actions,
        source is not None,
        source,
        (*columns, *((source,) if source is not None else ())),
        0,
        (),
        False,
    )


def file_bytes(
    appended: list[tuple[str, list[dict[str, Any]]]],
    selection: Selection,
    *,
    as_records: bool,
    skipped: dict[str, list[int]] | None = None,
) -> tuple[bytes, int]:
    """The CSV file from the spooled batches, and how many batches came as records; the rows
    at `skipped` (positions per action) left out."""
    shape = layout("csv", None, selection)
    with RowSpool() as spool:
        if as_records:
            spool.write_as(plain_text)
        for action, rows in appended:
            spool.extend(action, rows)
        for action, positions in (skipped or {}).items():
            spool.skip(action, positions)
        recorded = sum(
            isinstance(batch, PlainCsvBatch)
            for action in selection.actions
            for _, batch in spool.batches(action)
        )
        cells = chain.from_iterable(
            dataset_cells(spool.batches(action), action, selection, shape)
            for action in selection.actions
        )
        return b"".join(csv_chunks(shape.header, cells, chunk_size=4096)), recorded


def rows_file(appended: list[tuple[str, list[dict[str, Any]]]], selection: Selection) -> bytes:
    """The CSV file written row by row from each row's `action_cells`."""
    shape = layout("csv", None, selection)
    cells = [
        action_cells(row, action, selection, shape)
        for wanted in selection.actions
        for action, rows in appended
        if action == wanted
        for row in rows
    ]
    return b"".join(csv_chunks(shape.header, cells))


@settings(max_examples=60, deadline=None)
@given(
    appended=st.lists(st.tuples(st.sampled_from(["a", "=b"]), pages()), min_size=1, max_size=3),
    source=st.sampled_from([None, "Source action", "value"]),
    extra=st.sampled_from([(), ("gone",), ("zz", "ts")]),
)
def test_a_csv_file_from_batches_written_as_records_has_its_rows_bytes(
    appended: list[tuple[str, list[dict[str, Any]]]], source: str | None, extra: tuple[str, ...]
) -> None:
    selection = selection_of(appended, source, extra)
    expected = rows_file(appended, selection)
    got, recorded = file_bytes(appended, selection, as_records=True)
    event(f"batches written as records: {min(recorded, 2)}")
    assert got == expected
    assert file_bytes(appended, selection, as_records=False)[0] == expected


@settings(max_examples=60, deadline=None)
@given(
    appended=st.lists(st.tuples(st.sampled_from(["a", "=b"]), pages()), min_size=1, max_size=3),
    source=st.sampled_from([None, "Source action"]),
    every=st.sampled_from([1, 2, 3, 1000]),
    offset=st.integers(min_value=0, max_value=BATCH_ROWS + 5),
    runs=st.lists(st.tuples(st.integers(0, 3 * BATCH_ROWS), st.integers(1, BATCH_ROWS + 3))),
)
def test_rows_skipped_are_left_out_of_a_file_in_every_form_a_batch_took(
    appended: list[tuple[str, list[dict[str, Any]]]],
    source: str | None,
    every: int,
    offset: int,
    runs: list[tuple[int, int]],
) -> None:
    # Rows scattered, and whole runs (a batch's every row, a page's): the file is the one
    # the rows left would have written, whether its batches were records or values.
    selection = selection_of(appended, source, ())
    skipped: dict[str, list[int]] = {}
    kept: list[tuple[str, list[dict[str, Any]]]] = []
    for action in dict.fromkeys(action for action, _ in appended):
        rows = [row for name, page in appended if name == action for row in page]
        gone = {at for at in range(offset % every, len(rows), every)} if every < 1000 else set()
        for start, length in runs:
            gone.update(range(start, min(start + length, len(rows))))
        skipped[action] = sorted(gone)
        kept.append((action, [row for at, row in enumerate(rows) if at not in gone]))
    expected = rows_file(kept, selection)
    for as_records in (True, False):
        assert file_bytes(appended, selection, as_records=as_records, skipped=skipped)[0] == (
            expected
        )


def test_full_batches_of_plain_values_are_spooled_as_records_the_rest_as_values() -> None:
    rows = [{"ts": f"t{n}", "value": n / 4, "n": n} for n in range(2 * BATCH_ROWS + 5)]
    rows[BATCH_ROWS + 3]["ts"] = "=cmd"  # a formula's start: the second batch keeps values
    with RowSpool() as spool:
        spool.write_as(plain_text)
        spool.extend("h", rows[: 2 * BATCH_ROWS])
        spool.extend("h", rows[2 * BATCH_ROWS :])  # starts the tail: written at once
        first, second, rest = spool.batches("h")
        assert first[0] == ("ts", "value", "n") and isinstance(first[1], PlainCsvBatch)
        assert first[1].text.startswith("t0,0.0,0\r\nt1,0.25,1\r\n")
        assert isinstance(second[1], list)  # values
        assert isinstance(rest[1], PlainCsvBatch) and rest[1].text.startswith("t2048,512.0,")
        # Under the same keys, the records are handed to the CSV writer as they are.
        selection = Selection(("h",), False, None, ("ts", "value", "n"), 0, (), False)
        shape = layout("csv", None, selection)
        (records, *_) = dataset_cells(spool.batches("h"), "h", selection, shape)
        assert type(records) is CsvRecords and records.text == first[1].text
        with pytest.raises(TypeError):
            list(spool.rows("h"))  # records hold no values to give back
        with pytest.raises(TypeError):
            list(each_row([records]))  # nor do other formats take them


def test_a_page_starting_the_tail_is_written_as_records_unless_it_needs_a_rule() -> None:
    page = [{"ts": f"t{n}", "value": n / 2} for n in range(450)]
    ruled = [{"ts": "=cmd", "value": 1.0}]
    with RowSpool() as spool:
        spool.write_as(plain_text)
        spool.extend("h", page)  # a headline page: written, its dicts no longer held
        assert spool._pending["h"] == []
        spool.extend("h", ruled)  # needs a rule: kept in the tail
        spool.extend("h", page[:3])  # joins the tail, not tried alone
        assert len(spool._pending["h"]) == 4
        kinds = [type(batch[1]).__name__ for batch in spool.batches("h")]
        assert kinds == ["PlainCsvBatch", "list"]
        assert spool.count == 454
    with RowSpool() as spool:  # not a CSV export: the tail is kept as it was
        spool.extend("h", page)
        assert len(spool._pending["h"]) == 450
    with RowSpool() as spool:  # once a page needed a rule, the action's pages wait
        spool.write_as(plain_text)
        spool.extend("h", ruled)
        spool.extend("h", page * 3)  # a full batch and more: all written
        assert spool._pending["h"] == []
        spool.extend("h", page)  # starts the tail, but is not tried alone
        assert len(spool._pending["h"]) == 450
        spool.extend("g", page)  # another action's page is
        assert spool._pending["g"] == []


@pytest.mark.parametrize(
    ("source", "extra", "header"),
    [
        (None, (), "ts,value,n"),
        (None, ("gone",), "ts,value,n,gone"),
        ("Source action", (), "ts,value,n,Source action"),
        ("value", (), "ts,value,n,value 2"),  # named twice: the action's value is written
    ],
)
def test_records_are_laid_out_under_the_files_columns(
    source: str | None, extra: tuple[str, ...], header: str
) -> None:
    rows = [{"value": n / 2, "ts": f"t{n}", "n": -n} for n in range(BATCH_ROWS)]
    rows[0] = {"ts": "t0", "value": 0.0, "n": 0}  # the batch's keys: the first row's order
    appended = [("=h", rows), ("g", [{"ts": "u", "value": 1.5, "n": 2}])]
    selection = selection_of(appended, source, extra)
    got, recorded = file_bytes(appended, selection, as_records=True)
    assert recorded == 2  # =h's full batch, and g's page, which started its tail
    assert got == rows_file(appended, selection)
    lines = got.decode("utf-8-sig").split("\r\n")
    assert lines[0] == header
    if source == "value":
        assert lines[2] == "t1,'=h,-1,'=h"  # both columns named `value` hold the action
    elif source is not None:
        assert lines[2] == "t1,0.5,-1,'=h" and lines[-2] == "u,1.5,2,g"
    else:
        assert lines[2] == "t1,0.5,-1" + ("," if extra else "")


def test_plain_records_are_laid_out_under_two_columns_at_least() -> None:
    # A plain record is split on its commas: under one column its one cell would be split
    # into characters. Such records are never made (`plain_text` wants two columns); a
    # layout that asked for one is refused, not written.
    batch = PlainCsvBatch("1,2\r\n3,4\r\n")
    assert batch.records(["a", "b"], ["b", "a"]).text == "2,1\r\n4,3\r\n"
    assert batch.records(["a", "b"], ["a", "b"]).text == batch.text
    for keys in (["a"], []):
        with pytest.raises(ValueError, match="two columns at least"):
            batch.records(["a", "b"], keys)
    with pytest.raises(ValueError, match="two columns at least"):
        PlainCsvBatch("1\r\n").records(["a"], ["a", "b"])
