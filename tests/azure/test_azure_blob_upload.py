"""The Azure export upload's block list (worker/azure/blobs.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from azure.storage.blob import BlockState

from worker.azure.blobs import AzureBlobUpload
from worker.ports import BlobInfo


class Blob:
    """What an upload touches of a BlobClient, recording the blocks it commits."""

    def __init__(self) -> None:
        self.staged: list[str] = []
        self.committed: list[Any] = []

    async def stage_block(self, block_id: str, data: bytes, **kwargs: Any) -> None:
        self.staged.append(block_id)

    async def commit_block_list(self, blocks: list[Any], **kwargs: Any) -> None:
        self.committed = blocks


def test_the_block_list_names_the_latest_blocks_so_a_resent_commit_still_applies() -> None:
    # The SDK resends a commit whose reply was lost; its blocks are committed by then, and a
    # list that named them "uncommitted" would be refused for a blob already written whole.
    async def main() -> Blob:
        blob = Blob()
        info = BlobInfo(content_type="text/csv", file_name="a.csv", metadata={})
        upload = AzureBlobUpload(blob, info, timeout=5.0, block_size=4)  # type: ignore[arg-type]
        await upload.write(b"0123456789")
        await upload.commit()
        return blob

    blob = asyncio.run(main())
    assert [block.id for block in blob.committed] == blob.staged and len(blob.staged) == 3
    assert {block.state for block in blob.committed} == {BlockState.LATEST}
