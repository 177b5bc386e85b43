"""Pass 1 over fetched results: what selection needs, gathered as rows stream.

The contract: docs/contract/decision.md steps 6 and 7.

The shell feeds every fetched result (one page each) in call order and passes the rows on;
nothing here keeps a row. Per action it keeps a count, the columns, a truncation flag,
the digests of earlier pages' rows (for de-duplication) and which rows of the reply
table were seen. A page is taken whole (it is parsed whole anyway): cleaning, digests and
the de-duplication run over the page's rows in bulk, in C where the rows allow it. After
the last page, `select` applies dominance and `table_is_excerpt` the excerpt test. The
shell spools the rows it is handed per action and writes the selected actions' rows, each
through `finish_row`.

A group's digests stay in memory (`DigestSet`) while they are few. When the shell gives a
`DigestStore`, a group past `log_after` digests writes them there instead (`DigestLog`):
its pages are then handed over whole, repeats included, and the repeats are found when the
counts are first asked for (`select`, `counts`); `skipped` names their positions among the
action's rows handed over, which the shell leaves out of the file. The figures are those
the page-by-page de-duplication gives (a property test holds the two to one oracle). A
group whose rows have not yet matched every row of the reply's table stays in memory: a
repeat may match other table rows than its first occurrence (keys in another order), and
only a row known to be kept may count for the excerpt test.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any, Final

import msgspec

from handlers.digest_log import DigestLog, DigestStore
from handlers.digest_set import SMALL, DigestSet
from handlers.excerpt import TableMatcher, is_excerpt
from handlers.row_digest import row_digest, row_digests
from handlers.rows import Row, RowCleaner, locate_rows, says_truncated
from handlers.selection import ResultRef, Selection, choose_actions, source_column_name
from handlers.tables import Table, without_row_numbers, without_secret_columns


class _Group(msgspec.Struct):
    """What pass 1 keeps about one action: no rows, only their traces."""

    action: str
    first_order: int  # call order of the group's first call: groups sort by it
    rows: int = 0
    columns: dict[str, None] = msgspec.field(default_factory=dict)  # an ordered set
    earlier: DigestSet = msgspec.field(default_factory=DigestSet)  # digests of earlier pages' rows
    pages: int = 0  # pages fed, rows or not
    # The first page's digests, added to `earlier` only when a second page comes: a group
    # of one page (most groups) never pays for the table. Later pages go in as they come.
    last_page: array[int] = msgspec.field(default_factory=lambda: array("Q"))
    artifacts: dict[str, None] = msgspec.field(default_factory=dict)  # an ordered set
    truncated: bool = False
    matched: set[int] = msgspec.field(default_factory=set)  # indexes of reply-table rows seen
    handed: int = 0  # rows handed to the shell: positions among them name the rows skipped
    # Once the group's digests are logged: the log (its first page: the digests held before
    # it), each later page as (artifact, first position handed, rows handed, blank rows),
    # what the group had kept before, and the pages the figures were settled for.
    log: DigestLog | None = None
    logged: list[tuple[str | None, int, int, int]] = msgspec.field(default_factory=list)
    kept_before_log: int = 0
    artifacts_before_log: dict[str, None] = msgspec.field(default_factory=dict)
    settled: int = 0
    skipped: array[int] = msgspec.field(default_factory=lambda: array("Q"))


class RowCollector:
    """Accumulates what selection needs while rows stream past: counts, columns, matches."""

    def __init__(
        self,
        table: Table | None = None,
        store: DigestStore | None = None,
        log_after: int = SMALL,
    ) -> None:
        # The rows lose their secret keys as they are fed (step 8), so the excerpt test
        # (step 7, on the rows as retrieved) sets the table's secret columns aside too, and
        # the row numbers a model put in front of the rows it pasted.
        self._matcher = (
            TableMatcher(without_row_numbers(without_secret_columns(table)))
            if table is not None
            else None
        )
        self._groups: dict[str, _Group] = {}
        self._cleaner = RowCleaner()
        self._pages_expected: dict[str, int] = {}
        self._store = store
        self._log_after = log_after

    def expect(self, refs: Iterable[ResultRef]) -> None:
        """Say which pages are coming (a fetch round's refs), so that a group's de-dup table
        can be sized for its pages at once instead of doubling page after page."""
        for ref in refs:
            self._pages_expected[ref.action] = self._pages_expected.get(ref.action, 0) + 1

    def feed(self, ref: ResultRef, result: Any) -> list[Row]:
        """The cleaned rows of one result (a page), minus repeats of the action's earlier pages."""
        group = self._groups.setdefault(ref.action, _Group(ref.action, ref.order))
        group.first_order = min(group.first_order, ref.order)
        source = locate_rows(result)
        group.truncated = group.truncated or says_truncated(source)
        rows, keys = self._cleaner.page(source)
        return self._page(group, ref.artifact, rows, keys)

    def select(self) -> Selection:
        """The groups to export, decided after every result was fed."""
        # Call order, not feed order: a group fetched later (deferred) keeps its place.
        groups = sorted(map(self._settled, self._groups.values()), key=lambda g: g.first_order)
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
        return {action: self._settled(group).rows for action, group in self._groups.items()}

    def skipped(self, action: str) -> Sequence[int]:
        """Positions, among the rows of `action` handed over, of those that repeat an earlier
        page (in order): none unless the group's digests were logged."""
        group = self._groups.get(action)
        return () if group is None else self._settled(group).skipped

    def table_is_excerpt(self) -> bool:
        """Whether the reply's table is an excerpt of the action rows fed: of every group,
        the lookups that `select` leaves out too (a table showing the instance a lookup
        found shows retrieved rows; the model composed nothing)."""
        if self._matcher is None or not self._groups:
            return False
        groups = [self._settled(group) for group in self._groups.values()]
        columns = [column for group in groups for column in group.columns]
        matched: set[int] = set()
        for group in groups:
            matched |= group.matched
        rows = sum(group.rows for group in groups)
        return is_excerpt(self._matcher.table, columns, rows, matched)

    def _page(
        self, group: _Group, artifact: str | None, rows: list[Row], keys: dict[str, None] | None
    ) -> list[Row]:
        """The page's rows not in an earlier page of the group, recorded; repeats inside the
        page are kept, so its digests only guard later pages. `keys`: the rows' keys in
        first-seen order, when the cleaner read them."""
        digests = row_digests(rows)
        if (
            group.log is None
            and group.pages
            and self._store is not None
            and self._all_matched(group)
        ):
            held = len(group.earlier) + len(group.last_page) + len(digests)
            expected = self._pages_expected.get(group.action, 0)
            if table_room(held, group.pages + 1, expected) > self._log_after:
                _start_log(group, self._store)
        if group.log is not None:
            return self._logged_page(group, artifact, rows, keys, digests)
        if group.pages == 0:
            group.last_page = array("Q", digests)  # in the table only if a second page comes
        else:
            earlier = group.earlier
            held = len(earlier) + len(group.last_page) + len(digests)
            expected = self._pages_expected.get(group.action, 0)
            earlier.reserve(table_room(held, group.pages + 1, expected))
            if group.last_page:
                earlier.add_all(group.last_page)
                group.last_page = array("Q")
            fresh = earlier.add_absent(digests)
            if len(fresh) < len(rows):
                rows = [rows[at] for at in fresh]
                keys = None  # the page's keys may name only rows dropped as repeats
        group.pages += 1
        if not rows:
            return rows
        if keys is None:
            keys = dict.fromkeys(chain.from_iterable(rows))  # first-seen order
        if not keys:
            # Every row is empty, or held only secrets (step 8): nothing a file could show,
            # where a file of blank lines would claim rows.
            return []
        if artifact is not None:
            group.artifacts[artifact] = None  # kept at its first place: one look-up a page
        group.rows += len(rows)
        group.handed += len(rows)
        group.columns.update(keys)
        matcher = self._matcher
        if matcher is not None:
            for row in rows:
                if len(group.matched) >= len(matcher.table.rows):
                    break
                group.matched |= matcher.matches(row, group.matched)
        return rows

    def _logged_page(
        self,
        group: _Group,
        artifact: str | None,
        rows: list[Row],
        keys: dict[str, None] | None,
        digests: list[int],
    ) -> list[Row]:
        """A page of a group whose digests are logged: handed over whole, its repeats of
        earlier pages found by `_settled`. Its columns are those of its rows less the
        repeats (a repeat's keys are its first occurrence's); every row of the reply's table
        was matched before the group's digests were logged, so none is matched here."""
        assert group.log is not None
        group.log.add(digests)
        group.pages += 1
        if rows and keys is None:
            keys = dict.fromkeys(chain.from_iterable(rows))
        if not keys:  # no rows, or none holding a key
            group.logged.append((artifact, group.handed, 0, 0))
            return []
        group.logged.append((artifact, group.handed, len(rows), rows.count({})))
        group.rows += len(rows)
        group.handed += len(rows)
        group.columns.update(keys)
        return rows

    def _all_matched(self, group: _Group) -> bool:
        """Whether the group's rows matched every row of the reply's table (none: true)."""
        return self._matcher is None or len(group.matched) >= len(self._matcher.table.rows)

    def _settled(self, group: _Group) -> _Group:
        """The group with its figures net of the repeats its log holds (the pages logged so far)."""
        log = group.log
        if log is None or group.settled == len(log):
            return group
        repeats = log.repeats()
        rows = group.kept_before_log
        artifacts = dict(group.artifacts_before_log)
        skipped = array("Q")
        for page, (artifact, first, handed, blanks) in enumerate(group.logged, start=1):
            kept = handed
            if handed and page in repeats:
                positions, repeated = repeats[page]
                blanks_kept = 0 if _BLANK in repeated else blanks
                if handed - len(positions) == blanks_kept:
                    # Only rows with no key are left: the page gives no rows, as a page of such
                    # rows alone does (step 8).
                    skipped.extend(range(first, first + handed))
                    kept = 0
                else:
                    skipped.extend(map(first.__add__, positions))
                    kept = handed - len(positions)
            rows += kept
            if kept and artifact is not None:
                artifacts[artifact] = None
        group.rows, group.artifacts, group.skipped = rows, artifacts, skipped
        group.settled = len(log)
        return group


def table_room(held: int, pages_seen: int, pages_expected: int) -> int:
    """How many digests a group's de-dup table makes room for, `held` being those it holds
    with the page at hand: the group's pages projected at the size of those seen so far,
    when more are expected, but at most four times `held`; a projection that overshoots
    (later pages smaller) then costs no more memory than two doublings would have."""
    if pages_expected <= pages_seen:
        return held
    return min(held * pages_expected // pages_seen, 4 * held)


# The digest of a row with no key: a page left with such rows only gives no rows (step 8).
_BLANK: Final = row_digest({})


def _start_log(group: _Group, store: DigestStore) -> None:
    """Move the group's digests from memory to a log: its first page holds them all."""
    log = DigestLog(store)
    log.add([*group.earlier, *group.last_page])
    group.earlier = DigestSet()
    group.last_page = array("Q")
    group.log = log
    group.kept_before_log = group.rows
    group.artifacts_before_log = dict(group.artifacts)
    group.settled = 1


def finish_row(row: Row, action: str, selection: Selection) -> Row:
    """The row as exported: with the source column when groups were combined."""
    if selection.source_column is None:
        return row
    return {**row, selection.source_column: action}
