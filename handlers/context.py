"""The text just before a position, bounded: what a rule reading the words before a cue sees.

Format detection and the passthrough rule judge each mention or cue by the few words before
it (a negation at most eight words back, "to"/"as"/"into" and an article, "this"/"my"/"from").
Handing such a rule the whole text before each mention made a message's cost grow with its
length times its mentions: a 30,000-character message naming "csv" thousands of times took
tens of seconds. Each rule now reads at most `CONTEXT_CHARS` characters before its position,
cut at a whitespace character so that no word is cut: a message costs time in proportion to
its length. The words a rule reads fit in that bound in any natural text; a rule that would
have looked further back (nine words of 22 characters each) no longer does.
"""

from __future__ import annotations

import re
from typing import Final

CONTEXT_CHARS: Final = 200
_SPACE: Final = re.compile(r"\s")


def text_before(text: str, position: int, limit: int = CONTEXT_CHARS) -> str:
    """The text before `position`: all of it up to `limit` characters, else the last `limit`
    from their first whitespace character on (the word the bound falls in is left out;
    nothing when no whitespace is left)."""
    if position <= limit:
        return text[:position]
    window = text[position - limit : position]
    space = _SPACE.search(window)
    return window[space.start() :] if space is not None else ""
