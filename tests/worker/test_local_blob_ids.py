"""The event's id rules and the local blob store agree: whatever ids `turn.completed` accepts
name an export blob the local store writes and reads back (docs/contract/events.md)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from handlers.export_paths import export_blob_path, export_id
from schemas.events import blob_name_problem, path_folder_problem
from worker.local.blobs import LocalBlobs

# Parts near the 255-byte limit in one-, two- and four-byte characters, dots and spaces.
_PART = st.one_of(
    st.integers(250, 260).map(lambda n: "a" * n),
    st.integers(125, 130).map(lambda n: "\u00e9" * n),
    st.integers(125, 130).map(lambda n: "\u00e9" * n + "x"),
    st.integers(62, 65).map(lambda n: "\U0001f600" * n),
    st.text(alphabet="a.", min_size=1, max_size=3),
    st.text(min_size=1, max_size=8),
)
_ID = st.lists(_PART, min_size=1, max_size=4).map("/".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversation_id=_ID, turn_id=_ID)
def test_ids_an_event_accepts_name_an_export_the_local_store_holds(
    tmp_path_factory: pytest.TempPathFactory, conversation_id: str, turn_id: str
) -> None:
    accepted = (
        path_folder_problem(conversation_id) is None
        and path_folder_problem(turn_id) is None
        and blob_name_problem(conversation_id, turn_id) is None
    )
    event("accepted" if accepted else "refused")
    if not accepted:
        return
    root: Path = tmp_path_factory.mktemp(f"home-{uuid.uuid4().hex[:6]}")
    export = export_id(conversation_id, turn_id, "xlsx")
    path = export_blob_path("exports", conversation_id, turn_id, export, "xlsx")

    async def main() -> bytes:
        blobs = LocalBlobs(root)
        try:
            await blobs.put(path, b"rows", "application/octet-stream")
            return b"".join([chunk async for chunk in blobs.read(path)])
        finally:
            await blobs.close()

    assert asyncio.run(main()) == b"rows"
