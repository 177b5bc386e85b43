"""Reach-back phase 1 (docs/contract/decision.md step 7): the winning (turn, action) group of
the history window, chosen from the compact citations already read, before any artifact is
fetched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from handlers.compaction import estimate_rows
from handlers.selection import DATASET_MIN_ROWS, ResultRef

MAX_REACH_BACK_ARTIFACTS = 25


def reach_back(refs: Sequence[ResultRef]) -> list[ResultRef]:
    """Phase 1: the winning (turn, action) group of the window, from compact citations only."""
    groups: dict[tuple[str, str], list[ResultRef]] = {}
    for ref in sorted(refs, key=lambda r: r.order):
        groups.setdefault((ref.turn_id, ref.action), []).append(ref)
    if not groups:
        return []
    estimates = {
        key: sum(estimate_rows(r.citation) or 0 for r in refs) for key, refs in groups.items()
    }
    # Dict order is first-call order, so max() keeps the first called group on a tie.
    winner = _newest_dataset(groups, estimates)
    if winner is None:
        with_rows = [key for key in groups if estimates[key] > 0]
        if not with_rows:
            return []
        winner = max(with_rows, key=lambda key: groups[key][-1].order)
    with_artifact = [ref for ref in groups[winner] if ref.artifact is not None]
    return with_artifact[:MAX_REACH_BACK_ARTIFACTS]


def _newest_dataset(
    groups: Mapping[tuple[str, str], list[ResultRef]], estimates: Mapping[tuple[str, str], int]
) -> tuple[str, str] | None:
    """The newest turn's best group when its estimate reaches DATASET_MIN_ROWS."""
    turns: dict[str, list[tuple[str, str]]] = {}
    for key in groups:
        turns.setdefault(key[0], []).append(key)
    # A turn is as new as its latest call: turns never interleave, so that orders them.
    by_newest = sorted(turns.values(), key=lambda keys: max(groups[k][-1].order for k in keys))
    for keys in reversed(by_newest):
        best = max(keys, key=lambda key: estimates[key])
        if estimates[best] >= DATASET_MIN_ROWS:
            return best
    return None
