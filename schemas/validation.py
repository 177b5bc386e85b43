"""How a document or event that does not validate is described: by where, never by what.

Dead-letter descriptions and logs carry this text, so it names the first failing field and
what was expected there, never the value that failed.
"""

from __future__ import annotations

import re

import msgspec

# msgspec's message: what failed, then where: "Expected `int`, got `str` - at `$.a[0].b`".
_WHERE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
# The messages that name a field of the object at the path, not the value there.
_NAMED_FIELD = re.compile(r"^Object (?:missing required|contains unknown) field `(?P<name>[^`]*)`$")
# The messages that quote the value that failed.
_QUOTES_VALUE = re.compile(r"^Invalid (?:enum )?value\b.*$", re.DOTALL)


def first_error(exc: msgspec.ValidationError, whole: str) -> str:
    """`field 'a.b': message`; `whole` names a failure of the whole value."""
    match = _WHERE.match(str(exc))
    assert match is not None  # the pattern matches any text
    what, path = match["what"], match["path"] or ""
    steps = [name or index for name, index in _STEP.findall(path)]
    named = _NAMED_FIELD.match(what)
    if named:
        steps.append(named["name"])
    if _QUOTES_VALUE.match(what):
        what = "Invalid value"
    field = ".".join(steps) or whole
    return f"field {field!r}: {what}"
