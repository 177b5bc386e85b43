"""The story of one turn (docs/contract/decision.md), as pure functions of plain data.

The shell reads the turn, then moves it through its phases (`handlers/phases.py`) and acts
on each one:

1. `start(TurnInput)` reads the request, the carry-forward state and the reply. It ends the
   turn at once (`Finished`, or an `ExportPlan` of the reply's table) or names the first
   fetch round, `FetchCurrentTurn`.
2. For a fetch phase the shell takes a row collector (`collector_for`: a new one, or the
   round before's), reads exactly `phase.fetch` in order and feeds each artifact's result
   into it (rows stream through it to a spool; nothing here holds the dataset).
3. `after_fetch(TurnInput, phase, collector)` weighs what went past and names the next
   phase: the deferred groups, a reach-back, or an ending.

Every function here is deterministic: redelivery and replay reach the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Literal

import msgspec
from msgspec.structs import replace

from handlers import carry_forward
from handlers.compaction import bounding_estimate
from handlers.dataset import RowCollector
from handlers.digest_log import DigestStore
from handlers.errors import RetryableError
from handlers.export_paths import (
    confine_artifact,
    download_file_name,
    export_blob_path,
    export_id,
    parse_timestamp,
)
from handlers.file_layout import layout
from handlers.passthrough import is_derived_request
from handlers.phases import (
    DeferredGroups,
    ExportPlan,
    ExportRequest,
    FetchCurrentTurn,
    FetchDeferredGroups,
    FetchPhase,
    FetchReachBack,
    Finished,
    IllegalTransition,
    Phase,
    ReachBackScan,
    TurnFacts,
)
from handlers.rationale import Considered
from handlers.reach_back import GroupNames, scan
from handlers.relevance import subject_words
from handlers.selection import ResultRef, Selection, dominates
from handlers.tables import Table, find_table, without_secret_columns
from handlers.window import history_window, is_visible, paired_calls, split_turns, visible
from schemas.documents import (
    AssistantMessage,
    Conversation,
    Message,
    ToolMessage,
    UserMessage,
)
from schemas.events import TurnCompleted
from schemas.records import ExportSelection, StateAfter
from schemas.vocabulary import ExportFormat, RowSource

# The carry-forward look-back reads at most this many messages before the turn, whatever
# the history limit (docs/contract/decision.md step 4).
STATE_LOOKBACK_MESSAGES = 40

Authorisation = Literal["allowed", "deleted", "forbidden"]


def authorise(conversation: Conversation, user_id: str) -> Authorisation:
    """Whether the user may export from the conversation (owner or participant, not deleted)."""
    if conversation.deleted:
        return "deleted"
    if user_id == conversation.user_id or user_id in conversation.participants:
        return "allowed"
    return "forbidden"


class TurnInput(msgspec.Struct, frozen=True):
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


class HistoryRead:
    """Tells a newest-first reader when it holds the turn's user message and what the core
    reads before it: the carry-forward look-back and the history window, whichever is
    longer (a `HISTORY_LIMIT_MAX` above 40 lets the window reach further)."""

    def __init__(self, user_message_id: str, history_limit: int = 0) -> None:
        self.user_message_id = user_message_id
        self.needed = max(STATE_LOOKBACK_MESSAGES, history_limit)
        self.counted: int | None = None  # countable messages seen after the user message

    def add(self, message: Message) -> bool:
        """Take the next (older) message; True once nothing older is needed."""
        if self.counted is not None and is_visible(message):
            self.counted += 1
        if message.id == self.user_message_id:
            self.counted = 0
        return self.counted is not None and self.counted >= self.needed


def start(inp: TurnInput) -> Phase:
    """Steps 3 to 7 up to the first fetch: the request, the state, the reply, the sources."""
    current, earlier = _split_current_turn(inp)
    # Every artifact path among the turn's own results, whatever the turn asks and whether
    # the result succeeded or found its call: a foreign one is never read and the event ends
    # not_authorized (SPEC 3). Earlier turns' paths were judged when their turns came;
    # reach-back checks again the group it would read.
    _confine_paths(inp, current)
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
    current_refs = [r for r in _result_refs(visible(current)) if r.artifact is not None]
    considered = Considered.current_turn(current_refs, subject_words(step.request_text))
    request = ExportRequest(facts, fmt, table, considered)
    window_refs = _result_refs(history_window(visible(earlier), inp.history_limit))
    if is_derived_request(step.request_text, _data_names(considered, window_refs)):
        # Derived output may only come from a table the model composed: no raw rows.
        if table is None:
            return Finished("derived_output_without_table", facts)
        why = considered.record("assistant_table", {}, ())
        return _plan(inp, request, "assistant_table", table, None, why)

    fetch, deferred = _dominant_first(current_refs)
    return FetchCurrentTurn(request, fetch, deferred, tuple(window_refs))


def collector_for(
    phase: FetchPhase, running: RowCollector | None, store: DigestStore | None = None
) -> RowCollector:
    """The collector a fetch round feeds: a new one, or the round before's (see phases.py),
    told which pages the round brings. `store`: where a large group's digests may go
    (dataset.py), the shell's to give."""
    match phase:
        case FetchCurrentTurn(request=request):
            collector = RowCollector(request.table, store)
        case FetchDeferredGroups():
            if running is None:
                raise IllegalTransition("deferred groups join the current turn's collector")
            collector = running
        case FetchReachBack():
            collector = RowCollector(None, store)
    collector.expect(phase.fetch)
    return collector


def after_fetch(inp: TurnInput, phase: Phase, collector: RowCollector) -> Phase:
    """Step 7 once a round's rows went past: the next round, or how the turn ends."""
    match phase:
        case FetchCurrentTurn(request=request, deferred=DeferredGroups() as deferred) if (
            not dominates(collector.select().row_count, deferred.estimate)
            or (request.table is not None and not collector.table_is_excerpt())
        ):
            # Read the others after all: the citations overstated the dominant group, or the
            # reply's table is no excerpt of its rows and may be one of a lookup's rows
            # (retrieved all the same), which only those rows can tell.
            return FetchDeferredGroups(request, deferred.refs, phase.window)
        case (
            FetchCurrentTurn(request=request, window=window)
            | FetchDeferredGroups(request=request, window=window)
        ):
            return _choose(inp, request, collector, window)
        case FetchReachBack(request=request):
            selection = collector.select()
            if selection.row_count == 0:
                return Finished("no_rows", request.facts)
            return _plan(inp, request, "prior_turn", None, selection, _why(request, collector))
        case Finished() | ExportPlan():
            raise IllegalTransition(f"a turn that ended ({type(phase).__name__}) reads nothing")


def conversation_deleted() -> Finished:
    """The ending of a turn whose conversation is deleted: recorded, nothing read."""
    return Finished("conversation_deleted", TurnFacts(None, False, StateAfter(state="idle"), None))


def _choose(
    inp: TurnInput, request: ExportRequest, collector: RowCollector, window: Sequence[ResultRef]
) -> Phase:
    """The current turn's rows are all in: the table, the action rows, or reach back."""
    selection = collector.select()
    has_rows = selection.row_count > 0
    considered, counts = request.considered, collector.counts()
    if request.table is not None:
        if has_rows and collector.table_is_excerpt():
            why = considered.record("excerpt_replaced", counts, selection.actions)
            return _plan(inp, request, "action_rows", None, selection, why)
        why = considered.record("assistant_table", counts, ())
        return _plan(inp, request, "assistant_table", request.table, None, why)
    if has_rows:
        return _plan(inp, request, "action_rows", None, selection, _why(request, collector))
    # Reach-back phase 1: a scan of the window's compact citations, reading nothing.
    window_scan = scan(window, considered.subject)
    chosen = ReachBackScan(chosen=_confined(inp, window_scan.picked))
    if not chosen.chosen:
        return Finished("no_rows", request.facts)
    reaching = replace(request, table=None, considered=considered.reached_back(window_scan))
    return FetchReachBack(reaching, chosen)


def _data_names(
    considered: Considered, window_refs: Sequence[ResultRef]
) -> Callable[[frozenset[str]], bool]:
    """Whether words name the data a data-naming cue may name: the turn's own groups, or,
    when the turn called nothing (a reach-back, the answer to a clarification), the one
    group of the window a reach-back would export. A cue that names some other group of the
    window asks for a computation: "average" in an earlier lookup's arguments does not make
    the readings reach-back exports an average. That group is phase 1's choice, from
    citations in hand, made only once a request holds such a cue."""
    if considered.current:
        return GroupNames(considered.current)
    chosen: list[GroupNames] = []

    def names_data(words: frozenset[str]) -> bool:
        if not chosen:
            winner = scan(window_refs, considered.subject).chosen
            chosen.append(GroupNames([winner] if winner is not None else []))
        return chosen[0](words)

    return names_data


def _why(request: ExportRequest, collector: RowCollector) -> ExportSelection:
    """`export.selection` of rows chosen from actions: the rule that chose them, and why."""
    selection, counts = collector.select(), collector.counts()
    rule = request.considered.rule_for(selection, counts)
    return request.considered.record(rule, counts, selection.actions)


# --------------------------------------------------------------------------------------
# The pieces of the story
# --------------------------------------------------------------------------------------
def _split_current_turn(inp: TurnInput) -> tuple[list[Message], list[Message]]:
    """The current turn (user message first) and the messages before it."""
    event = inp.event
    messages = sorted(inp.messages, key=lambda m: m.seq)
    user_at = next(
        (i for i, m in enumerate(messages) if m.id == event.user_message_id and is_visible(m)), None
    )
    if user_at is None:
        raise RetryableError("turn_not_found", "the turn's user message is not visible")
    if not isinstance(messages[user_at], UserMessage):
        # Still retried (not found) like the rest: the description says what an operator
        # finds instead, so that no one waits for a write that is not coming.
        role = messages[user_at].role
        article = "an" if role == "assistant" else "a"
        raise RetryableError(
            "turn_not_found", f"the turn's user message id names {article} {role} message"
        )
    if messages[user_at].turn_id != event.turn_id:
        raise RetryableError("turn_not_found", "the user message belongs to another turn")
    if not any(m.id == event.reply_message_id and is_visible(m) for m in messages[user_at:]):
        raise RetryableError("turn_not_found", "the turn's reply is not visible")
    current = [m for m in messages[user_at:] if m.turn_id == event.turn_id]
    return current, messages[:user_at]


def _with_id(messages: Sequence[Message], message_id: str) -> Message | None:
    return next((m for m in messages if m.id == message_id), None)


def _reply(current: Sequence[Message], reply_id: str) -> AssistantMessage | None:
    reply = _with_id(current, reply_id)
    return reply if isinstance(reply, AssistantMessage) else None


def _earlier_turns(earlier: Sequence[Message]) -> list[carry_forward.TurnText]:
    """The earlier turns the state fold reads: at most the look-back, whole turns only."""
    looked_back = visible(earlier)[-STATE_LOOKBACK_MESSAGES:]
    turns: list[carry_forward.TurnText] = []
    for group in split_turns(looked_back):
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
) -> tuple[tuple[ResultRef, ...], DeferredGroups | None]:
    """Split refs into (fetch now, the groups held back until the dominant one is read).

    When every citation gives an estimate that bounds its rows (`bounding_estimate`) and one
    action's estimate dwarfs all others (the dominance rule), only that action's artifacts
    are read first: the others were lookups. The others' estimates bound their real rows from
    above (de-duplication only removes rows), so if the dominant group's real rows still
    dominate those estimates, the others would lose.
    """
    totals: dict[str, int] = {}
    for ref in refs:
        estimate = bounding_estimate(ref.citation)
        if estimate is None:
            return tuple(refs), None
        totals[ref.action] = totals.get(ref.action, 0) + estimate
    if len(totals) < 2:
        return tuple(refs), None
    largest = max(totals, key=lambda action: totals[action])  # first called wins a tie
    others = sum(rows for action, rows in totals.items() if action != largest)
    if not dominates(totals[largest], others):
        return tuple(refs), None
    now = tuple(r for r in refs if r.action == largest)
    return now, DeferredGroups(tuple(r for r in refs if r.action != largest), others)


def _confine(inp: TurnInput, paths: Iterable[str | None]) -> None:
    """Check each artifact path: one outside the conversation's artifacts is never read
    (PermanentError not_authorized)."""
    cid = inp.event.conversation_id
    for path in paths:
        if path is not None:
            confine_artifact(path, inp.artifacts_container, cid)


def _confine_paths(inp: TurnInput, messages: Sequence[Message]) -> None:
    """Check the artifact path of every visible result, whatever it says."""
    tools = (m for m in visible(messages) if isinstance(m, ToolMessage))
    _confine(inp, (result.artifact for tool in tools for result in tool.results))


def _confined(inp: TurnInput, refs: Sequence[ResultRef]) -> tuple[ResultRef, ...]:
    """The refs, each path checked."""
    assert all(ref.artifact is not None for ref in refs)
    _confine(inp, (ref.artifact for ref in refs))
    return tuple(refs)


def _completed_at(inp: TurnInput) -> datetime:
    """When the turn completed, for the download file name: the event's `occurred_at`; when
    that does not parse, the reply's `created_at`, so that a redelivery or a replay names
    the file alike; the clock only when neither parses."""
    at = parse_timestamp(inp.event.occurred_at)
    if at is None:
        reply = _with_id(inp.messages, inp.event.reply_message_id)
        at = parse_timestamp(reply.created_at) if reply is not None else None
    return at or inp.now


def _plan(
    inp: TurnInput,
    request: ExportRequest,
    source: RowSource,
    table: Table | None,
    selection: Selection | None,
    why: ExportSelection,
) -> ExportPlan:
    event = inp.event
    fmt: ExportFormat = request.format
    action = None
    if selection is not None and len(selection.actions) == 1:
        action = selection.actions[0]
    at = _completed_at(inp)
    eid = export_id(event.conversation_id, event.turn_id, fmt)
    if table is not None:
        table = without_secret_columns(table)
    return ExportPlan(
        facts=request.facts,
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
