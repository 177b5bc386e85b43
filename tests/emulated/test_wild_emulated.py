"""The Azure backend decides and writes what the local backend does, whatever the tool data.

Batches of the conversations `tests/wild.py` generates (any JSON as tool results, pasted
tables of every shape, clarifications, soft-deleted calls and results) go through the whole
Azure backend on the stand-ins (Service Bus test broker, Azurite, cosmosdb-server) and
through the local backend, as `test_e2e_emulated.py` runs the public fixtures: the records,
dead letters (none: every input is valid), export files and events must be the same. The
documents travel through Cosmos as JSON and the artifacts through Blob, so a value either
store or its SDK reads back differently would show here.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.emulated.azure_environment import azure_environment, emulators_missing
from tests.emulated.test_e2e_emulated import azure_outcome, local_outcome
from tests.wild import conversations, fixture, history_limits

pytestmark = pytest.mark.emulated

BATCH = 4  # conversations a run: one broker and database set up per batch


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_the_azure_backend_matches_the_local_backend_on_any_tool_data(data: st.DataObject) -> None:
    reason = emulators_missing()
    if reason is not None:
        pytest.skip(reason)
    batch = [
        (data.draw(conversations(f"conv_wild_{n}")), data.draw(history_limits))
        for n in range(BATCH)
    ]
    given = fixture(*batch)
    cids = [chat.cid for chat, _ in batch]
    with tempfile.TemporaryDirectory(prefix="export-worker-wild-") as home:
        want = asyncio.run(local_outcome(Path(home), given, cids))
    with azure_environment() as env:
        got = asyncio.run(azure_outcome(env, given, cids))
    assert got["active"] == 0
    assert want["dead"] == []
    assert got["dead"] == want["dead"]
    assert got["records"] == want["records"]
    assert got["files"] == want["files"]
    assert got["events"] == want["events"]
    assert len(want["records"]) == sum(chat.turn for chat, _ in batch)
