"""Writing an export: rows → serialiser → size cap and digest → staged blob upload."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from functools import partial

from handlers.publishing import Written
from handlers.serialisers import CONTENT_TYPES, Cells, csv_file, json_file
from handlers.serialisers.csv_file import csv_chunks
from handlers.serialisers.json_file import json_chunks
from schemas.vocabulary import ExportFormat
from worker.checkpoints import Checkpoint, no_checkpoint
from worker.ports import BlobInfo, Blobs
from worker.scratch import scratch_folder


class TooLarge(Exception):
    """The file would pass the size cap or the format's row limit: nothing is published."""


async def write_export(
    blobs: Blobs,
    path: str,
    info: BlobInfo,
    fmt: ExportFormat,
    columns: Sequence[str],
    rows: Iterable[Cells],
    row_count: int,
    *,
    max_bytes: int,
    csv_bom: bool,
    checkpoint: Checkpoint = no_checkpoint,
) -> Written:
    """Serialise and upload; the blob becomes visible whole on commit or not at all."""
    if fmt == "xlsx":
        from handlers.serialisers import xlsx_file

        if row_count > xlsx_file.MAX_XLSX_DATA_ROWS:
            raise TooLarge(f"{row_count} rows is more than a sheet holds")
        if len(columns) > xlsx_file.MAX_XLSX_COLUMNS:
            raise TooLarge(f"{len(columns)} columns is more than a sheet holds")
    elif (least := least_bytes(fmt, columns, row_count, csv_bom=csv_bom)) > max_bytes:
        # Known from the rows and columns alone (a combined export of thousands of groups
        # with columns of their own is as wide as all of them, every row naming every
        # column): refused before a byte is written, not after max_bytes of them.
        raise TooLarge(f"the file would take at least {least} bytes, past the {max_bytes} cap")
    upload = await blobs.upload(path, info)
    digest = hashlib.sha256()
    total = 0
    try:
        with contextlib.ExitStack() as files:
            for chunk in await _chunks(fmt, columns, rows, csv_bom=csv_bom, files=files):
                total += len(chunk)
                if total > max_bytes:
                    raise TooLarge(f"the file passes the {max_bytes} byte cap")
                digest.update(chunk)
                await upload.write(chunk)
                await checkpoint("during_blob")
                await asyncio.sleep(0)  # let lock renewal and shutdown run between chunks
        await upload.commit()
    except BaseException:
        await upload.abort()
        raise
    return Written(bytes=total, sha256=digest.hexdigest())


def least_bytes(fmt: ExportFormat, columns: Sequence[str], row_count: int, *, csv_bom: bool) -> int:
    """The fewest bytes a csv, json or xml file of these columns and rows can take: every
    row names every column (a sheet does not: 0 for xlsx)."""
    if fmt == "csv":
        return csv_file.least_bytes(columns, row_count, bom=csv_bom)
    if fmt == "json":
        return json_file.least_bytes(columns, row_count)
    if fmt == "xml":
        from handlers.serialisers import xml_file

        return xml_file.least_bytes(columns, row_count)
    return 0


def content_type(fmt: ExportFormat) -> str:
    """The content type an export of `fmt` is stored with."""
    return CONTENT_TYPES[fmt]


async def _chunks(
    fmt: ExportFormat,
    columns: Sequence[str],
    rows: Iterable[Cells],
    *,
    csv_bom: bool,
    files: contextlib.ExitStack,
) -> Iterator[bytes]:
    if fmt == "csv":
        return csv_chunks(columns, rows, bom=csv_bom)
    if fmt == "json":
        return json_chunks(columns, rows)
    # The xml and xlsx writers are imported by the turns that write them: their tables and
    # patterns cost milliseconds of every process's start-up otherwise.
    if fmt == "xml":
        from handlers.serialisers.xml_file import xml_chunks

        return xml_chunks(columns, rows)
    from handlers.serialisers.xlsx_file import write_xlsx

    # A workbook is a zip: written whole (through xlsxwriter's constant-memory temporary
    # files) before its first byte can be read. That takes minutes for a million rows, so it
    # runs in a worker thread and the event loop keeps renewing the session lock meanwhile
    # (blocked, the lock ran out and the turn was taken from it, again and again).
    # Its rows wait in named temporary files until it closes: they go in a folder of this
    # export's own, which a worker killed mid-workbook leaves for the next one to sweep.
    scratch = files.enter_context(scratch_folder())
    sink = files.enter_context(tempfile.TemporaryFile(dir=scratch))  # noqa: SIM115
    await asyncio.to_thread(write_xlsx, columns, rows, sink, tmpdir=scratch)
    sink.seek(0)
    return iter(partial(sink.read, 1 << 20), b"")
