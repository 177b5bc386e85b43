"""The file's header is decided in the core: the record names columns as the file reads."""

from __future__ import annotations

from handlers.file_layout import action_cells, layout, table_cells
from handlers.selection import Selection
from handlers.tables import Table


def selection(columns: tuple[str, ...], source: str | None = None) -> Selection:
    return Selection(
        actions=("a", "b") if source else ("a",),
        combined=source is not None,
        source_column=source,
        columns=columns,
        row_count=2,
        source_artifacts=("artifacts/c/t/1.json",),
        truncated=True,
    )


def test_csv_header_carries_the_same_formula_guard_as_the_cells() -> None:
    shape = layout("csv", None, selection(("=cmd", "value")))
    assert shape.header == ("'=cmd", "value")
    assert shape.keys == ("=cmd", "value")
    assert layout("json", None, selection(("=cmd", "value"))).header == ("=cmd", "value")


def test_blank_and_duplicate_headers_are_made_usable_for_every_format() -> None:
    shape = layout("xml", Table(columns=("", "Name", "name"), rows=(("1", "x"),)), None)
    assert shape.header == ("Column 1", "Name", "name 2")
    assert list(table_cells(Table(("", "Name", "name"), (("1", "x"),)), shape)) == [
        ["1", "x", None]
    ]


def test_action_cells_follow_the_keys_and_add_the_source_column() -> None:
    sel = selection(("x", "y", "Source action"), source="Source action")
    shape = layout("csv", None, sel)
    assert action_cells({"y": 2}, "b", sel, shape) == [None, 2, "b"]
    assert (shape.row_count, shape.truncated) == (2, True)
    assert shape.source_artifacts == ("artifacts/c/t/1.json",)
