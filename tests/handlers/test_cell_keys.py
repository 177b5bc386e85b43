"""What a pasted cell shows of an action value (handlers/cell_keys.py; decision.md step 7).

The excerpt tests check whole tables; these check one cell against one value at the edges
of each reading: a float's rounding both ways, date-times' fractions, offsets and zones,
an impossible date, booleans.
"""

from __future__ import annotations

from typing import Any

import pytest

from handlers.cell_keys import cell_matches


@pytest.mark.parametrize(
    ("cell", "value", "shows"),
    [
        # 0.125 is exact in binary: half-even shows 0.12, half-up 0.13; the float's scaled
        # 12.5 rounds up to 13, so the shown 12 is one step below it
        ("0.12", 0.125, True),
        ("0.13", 0.125, True),
        ("0.14", 0.125, False),
        # 2.675 is 2.67499999... in binary; its shortest text 2.675 is what is rounded, as a
        # model rounding the text it read would
        ("2.68", 2.675, True),
        ("2.67", 2.675, False),
        ("12.5", float("nan"), False),
        ("12.5", float("inf"), False),
        ("12.5", float("-inf"), False),
    ],
)
def test_a_float_shows_as_the_decimals_it_rounds_to_either_way(
    cell: str, value: float, shows: bool
) -> None:
    assert cell_matches(cell, value) is shows


@pytest.mark.parametrize(
    ("cell", "value", "shows"),
    [
        # a fraction shown to tenths is the instant cut to tenths
        ("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00.54Z", True),
        ("2026-01-01T00:00:00.5Z", "2026-01-01T00:00:00.4Z", False),
        # past microseconds a fraction's further digits are not read
        ("2026-01-01T00:00:00.1234567Z", "2026-01-01T00:00:00.123456Z", True),
        # an offset is the same instant in UTC
        ("2026-01-01T10:00+05:00", "2026-01-01T05:00:00Z", True),
        ("2026-01-01T10:00+05:30", "2026-01-01T04:30:00Z", True),
        ("2026-01-01T10:00-01:15", "2026-01-01T11:15:00Z", True),
        ("2026-01-01T10:00+05:00", "2026-01-01T10:00:00Z", False),
        # a value the ISO parser refuses (" UTC") is read by the cell's own reading
        ("2026-01-01T10:00Z", "2026-01-01 10:00 UTC", True),
        ("2026-01-01T10:00Z", "2026-01-01 10:01 UTC", False),
        # a date that does not exist is only text
        ("2026-02-30T10:00", "2026-02-30T10:00", True),
        ("2026-02-30T10:00", "2026-03-02T10:00:00Z", False),
    ],
)
def test_a_date_time_shows_the_instant_cut_to_its_precision(
    cell: str, value: str, shows: bool
) -> None:
    assert cell_matches(cell, value) is shows


@pytest.mark.parametrize(
    ("cell", "value", "shows"),
    [
        ("yes", True, True),
        ("Yes", False, False),
        ("no", False, True),
        ("true", True, True),
        ("true", False, False),
        ("False", False, True),
        ("false", True, False),
        ("no", None, False),
    ],
)
def test_a_boolean_shows_as_true_false_yes_or_no(cell: str, value: Any, shows: bool) -> None:
    assert cell_matches(cell, value) is shows
