"""The words just before a position of a user's text, read without reading all of the text.

Format detection and the passthrough rule judge a mention or a cue by the few words before
it in its clause: a negation at most eight words back, "I" before "mean". Handing each of
them the whole text before it made a message's cost grow with its length times its
mentions: 30,000 characters naming formats thousands of times took ~15 s. `words_before`
reads back from the position only as far as those words lie: a window that doubles until
it holds as many words of the clause as asked for, the clause's start, or the text's start.
The words are then the ones the whole text gives. A window stops growing at
`MAX_CONTEXT_CHARS` (a clause that long with fewer words than asked for: a run of numbers,
a path, text in another script); only then are the words further back not read.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from functools import lru_cache
from typing import Final

MAX_CONTEXT_CHARS: Final = 4096
_FIRST_WINDOW: Final = 256
# Characters that lower-case to themselves and belong to no word (a word: letters, and one
# apostrophe between letters): a window cut at one of them splits no word, and a clause
# break starting there stays whole.
_CUT: Final = re.compile(r"[\s\d,.;:!?()\[\]{}<>\"/\\|=+*&%$#@~^`-]")


def words_before(
    text: str,
    position: int,
    count: int,
    word: re.Pattern[str],
    clause_break: re.Pattern[str] | None = None,
) -> list[str]:
    """`word`'s matches in the lower-cased clause before `position` (the text after the last
    `clause_break` match; all the text before it when None): at least the last `count` of
    them, or all of them when the clause holds fewer (within `MAX_CONTEXT_CHARS`)."""
    cuts = _cut_positions(text)
    size = _FIRST_WINDOW
    while True:
        start = max(0, position - size)
        if start > 0:
            at = bisect_left(cuts, start)
            if at == len(cuts) or cuts[at] >= position:  # no cut: not one whole word yet
                if size >= MAX_CONTEXT_CHARS:
                    return []
                size *= 2
                continue
            window = text[cuts[at] : position]
        else:
            window = text[:position]
        clause = clause_break.split(window)[-1] if clause_break is not None else window
        found = word.findall(clause.lower())
        if (
            start == 0
            or len(found) >= count
            or len(clause) < len(window)  # the clause starts inside the window
            or size >= MAX_CONTEXT_CHARS
        ):
            return found
        size *= 2


@lru_cache(maxsize=2)
def _cut_positions(text: str) -> array[int]:
    """Where `_CUT` matches in `text`, in order: the rules ask `words_before` about every
    mention of one text, and a window's first cut is then a bisection, not a search of the
    window. Without it a clause of thousands of mentions and no cut ("csv'csv'…") searched
    ~8,000 characters a mention: 2 s for 40,000 characters."""
    return array("q", (match.start() for match in _CUT.finditer(text)))
