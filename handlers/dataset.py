"""Pass 1 over fetched results: what selection needs, gathered as rows stream.

The contract: docs/contract/decision.md steps 6 and 7.

The shell feeds every fetched result (one page each) in call order and passes the rows on;
nothing here keeps a row. Per action it keeps a count, the columns, a truncation flag,
the digests of earlier pages' rows (for de-duplication) and which rows of the reply
table were seen. After the last page, `select` applies dominance and `table_is_excerpt`
the excerpt test. The shell spools the rows it is handed per action and writes the selected
actions' rows, each through `finish_row`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from handlers.digest_set import DigestSet
from handlers.excerpt import TableMatcher, is_excerpt
from handlers.row_digest import row_digest
from handlers.rows import Row, clean_row, extract_rows, is_truncated
from handlers.selection import ResultRef, Selection, choose_actions, source_column_name
from handlers.tables import Table


@dataclass
class _Group:
    """What pass 1 keeps about one action: no rows, only their traces."""

    action: str
    first_order: int  # call order of the group's first call: groups sort by it
    rows: int = 0
    columns: dict[str, None] = field(default_factory=dict)  # an ordered set
    earlier: DigestSet = field(default_factory=DigestSet)  # digests of earlier pages' rows
    artifacts: list[str] = field(default_factory=list)
    truncated: bool = False
    matched: set[int] = field(default_factory=set)  # indexes of reply-table rows seen


class RowCollector:
    """Accumulates what selection needs while rows stream past: counts, columns, matches."""

    def __init__(self, table: Table | None = None) -> None:
        self._matcher = TableMatcher(table) if table is not None else None
        self._groups: dict[str, _Group] = {}

    def feed(self, ref: ResultRef, result: Any) -> Iterator[Row]:
        """The cleaned rows of one result (a page), minus repeats of the action's earlier pages."""
        group = self._groups.setdefault(ref.action, _Group(ref.action, ref.order))
        group.first_order = min(group.first_order, ref.order)
        group.truncated = group.truncated or is_truncated(result)
        return self._page(group, ref.artifact, result)

    def select(self) -> Selection:
        """The groups to export, decided after every result was fed."""
        # Call order, not feed order: a group fetched later (deferred) keeps its place.
        groups = sorted(self._groups.values(), key=lambda g: g.first_order)
        actions, combined = choose_actions([(g.action, g.rows) for g in groups])
        chosen = [self._groups[action] for action in actions]
        columns: dict[str, None] = {}
        for group in chosen:
            columns.update(group.columns)
        source = source_column_name(list(columns)) if combined else None
        return Selection(
            actions=tuple(actions),
            combined=combined,
            source_column=source,
            columns=(*columns, source) if source is not None else tuple(columns),
            row_count=sum(group.rows for group in chosen),
            source_artifacts=tuple(a for group in chosen for a in group.artifacts),
            truncated=any(group.truncated for group in chosen),
        )

    def counts(self) -> dict[str, int]:
        """Rows of every group fed so far, by action (a group never fed is absent)."""
        return {action: group.rows for action, group in self._groups.items()}

    def table_is_excerpt(self, selection: Selection) -> bool:
        """Whether the reply's table is an excerpt of the selected action rows."""
        if self._matcher is None or not selection.actions:
            return False
        chosen = [self._groups[action] for action in selection.actions]
        columns = [column for group in chosen for column in group.columns]
        matched: set[int] = set()
        for group in chosen:
            matched |= group.matched
        return is_excerpt(self._matcher.table, columns, selection.row_count, matched)

    def _page(self, group: _Group, artifact: str | None, result: Any) -> Iterator[Row]:
        """The page's rows, recorded as they pass; its digests join the group's once it ends."""
        page = array("Q")
        try:
            for raw in extract_rows(result):
                row = clean_row(raw)
                digest = row_digest(row)
                if digest in group.earlier:
                    continue
                if not page and artifact is not None and artifact not in group.artifacts:
                    group.artifacts.append(artifact)
                page.append(digest)
                group.rows += 1
                group.columns.update(dict.fromkeys(row))
                if self._matcher is not None and len(group.matched) < len(self._matcher.table.rows):
                    group.matched |= self._matcher.matches(row, group.matched)
                yield row
        finally:
            # Repeats inside this page were kept, so its digests only guard later pages.
            group.earlier.add_all(page)


def finish_row(row: Row, action: str, selection: Selection) -> Row:
    """The row as exported: with the source column when groups were combined."""
    if selection.source_column is None:
        return row
    return {**row, selection.source_column: action}

