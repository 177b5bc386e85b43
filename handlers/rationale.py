"""Why a published turn's rows were chosen (docs/contract/turn-record.md, `export.selection`).

Every published turn records the rule of docs/contract/decision.md step 7 that decided and
every group it weighed:

- `assistant_table`: the reply's table is exported (composed by the model, the only source,
  or the one source a derived request may use);
- `excerpt_replaced`: the reply's table was an excerpt, the action rows replaced it;
- `single_group`: the current turn's rows come from one action, no other group had rows;
- `dominant`: one group dwarfed the others (>= 10 rows, >= 5x the rest) and is used alone;
- `combined`: several groups, combined with a source column;
- `reach_back_named` / `reach_back_newest` / `reach_back_any`: the rule of the history
  window's phase 1 scan (`handlers.reach_back`).

For the current turn the groups are its actions; for a reach-back they are the phase 1
scan, with `rows` null for every group never read. Nothing here reads anything: estimates,
scores and real row counts are all in hand when the plan is made.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import msgspec
from msgspec.structs import replace

from handlers.reach_back import Candidate, Scan, candidates
from handlers.selection import ResultRef, Selection
from schemas.records import CandidateGroup, ExportSelection
from schemas.vocabulary import SelectionRule


class Considered(msgspec.Struct, frozen=True):
    """The groups a turn's selection weighs, known before any of their rows are read."""

    subject: frozenset[str] = frozenset()  # the request's subject words (handlers.relevance)
    current: tuple[Candidate, ...] = ()  # the current turn's groups, one per action
    scan: Scan | None = None  # a reach-back's phase 1, once the current turn had no rows

    @classmethod
    def current_turn(cls, refs: Sequence[ResultRef], subject: frozenset[str]) -> Considered:
        """The current turn's groups, scored against the request's subject words."""
        return cls(subject, candidates(refs, subject))

    def reached_back(self, scan: Scan) -> Considered:
        """The same request, now weighing the history window's phase 1 scan."""
        return replace(self, current=(), scan=scan)

    def rule_for(self, selection: Selection, counts: Mapping[str, int]) -> SelectionRule:
        """The rule that chose action rows: the reach-back's, or the current turn's."""
        if self.scan is not None:
            assert self.scan.rule is not None  # phase 2 only runs for a chosen group
            return self.scan.rule
        if selection.combined:
            return "combined"
        with_rows = [c for c in self.current if _may_hold_rows(c, counts)]
        return "dominant" if len(with_rows) > 1 else "single_group"

    def record(
        self, rule: SelectionRule, counts: Mapping[str, int], chosen: Collection[str]
    ) -> ExportSelection:
        """`export.selection`: the rule and every group with its estimate, rows and score."""
        if self.scan is not None:
            winner = self.scan.chosen
            groups = [
                _group(c, counts.get(c.action) if c is winner else None, c is winner)
                for c in self.scan.candidates
            ]
        else:
            picked = set(chosen)  # a combined export may choose thousands of groups
            groups = [_group(c, counts.get(c.action), c.action in picked) for c in self.current]
        return ExportSelection(rule=rule, groups=groups)


def _may_hold_rows(group: Candidate, counts: Mapping[str, int]) -> bool:
    """Read: it gave rows. Never read: its estimate (an upper bound) does not say it is empty."""
    if group.action in counts:
        return counts[group.action] > 0
    return group.estimate is None or group.estimate > 0


def _group(group: Candidate, rows: int | None, chosen: bool) -> CandidateGroup:
    return CandidateGroup(
        turn_id=group.turn_id,
        action=group.action,
        estimate=group.estimate,
        rows=rows,
        score=group.score,
        chosen=chosen,
    )
