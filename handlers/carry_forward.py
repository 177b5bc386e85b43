"""Clarification detection and the carry-forward state machine (docs/contract/decision.md step 4).

Every rule of the request state machine lives here; nothing else decides it.

States: `Idle`, or `Awaiting(format, request_text)` after a request whose reply asked one
clarifying question. Per turn, from the state before it (`step`):

1. Empty (whitespace-only) user text: `no_request`, state `Idle`, even while awaiting.
2. The text requests pdf, docx or md: `unsupported_format`, state `Idle`; a pending
   request is dropped.
3. From `Awaiting(F, R)`, when the whole text calls the request off ("never mind", "no
   thanks", "cancel that", "forget it") or it refuses F by name and requests no format
   ("forget the csv", "don't make a csv"): `no_request`, state `Idle`.
4. From `Awaiting(F, R)`, when the text names no format or names F again: the turn
   carries request F, and R (the original request text) is what step 5 judges. Its reply
   a clarification again: `clarification_limit` (one clarification per request), else
   `request`. Either way the state becomes `Idle`.
5. Otherwise (from `Idle`, or awaiting and another supported format is named, which
   drops the pending request): no format is `no_request`; a format with a clarification
   reply is `clarification` and the state becomes `Awaiting(format, text)`; a format
   with any other reply is `request`.

So `Awaiting` lasts exactly one user turn: every outcome but `clarification` leaves `Idle`.

A reply is a clarification when its message says so (`clarification: true/false` wins);
when unknown, when its text is at most 500 characters, one of its questions (a sentence
ending in "?") asks about row shape or columns, and it holds no table (`find_table`).

The state before a turn is a pure function of the earlier turns (`state_before`): after
any turn whose reply is not a clarification the state is `Idle`, so the fold starts after
the newest such turn. Redelivery and replay in any order therefore agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from handlers.formats import read_formats
from handlers.tables import find_table
from schemas.documents import AssistantMessage
from schemas.records import StateAfter
from schemas.vocabulary import UNSUPPORTED_FORMATS, RequestFormat


class Idle(msgspec.Struct, frozen=True):
    """No request is pending."""


class Awaiting(msgspec.Struct, frozen=True):
    """A request whose reply asked a clarification waits for the next user turn."""

    format: RequestFormat
    request_text: str


State = Idle | Awaiting
RequestOutcome = Literal[
    "request", "clarification", "clarification_limit", "no_request", "unsupported_format"
]


class Step(msgspec.Struct, frozen=True):
    """One turn's outcome and the state after it."""

    outcome: RequestOutcome
    format: RequestFormat | None  # requested or carried format (None for no_request)
    carried: bool  # the request came from Awaiting
    request_text: str  # what step 5 judges: the original text R when carried
    state_after: State


class TurnText(msgspec.Struct, frozen=True):
    """What the fold needs of an earlier turn."""

    user_text: str
    reply: AssistantMessage | None


# --- clarification -------------------------------------------------------------------------

CLARIFICATION_MAX_CHARS: Final = 500

# Where a sentence ends: after "!", "?" or a newline, and at a "." followed by a space and
# then anything but a lower-case letter. A "." inside a number ("0.5 s") or before a word
# that carries on the sentence ("e.g. timestamp", "raw vs. hourly") ends nothing.
_SENTENCE_END: Final = re.compile(r"(?<=[!?\n])|\.(?=\s)(?!\s+[a-z])")
# Questions about the row shape or the columns of the table to be written: which columns
# or fields, whether to include, add or drop one, all of them or only some.
_SHAPE_QUESTION: Final = re.compile(
    r"\b(?:which|what)\s+(?:\w+\s+)?"
    r"(?:columns?|fields?|attributes?|parameters?)\b"
    r"|\b(?:columns?|fields?)\s+(?:do|would|should|shall)\s+(?:you|i|we)\b"
    r"|\binclude\s+which\b"
    r"|\b(?:include|add|keep|drop|remove|exclude|export)\s+(?:[\w-]+\s+){0,3}?(?:columns?|fields?)\b"
    r"|\b(?:all|only|just)\s+(?:of\s+)?(?:the\s+)?(?:[\w-]+\s+)?(?:columns|fields)\b"
    r"|\b(?:should|shall|would|will|do|does)\s+(?:(?:each|every|the)\s+)?rows?\b"
    r"|\b(?:each|every|one|a|single)\s+row\b"
    r"|\brows?\s+per\b"
    r"|\bhow\s+(?:should|do\s+you\s+want|would\s+you\s+like)\s+"
    r"(?:(?:me\s+to|i|we)\s+(?:\w+\s+){1,2}?)?(?:the\s+)?(?:rows?|columns?|table)\b"
    # "do you want the timestamp column?", "would you like the columns a and b only?"
    r"|\b(?:do|would|will)\s+you\s+(?:want|need|like|prefer)\s+(?:the\s+|a\s+|an\s+)?"
    r"(?:[\w-]+\s+){0,2}?(?:columns?|fields?)\b"
    # "any particular columns you want?", "what should the columns be?", "quick question:
    # columns?"
    r"|\b(?:any|particular|specific)\s+(?:particular\s+|specific\s+)?(?:columns|fields)\b"
    r"|\bwhat\s+should\s+(?:the\s+)?(?:columns|fields|rows)\b"
    r"|(?:^|:)\s*(?:the\s+)?(?:columns|fields)\s*\?"
    # "each sample on its own row?", "should each line be one sample?"
    r"|\bon\s+(?:its|their|a|one|separate|each)\s+(?:own\s+)?(?:rows?|lines?)\b"
    r"|\b(?:should|shall|would|will|do|does)\s+(?:each|every)\s+(?:line|entry|record)\b"
    r"|\b(?:row|table|column)\s+(?:shape|layout|structure|format|granularity)\b"
    r"|\bformat\s+for\s+(?:the\s+|each\s+)?rows?\b"
    r"|\bgranularity\b|\bwide\s+or\s+long\b|\blong\s+or\s+wide\b"
    # "the unit column included?", "the timestamp and value columns only?"
    r"|\b(?:columns?|fields?)\s+(?:included|added|kept|dropped|removed|excluded)\b"
    r"|\binclude\s+(?:only\s+)?(?:the\s+)?[\w-]+\s+(?:and|&)\s+[\w-]+\s+(?:columns|fields)\b"
    # "one line per reading": a row by another name
    r"|\b(?:each|every|one|a|single)\s+(?:line|entry|record)\s+(?:per|for\s+each)\b"
    # the grain: every sample, or one row per period ("the raw samples, or hourly averages?")
    r"|\b(?:raw|individual|all)(?:\s+[\w-]+)?,?\s+(?:or|vs\.?|versus)\s+(?:the\s+)?"
    r"(?:hourly|daily|weekly|monthly|per-\w+|aggregated|averaged|summari[sz]ed)\b"
    r"|\b(?:hourly|daily|weekly|monthly|aggregated|averaged)(?:\s+[\w-]+)?,?\s+(?:or|vs\.?"
    r"|versus)\s+(?:the\s+)?(?:raw|individual|all)\b"
    # how fields become columns: "flatten the nested fields into separate columns?", "use
    # the original field names?"
    r"|\bflatten\w*|\b(?:separate|individual|its\s+own|their\s+own)\s+(?:columns?|fields?)\b"
    r"|\b(?:use|keep|prefer|want)\s+(?:the\s+)?(?:[\w-]+\s+)?(?:column|field)\s+"
    r"(?:names|headers|order)\b",
    re.IGNORECASE,
)
# A reply that says it delivered the file answered; a question after it offers more
# ("Here is the CSV. Want me to add a unit column?").
_FILE: Final = r"(?:csv|json|xml|xlsx|excel|spreadsheet|workbook|file|export)"
_DELIVERED: Final = re.compile(
    rf"\bhere(?:'s|\s+is|\s+are)\s+(?:the|your)\s+(?:[\w-]+\s+){{0,2}}?{_FILE}s?\b"
    r"|\bi(?:'ve|\s+have)?\s+(?:exported|created|attached|generated|saved|written|prepared)\b"
    r"|\bexported\s+(?:all\s+)?(?:\d|as\b|to\b|in\b)"
    rf"|\b{_FILE}\s+(?:is|are)\s+(?:attached|ready)\b"
    r"|\bthe\s+file\s+(?:has|contains|holds|includes)\b",
    re.IGNORECASE,
)


def is_clarification(reply: AssistantMessage | None) -> bool:
    """Whether the reply asks the user a clarifying question instead of answering."""
    if reply is None:
        return False
    if reply.clarification is not None:
        return reply.clarification
    content = reply.content or ""
    if len(content) > CLARIFICATION_MAX_CHARS:
        return False
    asks_shape = any(
        sentence.endswith("?") and _SHAPE_QUESTION.search(sentence)
        for sentence in _SENTENCE_END.split(content)
    )
    if not asks_shape or _DELIVERED.search(content.replace("\u2019", "'")):
        return False
    return find_table(content) is None


# --- the transition ------------------------------------------------------------------------

# An answer that calls the pending request off, the whole message: "never mind", "no
# thanks", "cancel that", "actually, don't bother", "forget it". "No" alone is no such
# answer ("Should each row be one sample?" "No"), nor is "never mind the columns".
_CANCELS: Final = re.compile(
    r"\s*(?:(?:ok(?:ay)?|oh|ah|hmm+|actually|well|sorry|nah|no|nope|thanks|thank\s+you)"
    r"[\s,.!-]+)*"
    r"(?:never\s*mind|nvm|cancel(?:\s+(?:it|that|this|the\s+(?:request|export|file)))?"
    r"|forget\s+(?:it|that|about\s+it)|don'?t\s+bother|do\s+not\s+bother"
    r"|no[\s,]+thanks|no[\s,]+thank\s+you|no\s+need|not\s+needed(?:\s+anymore)?"
    r"|skip\s+(?:it|that)|stop|abort|scratch\s+that|leave\s+it)"
    r"(?:[\s,.!-]+(?:then|for\s+now|after\s+all|thanks|thank\s+you|please"
    r"|i'?ll\s+(?:do|handle|make)\s+it\s+(?:myself|later)))*[\s.!]*",
    re.IGNORECASE,
)


def step(state: State, user_text: str, reply_is_clarification: bool) -> Step:
    """One turn's transition of the carry-forward state machine."""
    if not user_text.strip():
        return Step("no_request", None, False, user_text, Idle())
    reading = read_formats(user_text)
    requested = reading.format
    if requested in UNSUPPORTED_FORMATS:
        return Step("unsupported_format", requested, False, user_text, Idle())
    if (
        isinstance(state, Awaiting)
        and requested is None
        and (
            _CANCELS.fullmatch(user_text.replace("\u2019", "'")) or state.format in reading.refused
        )
    ):
        return Step("no_request", None, False, user_text, Idle())  # "never mind", "forget the csv"
    if isinstance(state, Awaiting) and requested in (None, state.format):
        outcome: RequestOutcome = "clarification_limit" if reply_is_clarification else "request"
        return Step(outcome, state.format, True, state.request_text, Idle())
    if requested is None:
        return Step("no_request", None, False, user_text, Idle())
    if reply_is_clarification:
        return Step("clarification", requested, False, user_text, Awaiting(requested, user_text))
    return Step("request", requested, False, user_text, Idle())


# --- the state before a turn ---------------------------------------------------------------


def state_before(earlier: Sequence[TurnText]) -> State:
    """The state before the current turn, folded from the earlier turns (oldest first)."""
    clarified = [is_clarification(turn.reply) for turn in earlier]
    # A turn answered without a clarification always leaves Idle, so nothing before it counts.
    start = next((i + 1 for i in reversed(range(len(earlier))) if not clarified[i]), 0)
    state: State = Idle()
    for turn in earlier[start:]:
        state = step(state, turn.user_text, True).state_after
    return state


def state_after_record(state: State) -> StateAfter:
    """The turn record's `state_after` for a state."""
    if isinstance(state, Awaiting):
        return StateAfter(state="awaiting", format=state.format)
    return StateAfter(state="idle", format=None)
