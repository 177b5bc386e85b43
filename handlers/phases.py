"""The phases of one turn's decision: every state the shell can hold, as a frozen value.

A turn reads at most three rounds of artifacts. Each round is a fetch phase the shell acts
on (it reads `fetch`, in order, feeding every result into a row collector); every other
phase ends the turn. `handlers/turn.py` moves from one phase to the next:

    start ─► Finished | ExportPlan                     nothing to read
          └► FetchCurrentTurn ─┬─────────────────────► choose
                               └► FetchDeferredGroups ► choose
    choose ─► ExportPlan                               the reply's table or the fetched rows
           ├► FetchReachBack ─► ExportPlan | Finished(no_rows)
           └► Finished(no_rows)

- `FetchCurrentTurn`: the current turn's artifacts. When the citations say one action's
  group dominates the rest, only that group's artifacts are read; the others wait in
  `deferred`.
- `FetchDeferredGroups`: the waiting groups, read only when the dominant group's real rows
  do not confirm its dominance over their estimates, or when the reply's table is not an
  excerpt of those rows (it may be an excerpt of a lookup's).
- `FetchReachBack`: reach-back phase 2, the artifacts of the group that reach-back phase 1
  chose. Phase 1 is a pure scan of the window's compact citations: it reads nothing, so it
  is not a phase of its own; its verdict travels as the `scan` value.

Row collectors: `FetchCurrentTurn` starts one (it knows the reply's table, for the excerpt
test); `FetchDeferredGroups` feeds the same one, since selection weighs all the turn's
groups together; `FetchReachBack` starts a fresh one (no table: a reach-back never weighs
the reply's table). The collector is stateful, so the shell owns it and hands it in.
"""

from __future__ import annotations

import msgspec

from handlers.file_layout import Layout
from handlers.rationale import Considered
from handlers.selection import ResultRef, Selection
from handlers.tables import Table
from schemas.records import ExportSelection, StateAfter
from schemas.vocabulary import Decision, ExportFormat, RequestFormat, RowSource


class IllegalTransition(Exception):
    """A phase was asked to move in a way the turn's rules never do: a bug in the caller."""


class TurnFacts(msgspec.Struct, frozen=True):
    """What every ending of the turn records, whatever it decides."""

    format: RequestFormat | None
    carried: bool
    state_after: StateAfter
    seq: int | None


class ExportRequest(msgspec.Struct, frozen=True):
    """What every fetch round carries: the turn's facts, the format, the reply's table, and
    the groups weighed so far (what the record's `export.selection` will say)."""

    facts: TurnFacts
    format: ExportFormat
    table: Table | None
    considered: Considered


class DeferredGroups(msgspec.Struct, frozen=True):
    """Groups the citations say the dominant group dwarfs, held back until it is read."""

    refs: tuple[ResultRef, ...]
    estimate: int  # their rows by the citations: an upper bound on the real rows


class FetchCurrentTurn(msgspec.Struct, frozen=True):
    """Round 1: the current turn's artifacts (the dominant group's alone when one dominates)."""

    request: ExportRequest
    fetch: tuple[ResultRef, ...]
    deferred: DeferredGroups | None
    window: tuple[ResultRef, ...]  # the history window's results, should the turn have none


class FetchDeferredGroups(msgspec.Struct, frozen=True):
    """Round 2: the held-back groups, because the dominant group's rows did not confirm it
    or did not show the reply's table."""

    request: ExportRequest
    fetch: tuple[ResultRef, ...]
    window: tuple[ResultRef, ...]


class ReachBackScan(msgspec.Struct, frozen=True):
    """Reach-back phase 1's verdict, from the window's compact citations alone."""

    chosen: tuple[ResultRef, ...]  # the winning group's results that have an artifact


class FetchReachBack(msgspec.Struct, frozen=True):
    """Reach-back phase 2: the artifacts of the group phase 1 chose, and nothing else."""

    request: ExportRequest  # its table is None: a reach-back exports fetched rows only
    scan: ReachBackScan

    @property
    def fetch(self) -> tuple[ResultRef, ...]:
        """The artifacts to read: the chosen group's."""
        return self.scan.chosen


class Finished(msgspec.Struct, frozen=True):
    """The turn ends without a file."""

    decision: Decision
    facts: TurnFacts


class ExportPlan(msgspec.Struct, frozen=True):
    """The file to write: its rows come from the table or from the spooled action rows."""

    facts: TurnFacts
    format: ExportFormat
    row_source: RowSource
    export_id: str
    blob: str
    file_name: str
    table: Table | None  # exported when row_source is assistant_table
    selection: Selection | None  # exported when rows came from actions
    layout: Layout  # the header and what the record says of the rows
    why: ExportSelection  # the record's `export.selection`: the rule and the groups weighed


FetchPhase = FetchCurrentTurn | FetchDeferredGroups | FetchReachBack
Ending = Finished | ExportPlan
Phase = FetchPhase | Ending
