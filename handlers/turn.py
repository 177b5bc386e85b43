"""The story of one turn (SPEC section 5), as pure functions of plain data.

The I/O shell drives it in three moves and acts on what each returns:

1. `decide(TurnInput)` reads the request, the carry-forward state and the reply. It returns
   a `Finished` outcome when nothing needs reading, or `NeedRows` naming the artifacts to
   fetch (the current turn's results first).
2. The shell fetches exactly those artifacts and feeds each into the `NeedRows.collector`
   (rows stream through it to a spool; nothing here holds the dataset).
3. `after_rows(NeedRows)` picks the row source. It may ask for one more round (reach-back:
   the current turn had no rows), end the turn (`no_rows`), or return an `ExportPlan`.

Every function here is deterministic: redelivery and replay reach the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from handlers import carry_forward
from handlers.compaction import estimate_rows
from handlers.dataset import RowCollector
from handlers.errors import RetryableError
from handlers.export_paths import (
    confine_artifact,
    download_file_name,
    export_blob_path,
    export_id,
    parse_timestamp,
)
from handlers.file_layout import Layout, layout
from handlers.passthrough import is_derived_request
from handlers.rationale import Considered
from handlers.reach_back import scan
from handlers.relevance import subject_words
from handlers.selection import ResultRef, Selection, dominates
from handlers.tables import Table, find_table, without_secret_columns
from handlers.window import history_window, paired_calls, split_turns
from schemas.documents import (
    AssistantMessage,
    Conversation,
    Message,
    SystemMessage,
    UserMessage,
)
from schemas.events import TurnCompleted
from schemas.records import (
    Decision,
    ExportFormat,
    ExportSelection,
    RequestFormat,
    RowSource,
    StateAfter,
)

# The carry-forward look-back reads at most this many messages before the turn, whatever
# the history limit (SPEC section 5 step 4).
STATE_LOOKBACK_MESSAGES = 40

Authorisation = Literal["allowed", "deleted", "forbidden"]


def authorise(conversation: Conversation, user_id: str) -> Authorisation:
    """Whether the user may export from the conversation (owner or participant, not deleted)."""
    if conversation.deleted:
        return "deleted"
    if user_id == conversation.user_id or user_id in conversation.participants:
        return "allowed"
    return "forbidden"


@dataclass(frozen=True)
class TurnInput:
    """Everything the decision needs, already read and validated."""

    event: TurnCompleted
    conversation: Conversation
    # Messages with seq up to the reply's, oldest first: the whole current turn and the
    # messages before it that the shell read (see `HistoryRead`).
    messages: Sequence[Message]
    history_limit: int
    artifacts_container: str
    exports_container: str
    now: datetime


@dataclass(frozen=True)
class TurnFacts:
    """What every outcome of the turn records, whatever it decides."""

    format: RequestFormat | None
    carried: bool
    state_after: StateAfter
    seq: int | None


@dataclass(frozen=True)
class Finished:
    """The turn ends without a file."""

    decision: Decision
    facts: TurnFacts


@dataclass
class NeedRows:
    """Fetch `fetch` (in order) and feed each artifact's result into `collector`."""

    facts: TurnFacts
    export_format: ExportFormat
    fetch: tuple[ResultRef, ...]
    collector: RowCollector
    row_source: RowSource
    table: Table | None
    # Current turn only: the window's results, for a reach-back when the turn has no rows.
    window_refs: tuple[ResultRef, ...] = field(default=())
    input: TurnInput | None = None
    # Artifacts of groups the citations say the dominant group dwarfs; fetched only when
    # the dominant group's real rows do not confirm it (`deferred_rows` bounds their rows).
    deferred: tuple[ResultRef, ...] = field(default=())
    deferred_rows: int = 0
    # The groups weighed and the request's subject words: why the rows will be chosen.
    considered: Considered = field(default_factory=Considered)


@dataclass(frozen=True)
class ExportPlan:
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
    why: ExportSelection | None = None  # the record's `export.selection`


Outcome = Finished | NeedRows | ExportPlan


class HistoryRead:
    """Tells a newest-first reader when it holds the turn's user message and the look-back."""

    def __init__(self, user_message_id: str) -> None:
        self.user_message_id = user_message_id
        self.counted: int | None = None  # countable messages seen after the user message

    def add(self, message: Message) -> bool:
        """Take the next (older) message; True once nothing older is needed."""
        if self.counted is not None and _counts(message):
            self.counted += 1
        if message.id == self.user_message_id:
            self.counted = 0
        return self.counted is not None and self.counted >= STATE_LOOKBACK_MESSAGES


def decide(inp: TurnInput) -> Outcome:
    """Steps 3 to 7 up to the first fetch: the request, the state, the reply, the sources."""
    current, earlier = _split_current_turn(inp)
    user = current[0]
    assert isinstance(user, UserMessage)
    reply = _reply(current, inp.event.reply_message_id)

    before = carry_forward.state_before(_earlier_turns(earlier))
    step = carry_forward.step(before, user.content, carry_forward.is_clarification(reply))
    facts = TurnFacts(
        format=step.format,
        carried=step.carried,
        state_after=carry_forward.state_after_record(step.state_after),
        seq=user.seq,
    )
    if step.outcome != "request":
        return Finished(step.outcome, facts)
    fmt = step.format
    assert fmt in ("csv", "json", "xml", "xlsx")

    table = find_table(reply.content or "") if reply is not None else None
    # paired_calls pairs what it is given: the turn's own messages need no pairing first.
    current_refs = [r for r in _result_refs(_visible(current)) if r.artifact is not None]
    considered = Considered.current_turn(current_refs, subject_words(step.request_text))
    if is_derived_request(step.request_text):
        # Derived output may only come from a table the model composed: no raw rows.
        if table is None:
            return Finished("derived_output_without_table", facts)
        why = considered.record("assistant_table", {}, ())
        return _plan(inp, facts, fmt, "assistant_table", table=table, selection=None, why=why)

    window_refs = _result_refs(history_window(_visible(earlier), inp.history_limit))
    fetch, deferred, deferred_rows = _dominant_first(current_refs)
    return NeedRows(
        facts=facts,
        export_format=fmt,
        fetch=_confined(inp, fetch),
        collector=RowCollector(table),
        row_source="action_rows",
        table=table,
        window_refs=tuple(window_refs),
        input=inp,
        deferred=_confined(inp, deferred),
        deferred_rows=deferred_rows,
        considered=considered,
    )


def after_rows(need: NeedRows) -> Outcome:
    """Step 7 once the fetched rows went past: the table, the action rows, reach back, or none."""
    assert need.input is not None
    selection = need.collector.select()
    if need.deferred and not dominates(selection.row_count, need.deferred_rows):
        # The citations overstated the dominant group: read the others after all.
        return replace(need, fetch=need.deferred, deferred=(), deferred_rows=0)
    has_rows = selection.row_count > 0
    counts, considered = need.collector.counts(), need.considered
    if need.table is not None and need.row_source == "action_rows":
        if has_rows and need.collector.table_is_excerpt(selection):
            why = considered.record("excerpt_replaced", counts, selection.actions)
            return _plan(
                need.input, need.facts, need.export_format, "action_rows", None, selection, why
            )
        why = considered.record("assistant_table", counts, ())
        return _plan(
            need.input, need.facts, need.export_format, "assistant_table", need.table, None, why
        )
    if has_rows:
        why = considered.record(considered.rule_for(selection, counts), counts, selection.actions)
        return _plan(
            need.input, need.facts, need.export_format, need.row_source, None, selection, why
        )
    if need.row_source == "action_rows":
        window = scan(need.window_refs, considered.subject)
        if window.picked:
            return NeedRows(
                facts=need.facts,
                export_format=need.export_format,
                fetch=_confined(need.input, window.picked),
                collector=RowCollector(None),
                row_source="prior_turn",
                table=None,
                input=need.input,
                considered=considered.reached_back(window),
            )
    return Finished("no_rows", need.facts)


# --------------------------------------------------------------------------------------
# The pieces of the story
# --------------------------------------------------------------------------------------
def _counts(message: Message) -> bool:
    """System and soft-deleted messages are invisible: they never count toward a window."""
    return not isinstance(message, SystemMessage) and not message.deleted


def _visible(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if _counts(m)]


def _split_current_turn(inp: TurnInput) -> tuple[list[Message], list[Message]]:
    """The current turn (user message first) and the messages before it."""
    event = inp.event
    messages = sorted(inp.messages, key=lambda m: m.seq)
    user_at = next(
        (i for i, m in enumerate(messages) if m.id == event.user_message_id and _counts(m)), None
    )
    if user_at is None or not isinstance(messages[user_at], UserMessage):
        raise RetryableError("turn_not_found", "the turn's user message is not visible")
    if messages[user_at].turn_id != event.turn_id:
        raise RetryableError("turn_not_found", "the user message belongs to another turn")
    if not any(m.id == event.reply_message_id and _counts(m) for m in messages[user_at:]):
        raise RetryableError("turn_not_found", "the turn's reply is not visible")
    current = [m for m in messages[user_at:] if m.turn_id == event.turn_id]
    return current, messages[:user_at]


def _reply(current: Sequence[Message], reply_id: str) -> AssistantMessage | None:
    reply = next((m for m in current if m.id == reply_id), None)
    return reply if isinstance(reply, AssistantMessage) else None


def _earlier_turns(earlier: Sequence[Message]) -> list[carry_forward.TurnText]:
    """The earlier turns the state fold reads: at most the look-back, whole turns only."""
    visible = _visible(earlier)[-STATE_LOOKBACK_MESSAGES:]
    turns: list[carry_forward.TurnText] = []
    for group in split_turns(visible):
        if not isinstance(group[0], UserMessage):
            continue  # cut by the look-back: its request is unknown
        replies = [m for m in group if isinstance(m, AssistantMessage)]
        turns.append(carry_forward.TurnText(group[0].content, replies[-1] if replies else None))
    return turns


def _result_refs(messages: Sequence[Message]) -> list[ResultRef]:
    """The successful results of paired messages, in call order."""
    refs: list[ResultRef] = []
    for order, pc in enumerate(paired_calls(messages)):
        if not pc.result.success or pc.call.id is None:
            continue
        refs.append(
            ResultRef(
                turn_id=pc.call_message.turn_id,
                action=pc.result.name or pc.call.name,
                call_id=pc.call.id,
                artifact=pc.result.artifact,
                citation=pc.result.citation,
                order=order,
                arguments=pc.call.arguments,
            )
        )
    return refs


def _dominant_first(
    refs: Sequence[ResultRef],
) -> tuple[list[ResultRef], list[ResultRef], int]:
    """Split refs into (fetch now, fetch only if needed, rows bound of the deferred ones).

    When every citation gives an estimate and one action's estimate dwarfs all others (the
    dominance rule), only that action's artifacts are read first: the others were lookups.
    Estimates bound the real rows from above (de-duplication only removes rows), so if the
    dominant group's real rows still dominate the others' estimates, the others would lose.
    """
    totals: dict[str, int] = {}
    for ref in refs:
        estimate = estimate_rows(ref.citation)
        if estimate is None:
            return list(refs), [], 0
        totals[ref.action] = totals.get(ref.action, 0) + estimate
    if len(totals) < 2:
        return list(refs), [], 0
    largest = max(totals, key=lambda action: totals[action])  # first called wins a tie
    others = sum(rows for action, rows in totals.items() if action != largest)
    if not dominates(totals[largest], others):
        return list(refs), [], 0
    now = [r for r in refs if r.action == largest]
    return now, [r for r in refs if r.action != largest], others


def _confined(inp: TurnInput, refs: Sequence[ResultRef]) -> tuple[ResultRef, ...]:
    """The refs to fetch; a path outside the conversation's artifacts is never read."""
    cid = inp.event.conversation_id
    for ref in refs:
        assert ref.artifact is not None
        confine_artifact(ref.artifact, inp.artifacts_container, cid)
    return tuple(refs)


def _plan(
    inp: TurnInput,
    facts: TurnFacts,
    fmt: ExportFormat,
    source: RowSource,
    table: Table | None,
    selection: Selection | None,
    why: ExportSelection | None = None,
) -> ExportPlan:
    event = inp.event
    action = None
    if selection is not None and len(selection.actions) == 1:
        action = selection.actions[0]
    at = parse_timestamp(event.occurred_at) or inp.now
    eid = export_id(event.conversation_id, event.turn_id, fmt)
    if table is not None:
        table = without_secret_columns(table)
    return ExportPlan(
        facts=facts,
        format=fmt,
        row_source=source,
        export_id=eid,
        blob=export_blob_path(
            inp.exports_container, event.conversation_id, event.turn_id, eid, fmt
        ),
        file_name=download_file_name(action, at, fmt),
        table=table,
        selection=selection,
        layout=layout(fmt, table, selection),
        why=why,
    )
