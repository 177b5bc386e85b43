"""Which action groups a turn exports: the dominance rule and what it selected.

The contract: docs/contract/decision.md step 7.

A group is the rows of one action (its pages in call order). When the largest group is a
dataset and dwarfs the rest, it is exported alone (the others were lookups); otherwise every
group with rows is combined and each row names its action in a source column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from schemas.documents import CompactCitation

DATASET_MIN_ROWS = 10
DOMINANCE_FACTOR = 5
SOURCE_COLUMN = "Source action"


class ResultRef(msgspec.Struct, frozen=True):
    """A pair-valid, successful tool result the export may read."""

    turn_id: str
    action: str  # the tool/action name
    call_id: str
    artifact: str | None  # blob path, None when the result has no artifact
    citation: CompactCitation | None
    order: int  # call order within the messages considered (0, 1, 2, ...)
    # The call's arguments: words for relevance (docs/contract/decision.md step 7), read from
    # the message in hand.
    arguments: Mapping[str, Any] = msgspec.field(default_factory=dict)

    def __hash__(self) -> int:
        # Without the citation and the arguments (they hold dicts), so refs can key sets and
        # dicts; equal refs still compare every field.
        return hash((self.turn_id, self.action, self.call_id, self.artifact, self.order))


class Selection(msgspec.Struct, frozen=True):
    """The action groups to export and what the file will hold."""

    actions: tuple[str, ...]  # groups exported, in first-call order
    combined: bool  # several groups: each row names its action in the source column
    source_column: str | None
    columns: tuple[str, ...]  # union of the selected rows' keys, first seen (+ source column)
    row_count: int
    source_artifacts: tuple[str, ...]  # artifacts that gave at least one exported row
    truncated: bool  # a fed result of a selected group said it was truncated


def dominates(rows: int, others: int) -> bool:
    """The dominance rule: a dataset (>= 10 rows) with >= 5x the rows of all the others."""
    return rows >= DATASET_MIN_ROWS and rows >= DOMINANCE_FACTOR * others


def choose_actions(counts: Sequence[tuple[str, int]]) -> tuple[list[str], bool]:
    """Dominance: ([largest], False) when >= 10 and >= 5x the rest, else (all with rows, True)."""
    with_rows = [(action, n) for action, n in counts if n > 0]
    if not with_rows:
        return [], False
    largest, most = max(with_rows, key=lambda pair: pair[1])  # first called wins a tie
    others = sum(n for _, n in with_rows) - most
    if dominates(most, others):
        return [largest], False
    # One group with rows is a dataset of its own: no source column to tell groups apart.
    return [action for action, _ in with_rows], len(with_rows) > 1


def source_column_name(columns: Sequence[str]) -> str:
    """'Source action', or 'Source action 2', 3, ... when taken (compared ignoring case)."""
    taken = {column.casefold() for column in columns}
    name, n = SOURCE_COLUMN, 1
    while name.casefold() in taken:
        n += 1
        name = f"{SOURCE_COLUMN} {n}"
    return name
