"""The base of every stored document, event and record: a frozen msgspec struct.

Validation is strict, as the contract wants it: a string field takes only a string, an
integer field only an integer (never `true`, never `"10"`), a boolean only a boolean. A
struct built in code is not checked again; what arrives from outside (a queue body, a
stored document, an artifact) goes through `model_validate` or `model_validate_json`, which
raise `msgspec.ValidationError` (a ValueError) naming where the value failed
(`schemas.validation.first_error` words it for a dead letter).

msgspec, not pydantic: its structs are built in C when a class is defined, where pydantic
built a validator per model on a process's first message and was imported by it (about
0.2 s of a fresh worker's first turn, benchmarks/PROFILE.md); a turn's stored messages
validate in about two thirds of pydantic's time too.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Self

import msgspec


class Model(msgspec.Struct, frozen=True):
    """A frozen struct with the few verbs the worker uses to cross its boundaries."""

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """`data` (builtins, or this struct) checked and converted; ValidationError if not."""
        return msgspec.convert(data, cls)

    @classmethod
    def model_validate_json(cls, data: bytes | str) -> Self:
        """The struct a JSON document holds; ValidationError (or DecodeError) if not."""
        return msgspec.json.decode(data, type=cls)

    def model_dump(self, *, exclude: Collection[str] = ()) -> dict[str, Any]:
        """Builtins, fields in order: dicts, lists, strings, numbers, booleans and None
        (every field's type is a JSON type), what a store or a JSON encoder takes."""
        dumped: dict[str, Any] = msgspec.to_builtins(self)
        for name in exclude:
            dumped.pop(name, None)
        return dumped

    def model_dump_json(self) -> bytes:
        """The compact JSON of `model_dump()`, UTF-8."""
        return msgspec.json.encode(self)

    def model_copy(self, *, update: dict[str, Any]) -> Self:
        """A copy with some fields replaced (not checked again, as for any struct built in
        code)."""
        return msgspec.structs.replace(self, **update)
