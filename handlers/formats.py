"""Which file format a user message requests (docs/contract/decision.md step 4, format detection).

The text is read sentence by sentence; each mention of a format is judged in its sentence:

- Mentions: csv, json, xml, xlsx ("xlsx", "xls", "excel", "spreadsheet"), pdf,
  docx ("docx", ".doc", and "word" only beside document/file/format or after in/as/to/into),
  md ("markdown", "md" as a word). Matching ignores case and needs word boundaries (of ASCII
  letters, digits and "_"), so "csvs", ".csv", "CSV" and "CSVで" count and "jsonify" or
  "jsonl" do not.
- A negated mention does not request: a negation ("don't", "not", "no", "never",
  "without", "instead of", "rather than", ...) earlier in the same clause, at most eight
  words back, with no "but" and no "and <verb>" between resetting it. A format named
  between the negation and a later verb of asking was what it refused, and the verb starts
  a new clause ("instead of json give me xml", "I don't want json I want xml"). Cancelling
  refuses too: "forget the csv", "never mind the csv", "scrap the csv" (not "don't forget
  the csv"). Before a conversion target, a negation that describes the data ("the rows
  with no errors to csv") does not refuse it (`_describes_data`).
- A mention after a request for code ("write a Python script that converts json to csv")
  is what the code handles, not a request, unless a verb of asking starts a request of
  its own between them ("..., and export it as xml"): `_code_asked_for`.
- A mention whose nearest earlier cue in its sentence talks about the format ("what is",
  "how do I", "explain", "better than", ...) does not request.
- In a question (ends with "?", or opens like one: "what is", "is", "does", ...) a
  mention requests only when the question is a polite request ("can you", "could I",
  "would you mind", "is it possible", "how about", ...) or a bare fragment ("create a
  csv?"), and the nearest earlier cue is a request verb ("create", "export", "get", "put",
  "show", "retrieve", "redo", ...). "csv or json?" therefore requests nothing. A verb of
  looking ("see", "view", "list", "print", "copy") asks only for a conversion target:
  "could I see it as json?" requests json, "can you see the csv?" nothing. A fragment that
  names a conversion target with no verb before it asks for it ("and in xml?"). "Do it in
  csv" and "do a csv" are imperatives, not questions ("do csv files ..." asks one).
- A mention of what the user already has is the input, not the output, and does not
  request: a mention right after "this", "these", "my", "our", "attached", "uploaded",
  "existing", ... (one adjective may sit between: "my sales spreadsheet"), after "from"
  ("from the json"), after "attached is" or "here is" ("here's the json"), or whose nearest
  earlier cue is a verb that works on a file the user
  holds ("analyze", "validate", "check", "review", "parse", "import", "fix", ...), or
  after "in the" ("the outliers in the spreadsheet"), or that the user says they have
  ("I have a csv", "we've already got the json"; "can I have a csv" asks for one), or
  that the data already is in ("the data is in json", "I have it in csv"; "make sure it's
  in csv" asks).
- A conversion target is a mention right after "to", "into", "as" (not "as well as",
  "such as") or "in" (not "in the": that is where something is), or an arrow ("->", "=>",
  "→", "⇒", spaced or not), with an optional article or file name between ("to
  XML", "as a csv", "in excel", "as data.csv", "json -> csv").
- A correction takes back the formats requested before it: "actually", "sorry", "I
  mean(t)", "or rather", "wait", "on second thought", "correction", "make that", "change
  it to", "no" before a pause ("json - no, csv"), or "instead" after the later mention
  ("a csv instead"). It adds instead when "also", "both", "plus", "another" come between
  or "too"/"as well" right after ("actually, a json too").
- Several requested: the first conversion target wins ("convert JSON to XML", "the json
  as csv"), else the first mentioned. "excel" and "spreadsheet" mean csv when csv is
  requested anywhere in the text ("a csv I can open in excel"); an explicit "xlsx"/"xls"
  always means xlsx.
- A message's cost grows with its length, not with its length times its mentions: the
  words before a mention are read back from it only as far as the rules look
  (`handlers/context.py`), the phrase before it is cut out by bisection.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from functools import lru_cache
from typing import Final, Literal

import msgspec
from msgspec.structs import replace

from handlers.context import words_before
from schemas.vocabulary import RequestFormat

_I: Final = re.IGNORECASE


class _Mention(msgspec.Struct, frozen=True):
    format: RequestFormat
    soft: bool  # an "excel"/"spreadsheet" alias, which yields to a requested csv
    start: int
    target: bool = False  # named as what to convert into ("to xml", "as a csv")


# A mention's word boundaries are ASCII's: "CSVで" and "CSV로" (a format glued to a script
# written without spaces) name csv; "jsonify" and "csv_export" do not.
_M: Final = _I | re.ASCII
_MENTIONS: Final[tuple[tuple[RequestFormat, bool, re.Pattern[str]], ...]] = (
    ("csv", False, re.compile(r"\bcsvs?\b", _M)),
    ("json", False, re.compile(r"\bjson\b", _M)),
    ("xml", False, re.compile(r"\bxml\b", _M)),
    ("xlsx", False, re.compile(r"\bxlsx?\b", _M)),
    ("xlsx", True, re.compile(r"\bexcel\b|\bspreadsheets?\b", _M)),
    ("pdf", False, re.compile(r"\bpdfs?\b", _M)),
    (
        "docx",
        False,
        re.compile(
            r"\bdocx\b|\.doc\b|\b(?:ms|microsoft)\s+word\b"
            r"|\bword\s+(?:documents?|docs?|files?|format)\b"
            r"|\b(?:in|as|to|into)\s+word\b",
            _M,
        ),
    ),
    ("md", False, re.compile(r"\bmarkdown\b|\bmd\b", _M)),
)

# Sentence ends: terminal punctuation followed by space (so "data.csv" stays whole), newlines,
# semicolons.
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+|\n+|;")
_PREAMBLE: Final = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|yeah|yep|yup|sure|great|thanks|thank\s+you|thx|please|so|and|also"
    r"|hey|hi|hello|well|now|then|alright|cool|perfect|nice|but|actually|hmm+|oh|ah|right"
    r"|fine|good)\b[\s,!.:-]*)+",
    _I,
)
_POLITE_START: Final = re.compile(
    r"(?:please\s+)?(?:(?:can|could|would|will|may|might|shall)\b"
    r"|(?:do|would)\s+you\s+mind\b|(?:is|would)\s+it\s+(?:be\s+)?possible\b"
    r"|is\s+there\s+(?:a|any)\s+(?:way|chance)\b|any\s+chance\b|(?:how|what)\s+about\b)",
    _I,
)
_WH_QUESTION_START: Final = re.compile(
    r"(?:what|how|why|which|who|whom|whose|when|where)(?:'s\b|s\b|\s+(?:is|are|was|were|do"
    r"|does|did|can|could|should|would|will|to|kind|type|format|one|not)\b)",
    _I,
)
_WH_START: Final = re.compile(r"(?:what|how|why|which|who|whom|whose|when|where)\b", _I)
_AUX_START: Final = re.compile(
    r"(?:is|are|was|were|am|does|did|should|must|has|have|had|isn't|aren't|doesn't|didn't"
    # "do it in csv", "do that as json", "do a csv" are imperatives ("do you", "does it",
    # "do csv files ..." ask)
    r"|do(?!\s+(?:it|that|this|so|the\s+same)\b)"
    r"(?!\s+(?:(?:a|an|one|the)\s+)?(?:csvs?|json|xml|xlsx?|excel|spreadsheets?|pdfs?|docx"
    r"|markdown)\b(?!\s+(?:files|documents|formats)\b)))\b(?!\s+not\b)",
    _I,
)

_REQUEST_CUE: Final = re.compile(
    r"\b(?:creat(?:e|es|ed|ing)|mak(?:e|es|ing)|made|export(?:s|ed|ing)?"
    r"|generat(?:e|es|ed|ing)|giv(?:e|es|en|ing)|get(?:s|ting)?|send(?:s|ing)?|sent"
    r"|put(?:s|ting)?|convert(?:s|ed|ing)?|download(?:s|ed|ing)?|sav(?:e|es|ed|ing)"
    r"|produc(?:e|es|ed|ing)|build(?:s|ing)?|built|writ(?:e|es|ten|ing)"
    r"|output(?:s|ted|ting)?|turn(?:s|ed|ing)?|provid(?:e|es|ed|ing)"
    r"|attach(?:es|ed|ing)?|prepar(?:e|es|ed|ing)|dump(?:s|ed|ing)?|format(?:s|ted|ting)?"
    r"|render(?:s|ed|ing)?|return(?:s|ed|ing)?|shar(?:e|es|ed|ing)|email(?:s|ed|ing)?"
    r"|want|need|have|do|switch|chang(?:e|es|ed|ing)|emit|(?:how|what)\s+about)\b",
    _I,
)
# More verbs of asking for a file, and the same verbs done again ("redo", "re-export"): cues
# only. The negation rules keep `_REQUEST_CUE` alone, so "sensors not showing data as csv"
# still says which data.
_MORE_REQUEST_CUE: Final = re.compile(
    r"\bre-?(?:do(?:es|ne|ing)?|did|mak(?:e|es|ing)|made|creat(?:e|es|ed|ing)"
    r"|export(?:s|ed|ing)?|generat(?:e|es|ed|ing)|send(?:s|ing)?|sent|writ(?:e|es|ten|ing)"
    r"|format(?:s|ted|ting)?|build(?:s|ing)?|built|convert(?:s|ed|ing)?|run(?:s|ning)?|ran)\b"
    r"|\b(?:show(?:s|n|ed|ing)?|display(?:s|ed|ing)?|pull(?:s|ed|ing)?|fetch(?:es|ed|ing)?"
    r"|retriev(?:e|es|ed|ing)|packag(?:e|es|ed|ing)|bundl(?:e|es|ed|ing)|compil(?:e|es|ed|ing)"
    r"|deliver(?:s|ed|ing)?)\b",
    _I,
)
# Verbs that ask for a file only when they name what to make ("could I see it as json?",
# "can you list them in a csv?"); "can you see the csv?" may be about a file the user sent.
_LOOK_CUE: Final = re.compile(
    r"\b(?:see|sees|seeing|seen|saw|view(?:s|ed|ing)?|list(?:s|ed|ing)?|print(?:s|ed|ing)?"
    r"|cop(?:y|ies|ied|ying)|stor(?:e|es|ed|ing)|throw(?:s|n|ing)?|threw)\b",
    _I,
)
# After a refused format, one of these starts a new clause: "instead of json give me xml",
# "I don't want json I want xml".
_CLAUSE_VERBS: Final = frozenset({"use", "prefer", "choose", "pick", "try", "go"})
_ABOUT_CUE: Final = re.compile(
    r"\bwhat(?:'s|s|\s+is|\s+are|\s+was|\s+were|\s+does|\s+do)\b"
    # "how do I open", "how to make": swallow the verb so it is not read as a request
    r"|\bhow\s+(?:do|does|did|can|could|should|would|to|is|are)\b"
    r"(?:\s+(?:i|you|we|one|they|people))?(?:\s+[a-z']+)?"
    r"|\b(?:explain\w*|describ\w*|defin(?:e|es|ed|ing|ition)|differences?|compar\w*|versus"
    r"|vs|meaning|means?|learn|understand|why)\b"
    r"|\bbetter\s+than\b|\btell\s+me\s+about\b|\bstands?\s+for\b",
    _I,
)

# A verb that works on a file the user already holds: the format after it is the input.
_INPUT_CUE: Final = re.compile(
    r"\b(?:analy[sz](?:e|es|ed|ing)|validat(?:e|es|ed|ing)|check(?:s|ed|ing)?"
    r"|review(?:s|ed|ing)?|inspect(?:s|ed|ing)?|examin(?:e|es|ed|ing)|pars(?:e|es|ed|ing)"
    r"|import(?:s|ed|ing)?|debug(?:s|ged|ging)?|fix(?:es|ed|ing)?|proofread(?:s|ing)?"
    r"|look(?:s|ed|ing)?\s+(?:at|over|through))\b",
    _I,
)
# Words that say the file is the user's own, right before the mention.
_INPUT_DETERMINER: Final = re.compile(
    r"(?:\b(?:this|these|my|our|attached|uploaded|enclosed|pasted|existing|original)\s+"
    r"|\b(?:attached|uploaded|enclosed|pasted)\s+(?:a|an|the)\s+"  # "I uploaded a json"
    # "attached is a spreadsheet", "here's the json": the user hands it over
    r"|\b(?:(?:attached|enclosed|uploaded)\s+(?:is|are)|here(?:'s|\s+is|\s+are))"
    r"\s+(?:(?:a|an|the|some)\s+)?)"
    r"(?:(?!(?:to|into|as|in|a|an|the|of|for|and|or|from)\s)[a-z][\w-]*\s+)?$",
    _I,
)
# "from the json", "in the spreadsheet": where the data is now, not what to make.
_SOURCE_BEFORE: Final = re.compile(
    r"(?:\bfrom\s+(?:(?:the|a|an|this|my|our)\s+)?|\bin\s+(?:the|this|my|our)\s+)"
    r"(?:[a-z][\w-]*\s+)?$",
    _I,
)
# "I have a csv", "we've already got the json": the user holds it. Not after a word that makes
# it a question or a request ("can I have a csv", "could we have the json"): `_MODALS`.
_POSSESSION_BEFORE: Final = re.compile(
    r"(?:(?<![\w'])(?P<before>[a-z']+)\s+)?\b(?:i|we|you|they)"
    r"(?:\s+(?:already|now|also|still|just|only))?(?:\s+have|'ve)"
    r"(?:\s+(?:already|now|also|still|just|only))?(?:\s+got)?\s+"
    r"(?:(?:a|an|the|some|two|both|these|those|that|this|my|our)\s+)?(?:[a-z][\w-]*\s+)?$",
    _I,
)
# "the data is in json", "I have it in csv": where the data is now, not what to make (the
# target's "in" read as a place). Not after "make sure", "ensure", "check that": those ask
# (`_is_held_in` reads the words ahead of the subject, `lead`).
_HELD_IN_BEFORE: Final = re.compile(
    r"(?:(?<![\w'])(?P<lead>(?:[a-z']+\s+){1,5}))?"
    r"(?:\b[a-z]+(?:\s+(?:is|are|was|were)|'s|'re)"
    r"|\b(?:i|we|you|they)(?:'ve|\s+have)(?:\s+got)?\s+(?:it|them|this|that|these|those"
    r"|everything|(?:the|my|our)\s+[\w-]+))"
    r"(?:\s+(?:already|currently|now|all|still|stored|saved|kept))?"
    r"\s+in\s+(?:(?:a|an)\s+)?(?:[\w-]+\.)?$",
    _I,
)
_MODALS: Final = frozenset(
    {"can", "could", "may", "might", "would", "will", "shall", "should", "must", "do", "does",
     "did", "let"}
)  # fmt: skip
# Read past to find the word that asks: "make sure (that) (all) (the) data is in csv".
_AHEAD_OF_SUBJECT: Final = frozenset(
    {"that", "the", "a", "an", "all", "both", "each", "every", "some", "this", "these", "those",
     "my", "our", "your", "their", "his", "her", "its"}
)  # fmt: skip
_ASKS_BEFORE_HELD: Final = _MODALS | {"ensure", "check", "verify", "confirm"}
# "sure" asks after these or first in its clause ("make sure it's in csv", "sure it's in
# csv"); after any other word it says where the data is ("I'm sure it's in json").
_MAKES_SURE: Final = frozenset({"", "make", "making", "be"})
_PIECE: Final = re.compile(r"\S+")
_STEM: Final = re.compile(r"[\w-]+")
# An arrow names what to convert into as "to" does ("json -> csv", "xlsx→json").
_ARROWS: Final = ("->", "=>", "\u2192", "\u21d2")
# The word before the preposition starts where a run of word characters starts (a match
# from inside the run would start later than the one from its start): the search does not
# read a long run again from each of its positions.
_TARGET_BEFORE: Final = re.compile(
    r"(?:(?:(?<!\w)(?P<word>\w+)\s+)?\b(?P<prep>to|into|as|in)\s+"
    rf"|(?:{'|'.join(map(re.escape, _ARROWS))})\s*)"
    r"(?P<article>(?:a|an|the)\s+)?(?:[\w-]+\.)?$",
    _I,
)
# "as well as json", "such as csv": comparisons, not conversions.
_NOT_TARGET_BEFORE_AS: Final = frozenset({"well", "such", "same", "soon", "long", "much", "far"})

_CLAUSE_BREAK: Final = re.compile(r"[,;:!?()\[\]\n]|\s[-–—]\s|\.\s")
_WORD: Final = re.compile(r"[a-z]+(?:'[a-z]+)?")
_NEGATION_WINDOW: Final = 8
# "forget the csv" refuses it; "don't forget the csv" does not.
_CANCELS: Final = frozenset({"forget", "scrap", "ditch"})
_NEGATIONS: Final = _CANCELS | frozenset(
    {
        "no", "not", "never", "without", "nor", "neither", "none", "nope", "cannot", "dont",
        "doesnt", "didnt", "cant", "wont", "wouldnt", "shouldnt", "couldnt", "isnt", "arent",
        "stop", "skip", "cancel", "avoid", "except", "excluding",
    }
)  # fmt: skip
_NEGATION_BIGRAMS: Final = frozenset({("instead", "of"), ("rather", "than"), ("never", "mind")})
# "don't forget to create a csv" asks for one; "not only csv but" does not refuse it.
_NEGATION_EXEMPT_NEXT: Final = frozenset({"forget", "hesitate", "mind", "only", "just"})
_RESETS: Final = frozenset({"but", "however", "though", "although"})
# Negations that may describe the data ("with no errors", "except the test rows") and who
# says a negation that refuses ("I don't", "please never", "do not", "just not").
_DESCRIPTIVE_NEGATIONS: Final = frozenset(
    {"no", "not", "never", "without", "none", "except", "excluding"}
)
_SPEAKERS: Final = frozenset(
    {
        "i", "we", "you", "please", "just", "do", "does", "did", "so", "then", "and", "or",
        "it", "id", "wed", "youd", "ill", "well", "lets", "would", "should", "could", "can",
        "will", "must", "may", "might", "rather", "better", "but", "also", "really",
    }
)  # fmt: skip
_TARGET_WORDS: Final = frozenset({"to", "into", "as", "in", "a", "an", "the"})

# Words that take back the formats asked for before them: "json, sorry, I meant csv", "xml.
# no wait, csv", "export json. Actually, make it csv". "No" corrects when a pause follows
# it ("json - no, csv"); before a format it refuses that format ("no json").
_CORRECTION: Final = re.compile(
    r"\b(?:actually|sorry|correction|i\s+mean|i\s+meant|or\s+rather|on\s+second\s+thoughts?"
    r"|scratch\s+that|make\s+that|chang(?:e|ed)\s+(?:that|it)\s+to|changed\s+my\s+mind"
    r"|wait\b(?!\s+(?:for|until|till|on)\b))|\bno\b(?=\s*(?:[,.!;:]|[-\u2013\u2014]))",
    _I,
)
# "a csv instead" replaces what was asked for before ("instead of json" refuses json).
# Each starts at a mention and reads its letters only: a mention glued to more letters
# ("CSVで" repeated) is not read to the end of the run from each mention.
_INSTEAD_AFTER: Final = re.compile(r"\.?[a-z]+\s+(?:[a-z]+\s+){0,2}?instead\b(?!\s+of\b)", _I)
# After a correction, words that add a format to the ones asked for, before it or after it.
_ADDITION: Final = re.compile(r"\b(?:also|additionally|both|plus|another)\b", _I)
_ADDED_AFTER: Final = re.compile(r"\.?[a-z]+[\s,]+(?:[a-z]+\s+){0,2}?(?:too|as\s+well)\b", _I)

# A verb of asking whose object is code: the formats named after it are what the code
# reads or writes, not a file to make ("write a Python script that converts json to csv").
_CODE_VERB: Final = (
    r"\b(?:writ(?:e|ing)|creat(?:e|ing)|generat(?:e|ing)|giv(?:e|ing)\s+me|mak(?:e|ing)"
    r"|build(?:ing)?|show\s+me|provid(?:e|ing)|need|want)\s+(?:me\s+)?"
    r"(?:(?:a|an|some|the|this|that)\s+)?"
)
_CODE_LANGUAGE: Final = (
    r"(?:python|sql|bash|shell|powershell|javascript|js|typescript|node|excel|vba|pandas|jq"
    r"|awk|go|rust|java|kql|linux|unix|cli|vb)"
)
_CODE_REQUEST: Final = re.compile(
    rf"{_CODE_VERB}(?:(?:quick|short|simple|small|little|{_CODE_LANGUAGE})\s+){{0,3}}"
    r"(?:scripts?|functions?|snippets?|programs?|one-?liners?|macros?|query|queries"
    r"|commands?|regex(?:es)?|regular\s+expressions?|lambdas?)\b"
    # "code" is often data ("the code for each device"): code in a language, or written
    rf"|{_CODE_VERB}(?:(?:quick|short|simple|small|little)\s+)?{_CODE_LANGUAGE}\s+code\b"
    r"|\bwrit(?:e|ing)\s+(?:me\s+)?(?:(?:some|the|this|that)\s+)?code\b",
    _I,
)
# What the code is to do follows it: "a script that ...", "a function to ...".
_CODE_PURPOSE: Final = re.compile(r"\s+(?:that|which|to|for|in|using|with|so)\b", _I)
# "..., and export it as csv": a request for a file of its own after the code's.
_CODE_RESTART: Final = re.compile(
    r"\b(?:and|then|also|plus|but)\s+(?:(?:then|also|please|just|now)\s+)*"
    r"(?:create|make|export|generate|give|send|save|produce|build|output|put|convert"
    r"|download|attach|prepare|dump|provide|share|email)\b",
    _I,
)

_SentenceKind = Literal["statement", "polite", "fragment", "interrogative"]


class FormatReading(msgspec.Struct, frozen=True):
    """What a user message says about formats: the one it requests, and the ones it refuses
    or cancels by name ("forget the csv", "don't make a json")."""

    format: RequestFormat | None
    refused: frozenset[RequestFormat]


def detect_format(text: str) -> RequestFormat | None:
    """The format a user message requests, or None."""
    return read_formats(text).format


def refused_formats(text: str) -> frozenset[RequestFormat]:
    """The formats a user message refuses or cancels by name: its negated mentions."""
    return read_formats(text).refused


def read_formats(text: str) -> FormatReading:
    """The format a user message requests and the formats it refuses, in one reading."""
    normalised = text.replace("\u2019", "'").replace("\u2018", "'")
    requested: list[_Mention] = []
    refused: list[RequestFormat] = []
    # The last correction read after a format was asked for: its sentence's index and its
    # position in it.
    correction: tuple[int, int] | None = None
    for index, sentence in enumerate(_sentences(normalised)):
        corrections = [m.start() for m in _CORRECTION.finditer(sentence)]
        read = 0  # the sentence's corrections read so far
        for mention in _requested_in(sentence, refused):
            while read < len(corrections) and corrections[read] < mention.start:
                if requested:
                    correction = (index, corrections[read])
                read += 1
            # a correction, or "instead" after the mention, takes back what was asked for
            # before ("json, sorry, I meant csv", "json. csv instead"), unless it adds to
            # it ("actually, a json too")
            if requested and (
                (correction is not None and not _adds(sentence, index, correction, mention))
                or _INSTEAD_AFTER.match(sentence, mention.start)
            ):
                requested.clear()
            correction = None
            requested.append(mention)
        if requested and read < len(corrections):
            correction = (index, corrections[-1])
    return FormatReading(_chosen(requested), frozenset(refused))


def _chosen(requested: list[_Mention]) -> RequestFormat | None:
    """Of the formats requested, the one that wins: the first conversion target, else the
    first mentioned; "excel"/"spreadsheet" yield to a csv requested beside them."""
    if not requested:
        return None
    csv_requested = any(m.format == "csv" for m in requested)
    chosen = next((m for m in requested if m.target), requested[0])
    return "csv" if chosen.soft and csv_requested else chosen.format


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _adds(sentence: str, index: int, correction: tuple[int, int], mention: _Mention) -> bool:
    """Whether the words from a correction to a mention, or the few words after it, add a
    format rather than replace one ("actually, can you also make a json?", "actually, a
    json too"). `index`: the sentence's; each stretch is read once."""
    since = correction[1] if correction[0] == index else 0
    return (
        _ADDITION.search(sentence, since, mention.start) is not None
        or _ADDED_AFTER.match(sentence, mention.start) is not None
    )


def _requested_in(sentence: str, refused: list[RequestFormat]) -> list[_Mention]:
    """The sentence's mentions that request their format, in order; the formats of its
    negated or cancelled mentions are appended to `refused`."""
    mentions = _mentions(sentence)
    if not mentions:
        return []
    kind = _sentence_kind(sentence)
    cues, looks = _cues(sentence)
    pieces = _Pieces(sentence)
    code = _code_asked_for(sentence)
    requested = []
    for mention in mentions:
        if code(mention.start):
            continue  # what code should do: "write a script that converts json to csv"
        phrase = pieces.phrase_before(mention.start)
        if phrase is not None and _is_held_in(phrase):
            continue  # the input: "the data is in json, convert it to csv"
        target = phrase is not None and _is_target(phrase)
        # the last nine words of the clause: the negation window and the word before it
        words = words_before(sentence, mention.start, _NEGATION_WINDOW + 1, _WORD, _CLAUSE_BREAK)
        if _is_negated(words, target):
            refused.append(mention.format)
            continue
        if not target and phrase is not None and _is_input(phrase):
            continue
        cue = _nearest_cue(cues, mention.start)
        if cue == "about" or (cue == "input" and not target):
            continue
        if kind == "interrogative":
            continue
        # In a question, a target with no cue before it asks when the question is a bare
        # fragment ("and in xml?") or a verb of looking comes before it ("could I see it as
        # json?"). Looking never stands in for a verb of asking before it ("make a device
        # list csv?").
        if kind in ("polite", "fragment") and not (
            cue in ("request", "input")
            or (
                target
                and cue is None
                and (kind == "fragment" or bisect_left(looks, mention.start) > 0)
            )
        ):
            continue
        requested.append(replace(mention, target=target))
    return requested


def _code_asked_for(sentence: str) -> Callable[[int], bool]:
    """Whether a position of the sentence lies in a request for code ("write a Python
    script that converts json to csv", "give me a SQL query that exports to csv"): after
    a verb of asking whose object is code, with no verb of asking for a file after it
    that starts a request of its own ("..., and export it as csv")."""
    starts = [
        m.start()
        for m in _CODE_REQUEST.finditer(sentence)
        if _CODE_PURPOSE.match(sentence, m.end())
    ]
    if not starts:
        return lambda position: False
    restarts = [m.start() for m in _CODE_RESTART.finditer(sentence)]

    def in_code(position: int) -> bool:
        at = bisect_left(starts, position + 1)
        if not at:
            return False
        since = starts[at - 1]
        # a restart after the code was asked for and before the position ends its reach
        return bisect_left(restarts, position) == bisect_left(restarts, since)

    return in_code


# The most pieces (runs of non-whitespace) a match of a pattern read before a mention spans,
# counting the piece the mention starts inside ("data.json"): `_HELD_IN_BEFORE`'s 14, five
# words of `lead` ("make sure that all the") and nine of "we have got the data already in a
# data."; `_POSSESSION_BEFORE`'s "so we already have already got the new" 8;
# `_TARGET_BEFORE`'s "well as a data." and `_INPUT_DETERMINER`'s "here is the sales" 4;
# `_SOURCE_BEFORE`'s "from the sales" 3.
_PHRASE_PIECES: Final = 14


class _Pieces:
    """Where a sentence's pieces (runs of non-whitespace) and its runs of word characters
    and hyphens start, found once: the phrase before a mention is cut out by bisection, not
    by reading back."""

    def __init__(self, sentence: str) -> None:
        self.sentence = sentence
        self.starts = [m.start() for m in _PIECE.finditer(sentence)]
        stems = [m.span() for m in _STEM.finditer(sentence)]
        self.stem_starts = [start for start, _ in stems]
        self.stem_ends = [end for _, end in stems]

    def phrase_before(self, position: int) -> str | None:
        """The text before `position` from the start of its last `_PHRASE_PIECES` pieces
        on (the piece holding the mention among them when it starts inside one), which holds
        every match of the patterns read before a mention: each ends at the mention and
        spans at most that many (`_PHRASE_PIECES`). None when no match can end there: the
        text ends inside a piece, neither at an arrow ("json->") nor after a file name's
        stem that starts the piece or follows an arrow ("data.", "json->data.").

        After an arrow inside a piece only the arrow's target pattern can match (every
        other one ends in a space), so the phrase is the arrow on: a piece of thousands of
        joined arrows ("csv->csv->...") is not read again for each of its mentions."""
        text = self.sentence
        k = bisect_left(self.starts, position)  # the pieces that start before the mention
        if position and not text[position - 1].isspace():
            arrow = _arrow_before(text, position)
            if arrow is not None:
                return text[arrow:position]
            if text[position - 1] != ".":
                return None
            at = bisect_left(self.stem_ends, position - 1)
            if at == len(self.stem_ends) or self.stem_ends[at] != position - 1:
                return None
            stem = self.stem_starts[at]
            if stem != self.starts[k - 1]:
                arrow = _arrow_before(text, stem)
                return None if arrow is None else text[arrow:position]
        return text[self.starts[k - _PHRASE_PIECES] if k > _PHRASE_PIECES else 0 : position]


def _arrow_before(text: str, end: int) -> int | None:
    """Where an arrow that ends at `end` starts, or None."""
    for arrow in _ARROWS:
        if text.endswith(arrow, 0, end):
            return end - len(arrow)
    return None


def _is_target(before: str) -> bool:
    """Whether the text before a mention names it as what to convert into."""
    found = _TARGET_BEFORE.search(before)
    if found is None:
        return False
    prep = (found.group("prep") or "").lower()  # empty after an arrow
    if prep == "as" and (found.group("word") or "").lower() in _NOT_TARGET_BEFORE_AS:
        return False
    # "in the spreadsheet" is where something is; "in a spreadsheet" is what to make.
    return not (prep == "in" and (found.group("article") or "").strip().lower() == "the")


def _is_input(before: str) -> bool:
    """Whether the text before a mention names the file the user already has."""
    if _INPUT_DETERMINER.search(before) or _SOURCE_BEFORE.search(before):
        return True
    # "I have a csv" holds it; "can I have a csv" asks for it
    found = _POSSESSION_BEFORE.search(before)
    return found is not None and (found.group("before") or "").lower() not in _MODALS


def _is_held_in(before: str) -> bool:
    """Whether the text before a mention says the data already is in that format, and no
    word ahead of its subject makes it a request ("make sure the data is in csv", "check
    that it's in xml")."""
    found = _HELD_IN_BEFORE.search(before)
    if found is None:
        return False
    lead = (found.group("lead") or "").lower().split()
    while lead and lead[-1] in _AHEAD_OF_SUBJECT:
        lead.pop()
    if not lead:
        return True
    if lead[-1] == "sure":
        return (lead[-2] if len(lead) > 1 else "") not in _MAKES_SURE
    return lead[-1] not in _ASKS_BEFORE_HELD


def _mentions(sentence: str) -> list[_Mention]:
    found = [
        _Mention(fmt, soft, match.start())
        for fmt, soft, pattern in _MENTIONS
        for match in pattern.finditer(sentence)
    ]
    return sorted(found, key=lambda m: m.start)


def _sentence_kind(sentence: str) -> _SentenceKind:
    """How the sentence is put: a statement, or one of three kinds of question."""
    body = _PREAMBLE.sub("", sentence).lstrip()
    asks = sentence.rstrip().endswith("?")
    if _POLITE_START.match(body):
        return "polite"
    if _WH_QUESTION_START.match(body) or _AUX_START.match(body):
        return "interrogative"
    if asks:
        return "interrogative" if _WH_START.match(body) else "fragment"
    return "statement"


_Cue = Literal["request", "about", "input"]


def _cues(sentence: str) -> tuple[list[tuple[int, _Cue]], list[int]]:
    """The sentence's cues, sorted, and where its verbs of looking start (they are no cue:
    "list" and "copy" are nouns as often as verbs)."""
    about = [(m.start(), m.end()) for m in _ABOUT_CUE.finditer(sentence)]
    about_starts = [start for start, _ in about]

    def outside_about(start: int) -> bool:
        # inside an "about" cue ("how do I make"): the about cue that starts last at or
        # before it (their spans do not overlap) is the only one that can hold it
        at = bisect_left(about_starts, start + 1) - 1
        return at < 0 or about[at][1] <= start

    cues: list[tuple[int, _Cue]] = [(s, "about") for s, _ in about]
    for pattern in (_REQUEST_CUE, _MORE_REQUEST_CUE):
        cues.extend(
            (m.start(), "request") for m in pattern.finditer(sentence) if outside_about(m.start())
        )
    cues.extend((m.start(), "input") for m in _INPUT_CUE.finditer(sentence))
    looks = [m.start() for m in _LOOK_CUE.finditer(sentence) if outside_about(m.start())]
    return sorted(cues), looks


def _nearest_cue(cues: list[tuple[int, _Cue]], position: int) -> _Cue | None:
    """The kind of the last cue starting before `position` (`cues` is sorted)."""
    at = bisect_left(cues, (position,))
    return cues[at - 1][1] if at else None


def _is_negated(words: list[str], target: bool = False) -> bool:
    """Whether a negation earlier in the mention's clause refuses it (a conversion target's
    is not refused by one that describes the data: `_describes_data`). `words`: the clause's
    words before the mention, its last nine at least (`words_before`)."""
    # The window: the last eight words, after the last reset among them. A format named
    # before a later verb of asking is what an earlier negation refused: the verb starts a
    # new clause ("instead of json give me xml").
    first = max(len(words) - _NEGATION_WINDOW, 0)
    verb_after = False
    for i in range(len(words) - 1, first - 1, -1):
        word = words[i]
        follows_verb = i + 1 < len(words) and _REQUEST_CUE.fullmatch(words[i + 1]) is not None
        if (
            word in _RESETS
            or (word in ("and", "or", "then", "so") and follows_verb)
            or (verb_after and _names_a_format(word))
        ):
            first = i + 1
            break
        verb_after = verb_after or word in _CLAUSE_VERBS or _is_asking(word)
    window = words[first:]
    for i, word in enumerate(window):
        following = window[i + 1] if i + 1 < len(window) else ""
        if (word, following) in _NEGATION_BIGRAMS:
            return True
        if following in _NEGATION_EXEMPT_NEXT:
            continue
        if word in _CANCELS and i and _is_negation(window[i - 1]):
            continue  # "don't forget the csv"
        if _is_negation(word):
            if target and _describes_data(words, first + i):
                continue
            return True
    return False


def _is_negation(word: str) -> bool:
    return word.endswith("n't") or word.replace("'", "") in _NEGATIONS


@lru_cache(maxsize=4096)
def _is_asking(word: str) -> bool:
    """Whether a word is a verb of asking for a file (the few words of a message repeat:
    each is matched once)."""
    return bool(_REQUEST_CUE.fullmatch(word) or _MORE_REQUEST_CUE.fullmatch(word))


@lru_cache(maxsize=4096)
def _names_a_format(word: str) -> bool:
    """Whether a word alone is a mention of a format (`_MENTIONS`)."""
    return any(pattern.fullmatch(word) for _, _, pattern in _MENTIONS)


def _describes_data(words: list[str], at: int) -> bool:
    """Whether the negation at `words[at]`, before a conversion target, says which data
    ("the rows with no errors to csv", "users who never logged in as csv", "sensors not
    reporting as csv") rather than refusing the file: it follows a word of the data's
    description, not a speaker or a clause's start ("I don't", "please never", "do not"),
    a word that is neither a verb of asking nor a preposition or article follows it, and no
    verb of asking ("create", "export", "want", ...) comes between it and the format."""
    negation = words[at].replace("'", "")
    if not (negation.endswith("nt") or negation in _DESCRIPTIVE_NEGATIONS):
        return False
    if at == 0 or words[at - 1] in _SPEAKERS:
        return False
    after = words[at + 1 :]
    if all(word in _TARGET_WORDS for word in after):
        return False  # "not as csv", "not a csv"
    return not any(_REQUEST_CUE.fullmatch(word) for word in after)
