"""Whether a request asks for derived output (docs/contract/decision.md step 5, passthrough).

Raw action rows may be exported only for a plain serialisation: the request names a
format to create/export/convert/download, or asks for the data as-is ("the raw data",
"all the rows", "as is"). A request for anything computed from the rows may only export
a table the model composed. Derived means one of these, not negated in its clause
("don't summarise", "without averaging", "no filtering"):

- calculation: calculate, compute, average, mean (not "I mean"), median, sum, total of,
  count of, "the number of samples per site", min/max, statistics, percentile, trend,
  correlation, a histogram, ...
- summary and labelling: summarize/summarise, summary, classify, categorize, rank
- grouping and reshaping: group by, aggregate, pivot, transpose, unpivot, wide/long
  format, deduplicate/unique/distinct
- new columns and changed values: "add a (new) column", "round ... to 2 decimals",
  "convert ... to fahrenheit" (or to local time, UTC, another time zone), "multiplied by
  1000", "total energy per site", "joined with the site names"
- resampling: "one row per <time unit>", per/by/every <time unit>, resample, hourly
  values; "one row per sample" (or per reading, record, instance) is the raw grain
  and is not derived
- selection: "only/just the ... columns", dropping, skipping, leaving out or renaming
  columns, keeping or selecting some ("keep all columns", "keep the column names" and
  "without renaming the columns" select nothing; "all columns except unit" does), "filter",
  "only the rows where ...", comparisons with a number ("> 12.4", "greater than 3",
  "above 12 V", "below 0"),
  "top 10", "first 20 rows"
- ordering: "sorted by", "order by", ascending/descending, "newest first", "highest
  ones first". A sort is derived: the raw
  rows keep call order, so only a table the model wrote can honour it.

A cue that is also a name of data (forecast, peak, max, anomaly, trend, statistics,
summary, average, percentage, difference, delta, ratio, histogram, count, "daily data") is
set aside when
its words are among the words of the turn's current groups: "export the weather forecast
as csv" after `get_forecast`. A turn with no groups of its own asks the window's group a
reach-back would export instead (`handlers.turn`).

A computation the user says they will do is not asked for ("so I can calculate the
mean", "I'll do the filtering myself"): `_is_users_own`.

In a request for the raw rows ("the raw data", "all the rows"), a remark on output already
shown ("thanks for the summary", "great summary!", "that average looks off") asks for
nothing: `_is_remark`.

A cue's negation and the "I" of "I mean" are read back from the cue only as far as those
words lie (`handlers/context.py`), so a long message costs time in proportion to its length.

Filters that belong to the retrieval itself ("the last 24 hours", "between 00:00 and
01:00", "for instance sat-07") are not derived: the action already applied them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache, partial
from typing import Final

from handlers.context import words_before
from handlers.relevance import subject_words

_I: Final = re.IGNORECASE
_TIME_UNIT: Final = r"(?:seconds?|minutes?|mins?|hours?|days?|weeks?|months?|quarters?|years?)"


def _cues(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern, _I) for pattern in patterns)


_DERIVED: Final = _cues(
    # calculation
    r"\b(?:calculat|comput)(?:e|es|ed|ing|ion|ions)\b",
    r"\bsum(?:s|med|ming)?\b|\btotals?\s+(?:of|for|per|by)\b|\btotals\b",
    r"\b(?:running|grand|sub)[\s-]?totals?\b|\btotal(?:ed|ing|led|ling)\b",
    r"\bcount(?:s|ed|ing)?\s+(?:of|the|per|by)\b",
    # bare "min" is too often minutes ("the last 30 min"), so it needs a partner
    r"\bmin\s*(?:and|&|/)\s*max\b|\b(?:the|its|their)\s+min\b",
    # summary and labelling
    r"\bclassif\w*|\bcategori[sz]\w*|\brank(?:ed|ing|s)?\b",
    # grouping and reshaping
    r"\bgroup(?:ed|ing|s)?\s+(?:\w+\s+){0,2}?(?:by|per|into)\b",
    r"\baggregat\w*|\bpivot\w*|\bunpivot\w*|\btranspos\w*|\breshap\w*|\bcrosstab\w*",
    r"\b(?:wide|long)\s+format\b|\bbroken\s+down\s+by\b|\bbreak\s+(?:it\s+)?down\s+by\b",
    r"\b(?:unique|distinct|dedup\w*|de-dup\w*)\b|\bremove\s+duplicates\b",
    # new columns and changed values
    r"\b(?:add(?:s|ed|ing)?|append(?:s|ed|ing)?|insert(?:s|ed|ing)?)\s+(?:(?:a|an|one|two|\d+"
    r"|new|extra|another|more)\s+)+(?:columns?|fields?)\b",
    r"\bround(?:s|ed|ing)?\b[^.;!?\n]{0,40}?\b(?:to|at)\s+(?:\d+|one|two|three)\s+"
    r"(?:decimals?|decimal\s+places|places|digits|significant)\b",
    r"\bconvert(?:s|ed|ing)?\b[^.;!?\n]{0,40}?\b(?:to|into)\s+(?:the\s+|degrees\s+)?"
    r"(?:fahrenheit|celsius|kelvin|centigrade|metric|imperial|miles|kilometers|kilometres"
    r"|percent(?:ages?)?|local\s+time|utc|gmt|epoch|unix\s+time|(?:[a-z]+\s+)?time\s*zones?)\b",
    r"\btotal\s+[a-z]+\s+(?:per|by|for\s+each)\b",
    # arithmetic on the values: "multiplied by 1000", "divide the values by 10"
    r"\b(?:multipl(?:y|ies|ied|ying)|divid(?:e|es|ed|ing)|scal(?:e|es|ed|ing))\s+"
    r"(?:[\w-]+\s+){0,3}?by\s+[-+]?\d",
    # counting per something: "the number of samples per instance", "how many readings by site"
    r"\b(?:number|how\s+many)\s+(?:of\s+)?(?:[\w-]+\s+){1,2}?(?:per|by|for\s+each|in\s+each)\b",
    # joining the data with other data: "joined with the site names"
    r"\bjoin(?:s|ed|ing)?\s+(?:[\w-]+\s+){0,3}?(?:with|on)\b",
    # resampling
    rf"\b(?:one|a|single)\s+row\s+(?:per|for\s+each|each|every)\s+(?:\d+\s*(?:-\s*)?)?{_TIME_UNIT}\b",
    rf"\b(?:per|by|every|each)\s+(?:\d+\s*(?:-\s*)?)?{_TIME_UNIT}\b",
    r"\b(?:re|down|up)sampl\w*|\b(?:bucket|bin)(?:s|ed|ing|ned|ning)?\s+(?:by|per|into)\b",
    # selection
    # ("without changing the columns" refuses a change: its "without" selects nothing)
    r"\b(?:only|just|drop(?:ping)?|remov(?:e|ing)"
    r"|exclud(?:e|ing)|without(?!\s+[a-z]+ing\b)|renam(?:e|ing)|reorder(?:ing)?|except"
    r"|omit(?:ting)?|hid(?:e|ing)|skip(?:ping)?|ignor(?:e|ing)|leav(?:e|ing)\s+out"
    r"|delet(?:e|ing)|strip(?:ping)?)\b[^.;!?\n]{0,60}?\b(?:columns?|fields?|cols?)\b",
    # keeping or selecting all the columns, or their names or order, selects nothing
    r"\b(?:select(?:ed|ing)?|keep(?:ing)?)\b"
    r"(?:(?!\b(?:all|every|each|original|same|existing)\b)[^.;!?\n]){0,60}?"
    r"\b(?:columns?|fields?|cols?)\b(?!\s+(?:names?|order|headers?|as\s+(?:they\s+are|is))\b)",
    # ... unless some are taken out: "all columns except unit", "every field but the id"
    r"\b(?:all|every)\s+(?:(?:of\s+)?the\s+)?(?:columns?|fields?|cols?)\s+"
    r"(?:except|but(?!\s+(?:only|just|for|in|with|as|to)\b)|apart\s+from|other\s+than"
    r"|besides|excluding|minus|save)\b",
    r"\bfilter\w*(?!\s+(?:out\s+)?(?:nothing|none)\b)",  # "filter nothing" refuses it
    r"\bonly\s+(?:the\s+)?(?:rows|samples|entries|records|values|readings|lines|items|ones)"
    r"\s+(?:where|with|from|for|that|which|above|below|over|under|after|before|since)\b",
    r"[<>]=?\s*-?\d|\b(?:greater|less|more|higher|lower)\s+than\s+-?\d"
    r"|\b(?:above|below|exceeding)\s+[-+]?\d",
    r"\b(?:top|bottom)\s+\d+\b|\b(?:first|last)\s+\d+\s+(?:rows|lines|records|entries)\b",
    # ordering
    r"\b(?:sort(?:ed|ing|s)?|order(?:ed)?)\s+(?:\w+\s+){0,2}?by\b",
    r"\b(?:ascending|descending)\b|\breverse\s+(?:chronological\s+)?order\b",
    r"\b(?:newest|latest|most\s+recent|oldest|earliest|highest|lowest|largest|smallest)"
    r"\s+(?:ones?\s+)?(?:first|last|on\s+top)\b",
)


# Cues that may also be the data's own name: a tool's "forecast", a "peak_power" column, the
# "daily data" an action returns. Such a cue is set aside when its words are among the
# words of the turn's groups (their action names, call arguments, columns and
# citation strings: `handlers.relevance`): the request then names the data, not a
# computation on it.
_MAY_NAME_DATA: Final = _cues(
    r"\baverag(?:e|es|ed|ing)\b|\bmedians?\b|\bpercentiles?\b|\bstd\b|\bstdev\b",
    r"\bstandard\s+deviations?\b|\bvariances?\b|\bstat(?:s|istics?)\b",
    r"\b(?:max|maxima|minima|minimum|maximum|highest|lowest|peak)\b",
    r"\b(?:trends?|correlat\w*|regressions?|anomal\w*|outliers?|forecast\w*)\b",
    r"\b(?:percentages?|differences?|deltas?|growth\s+rates?|ratios?|histograms?)\b",
    r"(?<!\bi\s)(?<!\bwe\s)\bcounts?\b",  # "I count 900 rows" is no count asked for
    r"\bsummar(?:y|ies|ize|ized|izes|izing|ise|ised|ises|ising)\b",
    r"\b(?:hourly|daily|weekly|monthly|yearly)\s+(?:values|rows|buckets|figures|readings"
    r"|samples|intervals|data|means|maxima|minima)\b",
)

# "I mean ..." and "you mean" are speech, not arithmetic.
_MEAN: Final = re.compile(r"\bmean\b", _I)
_SPEECH_BEFORE_MEAN: Final = frozenset(
    {"i", "you", "we", "they", "it", "that", "this", "which", "what", "just", "really",
     "does", "do", "did", "i'd", "you'd", "dont", "don't"}
)  # fmt: skip

_CLAUSE_BREAK: Final = re.compile(r"[,;:!?()\n]|\.\s|\s[-–—]\s")
_WORD: Final = re.compile(r"[a-z]+(?:'[a-z]+)?")
_NEGATIONS: Final = frozenset({"no", "not", "never", "without", "nor", "dont", "cannot"})
_NEGATION_WINDOW: Final = 4
# The user's own computation: the words read back for it, and the words that may stand
# between "I will" and the cue ("I'll do the", "so I can work out the").
_OWN_WINDOW: Final = 8
_OWN_BETWEEN: Final = frozenset(
    {"do", "the", "a", "an", "it", "them", "this", "that", "these", "those", "all", "some",
     "any", "my", "our", "own", "of", "calculate", "compute", "work", "out", "figure",
     "then", "just", "later"}
)  # fmt: skip


# Remarks on output already shown ("thanks for the summary", "great summary!", "that
# average looks off"): `_is_remark`. They ask for nothing when the request asks for the raw
# rows: "thanks for the summary, now export it as csv" asks for the summary.
_RAW_ROWS: Final = re.compile(
    r"\b(?:raw|underlying|original|unprocessed|unmodified|source)\s+(?:data|rows|readings"
    r"|samples|values|records|numbers|results|dataset)\b"
    r"|\ball\s+(?:of\s+)?(?:the\s+)?(?:rows|readings|samples|records|data|values|results)\b"
    r"|\bevery\s+(?:single\s+)?(?:row|reading|sample|record)\b|\bas[\s-]is\b",
    _I,
)
_THANKS: Final = re.compile(
    r"\b(?:thanks|thank\s+you|thx|ty)\s+(?:so\s+much\s+)?for(?:\s+[a-z']+){0,2}$"
)
_PRAISE: Final = frozenset(
    {"great", "nice", "good", "excellent", "perfect", "awesome", "helpful", "thorough",
     "cool", "lovely", "solid", "useful", "interesting", "neat", "fantastic", "amazing"}
)  # fmt: skip
_DETERMINERS: Final = frozenset({"a", "an", "the", "that", "this", "your", "those", "these"})
_CLAUSE_END: Final = re.compile(r"\s*(?:[,;:!?()\n]|\.(?:\s|$)|$)")
_APPRAISED: Final = re.compile(
    r"\s+(?:[a-z]+\s+)?(?:looks?|looked|seems?|seemed|appears?|appeared|was|were"
    r"|(?:is|are)\s+(?:wrong|off|incorrect|great|good|fine|right|helpful|weird|strange|odd"
    r"|suspicious|too\s+\w+))\b",
    _I,
)


def is_derived_request(
    text: str, names_data: Callable[[frozenset[str]], bool] | None = None
) -> bool:
    """True when a request asks for derived output (calculation, summary, selection,
    reshaping). `names_data(words)`: whether the words name some of the turn's data; a cue
    of `_MAY_NAME_DATA` whose subject words do is no request for a computation."""
    normalised = text.replace("\u2019", "'")
    # read only once a remark is met: most requests hold none
    raw = cache(partial(_asks_for_raw_rows, normalised))
    for pattern in _DERIVED:
        for match in pattern.finditer(normalised):
            if not _asks_nothing(normalised, match, raw):
                return True
    for pattern in _MAY_NAME_DATA:
        for match in pattern.finditer(normalised):
            if _asks_nothing(normalised, match, raw):
                continue
            named = subject_words(match.group())
            if names_data is not None and named and names_data(named):
                continue
            return True
    return any(
        not _is_speech_mean(normalised, match.start()) and not _asks_nothing(normalised, match, raw)
        for match in _MEAN.finditer(normalised)
    )


def _asks_nothing(text: str, cue: re.Match[str], raw: Callable[[], bool]) -> bool:
    """Whether the cue is refused, is the user's own work, or, in a request for the raw
    rows (`raw()`), is a remark on output already shown: not a request."""
    words = words_before(text, cue.start(), _OWN_WINDOW, _WORD, _CLAUSE_BREAK)
    return (
        _is_negated(words) or _is_users_own(words) or (_is_remark(words, text, cue.end()) and raw())
    )


def _asks_for_raw_rows(text: str) -> bool:
    """Whether the request asks for the rows as they are ("the raw data", "all the rows",
    "the underlying data", "as is"), not refused ("not the raw data")."""
    return any(
        not _is_negated(words_before(text, match.start(), _NEGATION_WINDOW, _WORD, _CLAUSE_BREAK))
        for match in _RAW_ROWS.finditer(text)
    )


def _is_remark(clause: list[str], text: str, end: int) -> bool:
    """Whether the cue names output the user has already seen, in a remark on it: thanks
    for it ("thanks for the summary"), praise that is its whole clause ("great summary!"),
    or a clause whose subject it is, said to look or to have been some way ("that average
    looks off", "your summary was great"). `clause`: the clause's words before the cue, as
    for `_is_users_own` (all of them when fewer than `_OWN_WINDOW`)."""
    words = clause[-_OWN_WINDOW:]
    if _THANKS.search(" ".join(words[-5:])):
        return True
    # Otherwise the clause starts at most two words before the cue (fewer words than asked
    # for are the whole clause).
    if len(words) > 2:
        return False
    praised = bool(words) and words[-1] in _PRAISE and (len(words) == 1 or words[0] in _DETERMINERS)
    if praised and _CLAUSE_END.match(text, end):
        return True
    subject = not words or words[0] in _DETERMINERS
    return subject and _APPRAISED.match(text, end) is not None


def _is_speech_mean(text: str, position: int) -> bool:
    words = words_before(text, position, 1, _WORD)
    return bool(words) and words[-1] in _SPEECH_BEFORE_MEAN


def _is_negated(clause: list[str]) -> bool:
    """Whether "no", "not", "without", ... shortly before the cue in its clause refuses it.
    `clause`: the clause's words before the cue, its last `_NEGATION_WINDOW` at least."""
    return any(w.endswith("n't") or w in _NEGATIONS for w in clause[-_NEGATION_WINDOW:])


def _is_users_own(clause: list[str]) -> bool:
    """Whether the user says they will do the computation: "I will compute the averages
    myself", "so I can calculate the mean", "I'll do the filtering", "we're going to
    average it". The subject and its "will", "can" or "going to" stand right before the
    cue, or before a verb of computation and function words ("I'll work out the
    averages"); "I will need the hourly averages" asks for them. `clause`: as for
    `_is_negated`, its last `_OWN_WINDOW` words at least."""
    words = clause[-_OWN_WINDOW:]
    at = len(words)
    while at and words[at - 1] in _OWN_BETWEEN:
        at -= 1
    before = words[:at]
    if before[-1:] in (["i'll"], ["we'll"]):
        return True
    if len(before) >= 2 and before[-2] in ("i", "we") and before[-1] in ("will", "can"):
        return True
    # "i'm going to", "we are going to", "i plan to"
    if before[-2:] in (["going", "to"], ["plan", "to"], ["planning", "to"]):
        subject = before[:-2]
        return subject[-1:] in (["i'm"], ["we're"], ["i"], ["we"]) or subject[-2:] in (
            ["i", "am"],
            ["we", "are"],
        )
    return False
