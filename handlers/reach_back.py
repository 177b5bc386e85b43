"""Reach-back phase 1 (docs/contract/decision.md step 7): the winning (turn, action) group of
the history window, chosen from the compact citations and calls already read, before any
artifact is fetched.

Groups are the window's successful results by (turn, action), each with a row estimate
(`row_count`, else the compacted list plus its `remaining_items`) and a relevance score
against the request's subject words (`handlers.relevance`). In order:

1. `reach_back_named`: some group with score > 0 and estimate >= 10: the best-named wins
   (highest score, then the newest turn, then most estimated rows, then the first called).
2. `reach_back_newest`: the newest turn holding a group with estimate >= 10: its best group
   (most estimated rows, on a tie the first called).
3. `reach_back_any`: the newest group with any estimated rows.

A turn is as new as its latest call: turns never interleave, so that orders them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from handlers.compaction import estimate_rows
from handlers.relevance import group_score, group_words, subject_words
from handlers.selection import DATASET_MIN_ROWS, ResultRef

MAX_REACH_BACK_ARTIFACTS = 25

ReachBackRule = Literal["reach_back_named", "reach_back_newest", "reach_back_any"]


class Candidate(msgspec.Struct, frozen=True):
    """One (turn, action) group of the window as phase 1 sees it."""

    turn_id: str
    action: str
    refs: tuple[ResultRef, ...]  # in call order
    estimate: int | None  # None when no citation gives an estimate
    score: int

    @property
    def rows_estimated(self) -> int:
        """The estimate as selection compares it: unknown counts as no rows."""
        return self.estimate or 0


class Scan(msgspec.Struct, frozen=True):
    """Phase 1's answer: every group considered, the winner and the rule that chose it."""

    candidates: tuple[Candidate, ...]  # in first-call order
    chosen: Candidate | None
    rule: ReachBackRule | None

    @property
    def picked(self) -> list[ResultRef]:
        """The winner's results to fetch in phase 2: those with an artifact, at most 25."""
        if self.chosen is None:
            return []
        stored = [ref for ref in self.chosen.refs if ref.artifact is not None]
        return stored[:MAX_REACH_BACK_ARTIFACTS]


def candidates(refs: Sequence[ResultRef], subject: frozenset[str]) -> tuple[Candidate, ...]:
    """The refs grouped by (turn, action) in first-call order, with estimates and scores."""
    groups: dict[tuple[str, str], list[ResultRef]] = {}
    for ref in sorted(refs, key=lambda r: r.order):
        groups.setdefault((ref.turn_id, ref.action), []).append(ref)
    found = []
    for (turn_id, action), members in groups.items():
        estimates = [e for e in (estimate_rows(r.citation) for r in members) if e is not None]
        found.append(
            Candidate(
                turn_id=turn_id,
                action=action,
                refs=tuple(members),
                estimate=sum(estimates) if estimates else None,
                score=_score(subject, action, members),
            )
        )
    return tuple(found)


def scan(refs: Sequence[ResultRef], subject: frozenset[str]) -> Scan:
    """Phase 1: the winning group of the window, from compact citations and calls only."""
    found = candidates(refs, subject)
    newest = _turn_recency(found)

    def recency(c: Candidate) -> int:
        return newest[c.turn_id]

    datasets = [c for c in found if c.rows_estimated >= DATASET_MIN_ROWS]
    named = [c for c in datasets if c.score > 0]
    if named:
        # max() keeps the first of equals, and `found` is in first-call order.
        best = max(named, key=lambda c: (c.score, recency(c), c.rows_estimated))
        return Scan(found, best, "reach_back_named")
    if datasets:
        turn = max(recency(c) for c in datasets)
        best = max((c for c in datasets if recency(c) == turn), key=lambda c: c.rows_estimated)
        return Scan(found, best, "reach_back_newest")
    with_rows = [c for c in found if c.rows_estimated > 0]
    if with_rows:
        return Scan(found, max(with_rows, key=lambda c: c.refs[-1].order), "reach_back_any")
    return Scan(found, None, None)


def reach_back(refs: Sequence[ResultRef], request_text: str = "") -> list[ResultRef]:
    """Phase 1 for a request text: the artifacts of the winning group, in call order."""
    return scan(refs, subject_words(request_text)).picked


def _turn_recency(found: Sequence[Candidate]) -> dict[str, int]:
    """Each turn's latest call order: the higher, the newer the turn."""
    latest: dict[str, int] = {}
    for c in found:
        latest[c.turn_id] = max(latest.get(c.turn_id, -1), c.refs[-1].order)
    return latest


class GroupNames:
    """Whether words are words of one of the groups (relevance's words), asked once a cue of
    the request. The first question is answered as `group_score` scores, splitting only the
    texts that may hold the words (a request has one cue, as a rule); from the second on,
    each group's words are gathered once, when a question first reaches the group, so a
    request naming its data a thousand times reads the groups' texts twice at most."""

    def __init__(self, groups: Sequence[Candidate]) -> None:
        self._groups = groups
        self._asked = 0
        self._words: list[frozenset[str]] = []  # of the first groups, in order

    def __call__(self, named: frozenset[str]) -> bool:
        self._asked += 1
        if self._asked == 1:
            return any(_score(named, group.action, group.refs) > 0 for group in self._groups)
        for index, group in enumerate(self._groups):
            if index == len(self._words):
                self._words.append(_words(group.action, group.refs))
            if not named.isdisjoint(self._words[index]):
                return True
        return False


def _score(subject: frozenset[str], action: str, members: Sequence[ResultRef]) -> int:
    return group_score(subject, action, *_sources(members))


def _words(action: str, members: Sequence[ResultRef]) -> frozenset[str]:
    """The group's words: those `_score` counts the subject's among."""
    return group_words(action, *_sources(members))


def _sources(
    members: Sequence[ResultRef],
) -> tuple[list[Mapping[str, Any]], list[str], list[Any]]:
    """Where a group's words come from besides its action: arguments, columns, citations."""
    cited = [ref.citation for ref in members if ref.citation is not None]
    columns = [column for citation in cited for column in citation.columns]
    return [ref.arguments for ref in members], columns, [citation.result for citation in cited]
