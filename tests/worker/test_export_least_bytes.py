"""The size cap before the first byte: a csv, json or xml file whose rows and columns alone
take more than the cap is `too_large` without an upload begun (a combined export of
thousands of groups with columns of their own named every column in every row, and wrote
the cap's 500 MB to staging before it was refused)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from handlers.serialisers.json_file import json_chunks
from worker.export_file import TooLarge, least_bytes, write_export
from worker.local.blobs import LocalBlobs
from worker.ports import BlobInfo

INFO = BlobInfo(content_type="application/octet-stream", file_name="x", metadata={})
COLUMNS = [f"instance_{n}_reading" for n in range(1_000)]


class NoUploads(LocalBlobs):
    """A blob store that fails the test when an upload begins."""

    async def upload(self, path: str, info: BlobInfo) -> Any:
        raise AssertionError(f"an upload of {path} began")


def write(blobs: LocalBlobs, fmt: Any, rows: list[list[Any]], count: int, cap: int) -> Any:
    return asyncio.run(
        write_export(blobs, "exports/c/t/x", INFO, fmt, COLUMNS, rows, count, max_bytes=cap,
                     csv_bom=True)
    )  # fmt: skip


@pytest.mark.parametrize("fmt", ["csv", "json", "xml"])
def test_rows_and_columns_past_the_cap_are_too_large_before_an_upload(
    tmp_path: Path, fmt: Any
) -> None:
    count = 2_000
    least = least_bytes(fmt, COLUMNS, count, csv_bom=True)
    rows = iter(())  # never read: the rows and columns decide it
    with pytest.raises(TooLarge, match=f"at least {least} bytes"):
        write(NoUploads(tmp_path), fmt, rows, count, least - 1)  # type: ignore[arg-type]


def test_a_file_within_its_least_size_is_written_and_is_no_smaller(tmp_path: Path) -> None:
    rows = [[n] * len(COLUMNS) for n in range(3)]
    least = least_bytes("json", COLUMNS, 3, csv_bom=True)
    written = write(LocalBlobs(tmp_path), "json", rows, 3, least)
    assert written.bytes == least == len(b"".join(json_chunks(COLUMNS, rows)))


def test_more_rows_than_a_sheet_holds_are_too_large_before_an_upload(tmp_path: Path) -> None:
    from handlers.serialisers.xlsx_file import MAX_XLSX_DATA_ROWS

    rows = iter(())  # never read: the count decides it
    with pytest.raises(TooLarge, match=f"{MAX_XLSX_DATA_ROWS + 1} rows"):
        write(NoUploads(tmp_path), "xlsx", rows, MAX_XLSX_DATA_ROWS + 1, 10**12)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="an upload of exports/c/t/x began"):
        write(NoUploads(tmp_path), "xlsx", rows, MAX_XLSX_DATA_ROWS, 10**12)  # type: ignore[arg-type]


def test_more_columns_than_a_sheet_holds_are_too_large_before_an_upload(tmp_path: Path) -> None:
    from handlers.serialisers.xlsx_file import MAX_XLSX_COLUMNS

    def write_columns(count: int) -> None:
        columns = [f"c{n}" for n in range(count)]
        asyncio.run(
            write_export(NoUploads(tmp_path), "exports/c/t/x", INFO, "xlsx", columns, iter(()), 1,
                         max_bytes=10**12, csv_bom=False)
        )  # fmt: skip

    with pytest.raises(TooLarge, match=f"{MAX_XLSX_COLUMNS + 1} columns"):
        write_columns(MAX_XLSX_COLUMNS + 1)
    with pytest.raises(AssertionError, match="an upload of exports/c/t/x began"):
        write_columns(MAX_XLSX_COLUMNS)


def test_a_workbook_has_no_least_size_its_sheet_leaves_missing_cells_out() -> None:
    assert least_bytes("xlsx", COLUMNS, 100_000, csv_bom=True) == 0


@pytest.mark.parametrize(
    ("fmt", "shortest", "bom"),
    [("csv", None, True), ("csv", None, False), ("json", 0, False), ("xml", None, False)],
)
def test_the_least_size_is_that_of_a_file_of_the_shortest_cells(
    fmt: Any, shortest: Any, bom: bool
) -> None:
    """No file of these rows and columns is smaller, and one is exactly that size: the cap
    refuses nothing a file could fit in."""
    from handlers.serialisers.csv_file import csv_chunks
    from handlers.serialisers.xml_file import xml_chunks

    columns, count = ["a", "bb", "c c"], 4
    rows = [[shortest] * len(columns) for _ in range(count)]
    chunks = {
        "csv": lambda: csv_chunks(columns, rows, bom=bom),
        "json": lambda: json_chunks(columns, rows),
        "xml": lambda: xml_chunks(columns, rows),
    }[fmt]()
    assert least_bytes(fmt, columns, count, csv_bom=bom) == len(b"".join(chunks))
