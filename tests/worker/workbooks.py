"""A two-column workbook written through `write_export` into a local blob store: what the
workbook tests of this folder share."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from worker.export_file import write_export
from worker.local.blobs import LocalBlobs
from worker.ports import BlobInfo

PATH = "exports/c/t/x.xlsx"
INFO = BlobInfo(content_type="application/octet-stream", file_name="x.xlsx", metadata={})


async def write_workbook(root: Path, rows: Iterable[list[Any]]) -> None:
    """Write `rows` (two cells each, two rows in all) as PATH under `root`."""
    await write_export(
        LocalBlobs(root), PATH, INFO, "xlsx", ["n", "s"], rows, 2, max_bytes=1 << 20, csv_bom=True
    )
