"""docs/contract/decision.md step 7, excerpt matching: a pasted excerpt is recognised however
loosely the model pasted it, and a table whose values are in no row stays composed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handlers.cell_keys import cell_matches
from handlers.dataset import RowCollector
from handlers.excerpt import TableMatcher, column_name_key, has_table_columns
from handlers.selection import ResultRef
from handlers.tables import Table, find_table, without_row_numbers, without_secret_columns


def excerpt_of(rows: list[dict[str, Any]], table: Table | None) -> bool:
    """The excerpt test as the core runs it: rows stream through the collector once."""
    assert table is not None
    collector = RowCollector(table)
    ref = ResultRef("t1", "history", "call_1", "artifacts/c/t1/call_1.json", None, 0)
    for _ in collector.feed(ref, rows):
        pass
    return collector.table_is_excerpt()


SAMPLES = [
    {
        "timestamp": f"2026-11-19T00:{minute:02d}:{second:02d}Z",
        "parameter": "BatteryVoltage1",
        "value": round(12.4 + minute / 1000 + second / 100000, 5),
        "unit": "V",
        "ok": minute % 2 == 0,
        "count": 1000 + minute * 37,
    }
    for minute in range(60)
    for second in (0, 30)
]


# --- column names ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("Value (V)", "value"),
        ("value [V]", "value"),
        ("Temperature (°C)", "temperature"),
        ("TIME-STAMP", "timestamp"),
        ("battery_voltage (mV) ", "batteryvoltage"),
        ("(V)", "v"),
    ],
)
def test_column_names_ignore_case_punctuation_and_a_trailing_unit(header: str, key: str) -> None:
    assert column_name_key(header) == key


def test_table_columns_with_units_are_action_columns() -> None:
    table = Table(("Timestamp", "Value (V)"), (("t", "1"),))
    assert has_table_columns(table, ["timestamp", "value", "unit"])
    assert not has_table_columns(Table(("Average (V)",), (("1",),)), ["value"])


# --- cells -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        # text: trimmed, case-folded, inner whitespace collapsed
        ("  Sentinel-7   Bus ", "sentinel-7 bus"),
        ("ONLINE", "online"),
        # numbers: thousands separators, units with or without a space, rounding
        ("1,234.50", 1234.5),
        ("1 234.5", 1234.5),
        ("1\u202f234", 1234),
        ("1_234_567", 1234567),
        ("12.48 V", 12.48),
        ("12.48V", 12.4812),
        ("12.5 V", 12.45),  # half-up
        ("0.12 A", 0.125),  # half-even
        ("45%", 45),
        ("45 %", 45.2),
        ("21.5 °C", 21.46),
        ("-3.2°C", -3.249),
        ("\u22123.2", -3.2),
        ("9.81 m/s", 9.8149),
        ("1,234", "1234"),
        ("12.48 V", "12.48"),
        ("1,200 rpm", 1200.0),
        ("$12.50", 12.5),  # a currency symbol leads
        ("€ 1,234.50", 1234.5),
        ("-$3.20", -3.2),
        ("$-3.2", -3.2),
        # date-times: T or space, seconds optional, Z/offset/nothing = UTC, precision shown
        ("2026-11-19 00:01", "2026-11-19T00:01:30Z"),
        ("2026-11-19T00:01Z", "2026-11-19T00:01:59.999Z"),
        ("2026-11-19 00:01:30", "2026-11-19T00:01:30.250Z"),
        ("2026-11-19T00:01:30.2", "2026-11-19T00:01:30.250Z"),
        ("2026-11-19 01:01:30+01:00", "2026-11-19T00:01:30Z"),
        ("2026-11-18T19:01-05:00", "2026-11-19T00:01:00Z"),
        ("2026-11-19 00:01 UTC", "2026-11-19T00:01:00+00:00"),
        ("2026-11-19t00:01:30z", "2026-11-19T00:01:30Z"),
        ("2026-11-19 01:01:30+0100", "2026-11-19T00:01:30Z"),  # an offset without ":"
        ("2026-11-19 00:01", "2026-11-19T00:01:30"),  # a value without a zone is UTC too
        ("2026-11-19 01:01+01:00", "2026-11-19T00:01:30"),
        # a float past 10**15 at the decimals shown: decided exactly, not by the float
        ("1234567890123456800.00", 1.2345678901234568e18),
        # booleans
        ("true", True),
        ("Yes", True),
        ("no", False),
        ("FALSE", False),
        # empty shows nothing
        ("", None),
        # so do the markers models write for a missing or null value
        ("n/a", None),
        ("N/A", None),
        ("null", None),
        ("None", None),
        ("-", None),
        ("\u2013", None),
        ("\u2014", None),
        ("\u2014", ""),
        # a cut text shows the text it begins
        ("Battery below thresh\u2026", "Battery below threshold on site 4"),
        ("battery  BELOW thresh...", "Battery below threshold on site 4"),
        ("Battery below \u2026", "Battery below threshold"),
        ("3.14159\u2026", 3.14159265),
        # a bare ellipsis in a row of values elides the whole value
        ("\u2026", "Battery below threshold"),
        ("...", 12.48),
        # a Markdown link shows its text
        ("[sat-07](https://portal.example/sat-07)", "sat-07"),
        ("[12.48 V](#reading-1)", 12.48),
        ("[sat-07](https://portal.example/sat-07)", "[sat-07](https://portal.example/sat-07)"),
    ],
)
def test_cell_shows_the_action_value(text: str, value: Any) -> None:
    assert cell_matches(text, value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12.4", 12.45001),  # rounds to 12.5
        ("12.48 volts!", 12.48),  # not a unit: a sentence
        ("12.48 Voltage", 12.48),  # a unit has at most 6 letters
        ("1,23", 1.23),  # not a thousands group
        ("1,2345", 12345),
        ("2026-11-19 00:02", "2026-11-19T00:01:59Z"),  # the precision cuts, it does not round
        ("2026-11-19 00:01", "2026-11-19T01:01:00+02:00"),  # another instant
        ("2026-11-19 00:01+01:00", "2026-11-19T00:01:00"),
        ("1234567890123456900.00", 1.2345678901234568e18),
        ("2026-11-19 00:01", "2026-11-19"),
        ("2026-11-19", "2026-11-19T00:00:00Z"),  # a date alone is text
        ("yes", 1),
        ("1", True),
        ("true", "yes"),
        ("n/a", 0),
        ("-", 0),
        ("null", "ok"),
        ("none", False),
        ("Battery above thresh\u2026", "Battery below threshold"),
        ("Battery below threshold\u2026", "Battery below threshold"),  # nothing was cut
        ("below thresh\u2026", "Battery below threshold"),  # the start, not any part
        ("\u2026", ""),  # an elided value is not an empty one
        ("...", None),
        ("[sat-07](https://portal.example/sat-08)", "sat-08"),  # the text, not the target
        ("[sat-07] (https://portal.example)", "sat-07"),  # not a link
        ("45%", 0.45),
        ("$12.50", 12.49),
        ("$$12.50", 12.5),
    ],
)
def test_cell_does_not_show_another_value(text: str, value: Any) -> None:
    assert not cell_matches(text, value)


# --- elisions and composed tables --------------------------------------------------------
def test_excerpt_with_units_rounding_and_reformatted_times_is_an_excerpt() -> None:
    reply = (
        "Here are the first readings:\n\n"
        "| Time (UTC) | Parameter | Value (V) | OK |\n"
        "|---|---|---|---|\n"
        "| 2026-11-19 00:00 | batteryvoltage1 | 12.40 V | yes |\n"
        "| 2026-11-19 00:01 | BatteryVoltage1 | 12.401 V | no |\n"
        "| … | … | … | … |\n"
        "| 2026-11-19 00:59 | BatteryVoltage1 | 12.46 V | no |\n"
    )
    rows = [{**r, "time": r["timestamp"]} for r in SAMPLES]
    assert excerpt_of(rows, find_table(reply))


def test_excerpt_with_thousands_separators_is_an_excerpt() -> None:
    reply = 'timestamp,count\n2026-11-19T00:10:00Z,"1,370"\n2026-11-19T00:20:30Z,1 740\n'
    assert excerpt_of(SAMPLES, find_table(reply))


def test_elision_rows_and_ellipsis_columns_do_not_make_a_table_composed() -> None:
    reply = (
        "```csv\ntimestamp,value,…\n2026-11-19T00:00:00Z,12.4,x\n...\n"
        "2026-11-19T00:59:30Z,12.46,y\n…,…,…\n```"
    )
    table = find_table(reply)
    assert table is not None and table.columns == ("timestamp", "value")
    assert excerpt_of(SAMPLES, table)


@pytest.mark.parametrize(
    "header",
    ["#", "No.", "Row", "index", "", "Nr", "Num", "Number", "Row No.", "Row number", "Idx", "n"],
)
def test_a_first_column_numbering_the_pasted_rows_does_not_make_a_table_composed(
    header: str,
) -> None:
    reply = (
        f"| {header} | timestamp | value |\n|---|---|---|\n"
        "| 1 | 2026-11-19T00:00:00Z | 12.4 |\n| 2 | 2026-11-19T00:00:30Z | 12.4 |\n"
        "| ... | ... | ... |\n| 120 | 2026-11-19T00:59:30Z | 12.46 |\n"
    )
    assert excerpt_of(SAMPLES, find_table(reply))


@pytest.mark.parametrize(
    ("header", "numbers"),
    [
        ("Rank", ("1", "2")),  # a rank is the model's own column
        ("#", ("2", "3")),  # not counted from 0 or 1
        ("#", ("1", "1")),  # not increasing
        ("#", ("a", "b")),
    ],
)
def test_a_first_column_that_is_not_row_numbers_still_makes_a_table_composed(
    header: str, numbers: tuple[str, str]
) -> None:
    first, second = numbers
    reply = (
        f"| {header} | timestamp | value |\n|---|---|---|\n"
        f"| {first} | 2026-11-19T00:00:00Z | 12.4 |\n| {second} | 2026-11-19T00:00:30Z | 12.4 |\n"
    )
    assert not excerpt_of(SAMPLES, find_table(reply))


def test_row_numbers_of_a_table_without_rows_are_not_looked_for() -> None:
    table = Table(("#", "value"), ())
    assert without_row_numbers(table) is table


def test_table_whose_values_are_in_no_row_is_composed() -> None:
    reply = "| Hour | Value (V) |\n|---|---|\n| 2026-11-19 00:00 | 12.43 V |\n"  # an average
    assert not excerpt_of(SAMPLES, find_table(reply))


def test_table_with_a_column_the_rows_lack_is_composed() -> None:
    reply = "| timestamp | value | delta |\n|---|---|---|\n| 2026-11-19 00:00 | 12.4 | 0 |\n"
    assert not excerpt_of(SAMPLES, find_table(reply))


def test_table_of_as_many_rows_as_the_action_rows_is_composed() -> None:
    rows = SAMPLES[:2]
    reply = "timestamp,value\n2026-11-19T00:00:00Z,12.4\n2026-11-19T00:00:30Z,12.4003\n"
    assert not excerpt_of(rows, find_table(reply))


def test_one_row_of_the_table_in_no_action_row_makes_it_composed() -> None:
    reply = "timestamp,value\n2026-11-19T00:00:00Z,12.4\n2026-11-19T00:00:30Z,99\n"
    assert not excerpt_of(SAMPLES, find_table(reply))


# --- streaming: one pass, keyed look-ups -------------------------------------------------
def test_matcher_looks_up_candidates_by_key_not_by_scanning_the_table() -> None:
    rows = tuple((f"2026-11-19 00:{m:02d}", f"{12 + m / 100:.2f} V") for m in range(50))
    matcher = TableMatcher(Table(("timestamp", "value"), rows))
    probes = 0
    original = matcher._keys  # the per-row cell keys: touched only for candidate rows

    class Counting(list[Any]):
        def __getitem__(self, index: Any) -> Any:
            nonlocal probes
            probes += 1
            return original[index]

    matcher._keys = Counting(original)
    found = matcher.matches({"timestamp": "2026-11-19T00:07:00Z", "value": 12.07, "unit": "V"})
    assert found == {7}
    assert probes <= 2
    assert matcher.matches({"timestamp": "2026-11-20T00:07:00Z", "value": 12.07}) == set()


def test_matcher_finds_rows_of_an_all_number_table() -> None:
    matcher = TableMatcher(Table(("a", "b"), (("1", "2.5"), ("3", "4"))))
    assert matcher.matches({"a": 3, "b": 4.0}) == {1}
    assert matcher.matches({"A": "1", "B (kg)": 2.45}) == {0}


def test_matcher_skips_rows_already_found() -> None:
    matcher = TableMatcher(Table(("a", "b"), (("x", "1"), ("x", "1"))))
    assert matcher.matches({"a": "x", "b": 1}) == {0, 1}
    assert matcher.matches({"a": "x", "b": 1}, skip={0}) == {1}


def test_missing_action_value_shows_only_as_an_empty_cell() -> None:
    matcher = TableMatcher(Table(("a", "b"), (("x", ""), ("y", "1"))))
    assert matcher.matches({"a": "x"}) == {0}
    assert matcher.matches({"a": "y"}) == set()


# --- round trips: whatever way a value is pasted within the rules, it is still shown ------
@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).filter(lambda v: v != 0.0),
    st.integers(min_value=0, max_value=4),
    st.sampled_from([ROUND_HALF_UP, ROUND_HALF_EVEN]),
    st.sampled_from(["", ",", "_", " "]),
    st.sampled_from(["", " V", "V", " %", "°C", " kWh", " m/s"]),
)
def test_a_number_pasted_rounded_grouped_and_with_a_unit_shows_its_value(
    value: float, places: int, rounding: str, separator: str, unit: str
) -> None:
    shown = Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), rounding=rounding)
    whole, _, fraction = f"{abs(shown):f}".partition(".")
    grouped = f"{int(whole):,}".replace(",", separator) if separator else whole
    text = ("-" if shown < 0 else "") + grouped + (f".{fraction}" if fraction else "") + unit
    assert cell_matches(text, value)


@settings(max_examples=300, deadline=None)
@given(
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 1, 1)),
    st.sampled_from(["minutes", "seconds", "milliseconds"]),
    st.integers(min_value=-12 * 60, max_value=14 * 60),
    st.sampled_from(["T", " "]),
)
def test_a_date_time_pasted_cut_and_in_another_offset_shows_its_instant(
    at: datetime, precision: str, offset_minutes: int, separator: str
) -> None:
    instant = at.replace(tzinfo=UTC)
    value = instant.isoformat().replace("+00:00", "Z")
    zone = timezone(timedelta(minutes=offset_minutes))
    local = instant.astimezone(zone).isoformat(sep=separator, timespec=precision)
    assert cell_matches(local, value)
    utc_cut = instant.isoformat(sep=separator, timespec=precision).removesuffix("+00:00")
    assert cell_matches(utc_cut, value)  # no zone means UTC


@pytest.mark.parametrize("places", [17, 18, 308, 309, 400])
def test_a_cell_with_more_decimals_than_a_float_holds_is_decided_exactly(places: int) -> None:
    # 10.0**places overflowed past 308 places: the excerpt test raised OverflowError, and
    # the turn was dead-lettered as a bug.
    shown = "0." + "0" * (places - 1) + "1"
    assert not cell_matches(shown, 1.5)
    if places < 20:  # and one a float does show, written with more zeros than it holds
        assert cell_matches("1." + "0" * places, 1.0)


@pytest.mark.parametrize(("first", "second"), [("0", "1"), ("1.", "2."), ("0.", "1.")])
def test_row_numbers_counted_from_0_or_written_with_a_full_stop_are_row_numbers(
    first: str, second: str
) -> None:
    reply = (
        "| # | timestamp | value |\n|---|---|---|\n"
        f"| {first} | 2026-11-19T00:00:00Z | 12.4 |\n| {second} | 2026-11-19T00:00:30Z | 12.4 |\n"
    )
    assert excerpt_of(SAMPLES, find_table(reply))


def test_a_table_whose_every_column_names_a_secret_matches_no_row() -> None:
    # Dropping its secret columns leaves it no column to look rows up by.
    table = without_secret_columns(Table(("api_key", "token"), (("k1", "t1"),)))
    assert table.columns == ()
    assert TableMatcher(table).matches({"api_key": "k1", "token": "t1"}) == set()
