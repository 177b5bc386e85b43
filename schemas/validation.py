"""How a document or event that does not validate is described: by where, never by what.

Dead-letter descriptions and logs carry this text, so it names the first failing field and
pydantic's message for it, never the value that failed.
"""

from __future__ import annotations

from pydantic import ValidationError


def first_error(exc: ValidationError, whole: str) -> str:
    """`field 'a.b': message` for the first error; `whole` names a failure of the whole value."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or whole
    return f"field {field!r}: {first['msg']}"
