"""Tables the model wrote in its reply (SPEC section 5 step 6, assistant table)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """A table parsed from reply text: header names and rows of cell text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
