"""Relevance (docs/contract/decision.md step 7): which words of a request name a group of
action results.

A request's *subject words* are its words minus the short, the all-digit and the stop
words: the formats and their synonyms, the words of asking for a file or for data, and
English function words. A group's words come from its action name, the string values of
its calls' arguments, its columns and the string values of its compact citations, all of
which the worker already holds in the messages it read: scoring reads no artifact.

Words are split on every character that is not a letter or a digit, then again at
lower-to-upper case and letter/digit boundaries, and lower-cased: `BatteryVoltage1` gives
`battery`, `voltage`, `1`; `list_parameter_history` gives `list`, `parameter`, `history`.
Each word of both sides is folded to its singular (`singular`): "voltages" names a group of
`get_voltage_history`. A group's score is the number of distinct subject words among its
words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from itertools import chain
from typing import Any, Final

from handlers.compaction import PLACEHOLDER, TRUNCATED

MIN_WORD_CHARS: Final = 3
# Bounds on what one call's arguments or one citation contributes: citations are compact,
# but arguments need not be.
_MAX_STRINGS: Final = 2000
_MAX_DEPTH: Final = 8
# JSON's other values: nothing inside them.
_LEAVES: Final = frozenset({int, float, bool, type(None)})

_FORMAT_WORDS: Final = frozenset(
    {
        "csv", "csvs", "json", "xml", "xlsx", "xls", "excel", "spreadsheet", "spreadsheets",
        "sheet", "sheets", "workbook", "pdf", "pdfs", "docx", "doc", "word", "markdown",
        "tsv", "format", "formats", "document", "documents", "version",
    }
)  # fmt: skip
_ASKING_WORDS: Final = frozenset(
    {
        "create", "make", "export", "generate", "give", "get", "pull", "fetch", "retrieve",
        "show", "put", "turn", "send", "download", "convert", "save", "produce", "attach",
        "file", "files", "data", "dataset", "datasets", "table", "tables", "row", "rows",
        "record", "records", "value", "values", "result", "results", "sample", "samples",
        "list", "all", "every", "want", "need", "like", "please", "thanks", "thank",
        "could", "would", "can", "will", "should", "able", "let", "into", "copy", "output",
        "prepare", "build", "write", "dump", "provide", "share", "email", "again", "too",
        "also", "just", "now", "instead", "entire", "whole", "full", "complete", "raw",
        "everything", "anything", "something", "thing", "things", "stuff", "info",
        "information", "one", "ones", "each", "per", "yes", "okay", "sure", "actually",
        "creating", "making", "exporting", "exported", "created", "made",
    }
)  # fmt: skip
_FUNCTION_WORDS: Final = frozenset(
    {
        "the", "and", "for", "with", "from", "this", "that", "these", "those", "them",
        "they", "their", "theirs", "you", "your", "yours", "our", "ours", "mine", "his",
        "her", "hers", "its", "was", "were", "are", "been", "being", "have", "has", "had",
        "having", "does", "did", "doing", "done", "not", "but", "nor", "any", "some",
        "both", "either", "neither", "which", "what", "whose", "who", "whom", "when",
        "where", "why", "how", "there", "here", "than", "then", "into", "onto", "over",
        "under", "about", "above", "below", "after", "before", "between", "through",
        "during", "without", "within", "again", "once", "only", "own", "same", "such",
        "very", "more", "most", "other", "others", "another", "few", "many", "much",
        "all", "out", "off", "via", "per", "upon", "while", "since", "until", "unless",
        "because", "though", "although", "whether", "shall", "may", "might", "must",
        "ought", "let", "lets", "yet", "still", "even", "ever", "never", "also", "well",
        "back", "earlier", "previous", "last", "first", "latest",
        "across", "along", "around", "against", "among", "toward", "towards",
        "don", "didn", "doesn", "isn", "aren", "wasn", "weren", "won", "wouldn", "can",
        "couldn", "shouldn", "haven", "hasn", "hadn", "i'm", "ive", "you're",
    }
)  # fmt: skip
STOP_WORDS: Final = _FORMAT_WORDS | _ASKING_WORDS | _FUNCTION_WORDS

_PIECES: Final = re.compile(r"[^\W_]+")
_SIBILANTS: Final = ("s", "x", "z", "ch", "sh")


def words(text: str) -> Iterator[str]:
    """Every word of a text, split by the relevance rules and lower-cased."""
    for piece in _PIECES.findall(text):
        # Most pieces hold no boundary: all lower-case letters, or all digits.
        if (piece.isalpha() and piece.islower()) or piece.isdecimal():
            yield piece.lower()
            continue
        start = 0
        for at in range(1, len(piece)):
            before, char = piece[at - 1], piece[at]
            # A lower-case letter then an upper-case one, or a letter beside a digit.
            if (before.islower() and char.isupper()) or before.isalpha() != char.isalpha():
                yield piece[start:at].lower()
                start = at
        yield piece[start:].lower()


def subject_words(request_text: str) -> frozenset[str]:
    """The words a request names its data by: no short, all-digit or stop words, each
    folded to its singular (`singular`)."""
    return frozenset(
        folded
        for word in words(request_text)
        if len(word) >= MIN_WORD_CHARS
        and not word.isdigit()
        and word not in STOP_WORDS
        and (folded := singular(word)) not in STOP_WORDS
    )


@lru_cache(maxsize=65536)
def singular(word: str) -> str:
    """A word with a regular English plural ending taken off, so "voltages" names a group
    of `voltage` and "batteries" one of `battery_id`: "-ies" becomes "-y", "-es" after s, x,
    z, ch or sh goes, and a final "s" goes except after s, u or i ("class", "status",
    "analysis" stay). Subject words and group words are folded alike, so two words that
    are equal stay equal."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[:-2].endswith(_SIBILANTS):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _probe(word: str) -> str:
    """A part of a folded word that every word folding to it holds ("batter" of "battery",
    which "batteries" folds to): `group_score`'s check that a text may hold it."""
    return word[:-1] if word.endswith("y") else word


def group_words(
    action: str,
    arguments: Iterable[Mapping[str, Any]],
    columns: Iterable[str],
    citation_results: Iterable[Any],
) -> frozenset[str]:
    """The words of a group: action name, call argument strings, columns, citation strings,
    each folded to its singular."""
    return frozenset(
        map(
            singular,
            chain.from_iterable(map(words, _texts(action, arguments, columns, citation_results))),
        )
    )


def group_score(
    subject: frozenset[str],
    action: str,
    arguments: Iterable[Mapping[str, Any]],
    columns: Iterable[str],
    citation_results: Iterable[Any],
) -> int:
    """`score(subject, group_words(...))`, without splitting the texts that cannot hold a
    subject word or that came before (a column's values repeat down its rows), and done
    once every subject word is found.

    A word is a piece of a text, lower-cased; lower-casing maps each character on its own
    (only the Greek sigma depends on its neighbours), so an ASCII subject word that is one
    of a text's words is also a substring of the whole text lower-cased. A text holding none
    of the subject words that way is skipped; for other subject words every text is split."""
    if not subject:
        return 0
    ascii_only = all(word.isascii() for word in subject)
    found: set[str] = set()
    missing = list(subject)  # the subject words no text gave yet
    probes = {word: _probe(word) for word in subject}
    seen: set[str] = set()
    for text in _texts(action, arguments, columns, citation_results):
        if text in seen:
            continue
        seen.add(text)
        if ascii_only:
            # Only a missing word can change the score: a text none of them is a substring
            # of adds nothing.
            lowered = text.lower()
            for word in missing:
                if probes[word] in lowered:
                    break
            else:
                continue
        found.update(folded for folded in map(singular, words(text)) if folded in subject)
        if len(found) == len(subject):
            break
        missing = [word for word in missing if word not in found]
    return len(found)


def _texts(
    action: str,
    arguments: Iterable[Mapping[str, Any]],
    columns: Iterable[str],
    citation_results: Iterable[Any],
) -> Iterator[str]:
    """The texts a group's words come from, in order, within the strings' bounds."""
    yield action
    yield from columns
    # Each argument set and each result is walked whole, within its own bound, before its
    # texts are given (a scorer that stops early stops at the next one). A bound per value,
    # not per group: one call's 2,000 ids must not hide the words of the citation after it.
    for argument_set in arguments:
        strings: list[str] = []
        _strings(argument_set, 0, strings)
        yield from strings
    for result in citation_results:
        strings = []
        _strings(result, 0, strings)
        for text in strings:
            # Each pattern holds a literal ("<", "[truncated "): a text without it is passed
            # by a check in C before the pattern runs.
            if text.startswith("<") and PLACEHOLDER.fullmatch(text):
                continue
            yield TRUNCATED.sub("", text) if "[truncated " in text else text


def score(subject: frozenset[str], group: frozenset[str]) -> int:
    """How many distinct subject words the group's words hold."""
    return len(subject & group)


def _strings(value: Any, depth: int, found: list[str]) -> None:
    """Append the string values inside a JSON value (not its keys) to `found`, depth first,
    until it holds the bounded count. A function that appends, not nested generators: a
    string at depth d was handed up through d generators."""
    if len(found) >= _MAX_STRINGS or depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        found.append(value)
    elif type(value) in _LEAVES:  # spares them the Mapping check, a call into Python
        return
    elif isinstance(value, list | tuple):
        for item in value:
            _strings(item, depth + 1, found)
    elif isinstance(value, dict | Mapping):  # a dict, the usual one, is told apart in C
        for item in value.values():
            _strings(item, depth + 1, found)
