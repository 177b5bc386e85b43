"""docs/contract/decision.md step 5: plain serialisation versus a request for derived output."""

from __future__ import annotations

import pytest

from handlers.passthrough import is_derived_request
from handlers.relevance import singular

PLAIN: list[str] = [
    "create a csv",
    "Retrieve the BatteryVoltage1 history for instance sat-07 and create a csv",
    "create a csv of the BatteryVoltage1 history",
    "List the instances and the ground sites and create a csv",
    "yes, one row per sample",
    "one row per instance",
    "export the raw data as json",
    "give me all the rows as is",
    "export as-is to xlsx",
    "download the full dataset as a spreadsheet",
    "convert it to xml",
    "include all columns",
    "just a csv please",
    "I mean, just make a csv",
    "what do you mean by csv",
    "don't summarize, give me the raw rows as csv",
    "without any filtering, export everything",
    "export the data as csv, filter nothing",
    "export it all as csv and filter out none of it",
    "no need to calculate anything, export the data",
    # filters the retrieval already applied are not derived
    "Retrieve the last 24 hours of BatteryVoltage1 and create a csv",
    "Retrieve the last 30 min of data and create a csv",
    "get the history between 00:00 and 01:00 as json",
    "convert the json to xml",
    "include the id column and export as csv",
    "export all 900 rows, the total, as csv",
    "export the samples listed above as csv",
    "the 12 readings above, as csv",
    "add the data to a csv",
    "export the newest data as csv",
    "export the 900 samples to csv, the number of rows doesn't matter",
    "I'll join you later, export csv",
    "I count 900 rows, export them as csv",
    # A cue negated within four words, and "mean" as a verb after speech words.
    "export a csv, no need for any calculation",
    "export csv, no mean",
    "export the flags which mean errors as csv",
    "what do mean values look like, export csv",
    "Export the readings as csv, but don't bother to actually aggregate them",
    "Export the readings as csv, not the mean",
    "Export as csv, I just mean the raw rows",
    "Export as csv, that does mean all rows",
    "Export the rows as csv, I'd mean all of them",
]

DERIVED: list[str] = [
    "export the readings transposed as csv",
    "crosstab the readings as csv",
    "aggregate the readings as csv",
    "remove duplicates and export csv",
    "readings bucketed by sensor as csv",
    "export the readings totaled as csv",
    "export the min temperature as csv",
    "unpivot the readings and export as csv",
    "break it down by site and export as csv",
    "bin by site and export as csv",
    "export readings > 12.4 as csv",
    "csv of the readings above 12 V",
    "export the temperatures below -5 to json",
    "readings exceeding 100 as xlsx",
    "export the first 20 rows as csv",
    "export the readings in descending order as csv",
    "export the std of the readings as csv",
    "calculate the daily average and export as csv",
    "compute the mean voltage and put it in a csv",
    "the mean of the values",
    "what is the median",
    "summarize the history in a csv",
    "summarise the history",
    "give me a summary table as csv",
    "classify the samples into low, normal and high",
    "categorize the ground sites",
    "group by instance",
    "aggregate the values by day",
    "only the timestamp and value columns",
    "just the timestamp and value columns",
    "drop the unit column",
    "one row per hour",
    "one row per day as csv",
    "every 10 minutes as csv",
    "resample to 5-minute intervals",
    "pivot the parameters into columns",
    "top 10 highest voltages as csv",
    "filter the samples above 12.4 V",
    "only the rows where value > 12.44",
    "sorted by value descending",
    "the total of the values",
    "sum the values per instance",
    "count of samples per day",
    "the maximum voltage",
    "export with min and max",
    "distinct parameters as csv",
    "export a csv but leave out the id column",
    "skip the unit field and export as csv",
    "export it to csv and add a column with the difference",
    "add a new column for the status",
    "round the values to 2 decimals and export to csv",
    "convert the temperatures to fahrenheit and export as csv",
    "make a csv of the total energy per site",
    "export a csv with percentages",
    # an order by age or size, arithmetic and time zones on the values, counts, joins
    "export the readings newest first as csv",
    "export the highest ones first as csv",
    "export a csv with the values multiplied by 1000",
    "divide the values by 10 and export csv",
    "export the timestamps converted to local time as csv",
    "convert the timestamps to the local time zone and export csv",
    "convert the timestamps to UTC and export csv",
    "export a histogram of the values as csv",
    "export the count as csv",
    "export how many readings per site as csv",
    "export the number of samples per instance as csv",
    "export the data joined with the site names as csv",
    "join the readings on the site id and export csv",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_serialisation_is_not_derived(text: str) -> None:
    assert not is_derived_request(text)


@pytest.mark.parametrize("text", DERIVED)
def test_derived_output_request_is_derived(text: str) -> None:
    assert is_derived_request(text)


def test_one_row_per_sample_is_the_raw_grain_but_per_hour_resamples() -> None:
    assert not is_derived_request("create a csv, one row per sample")
    assert is_derived_request("create a csv, one row per hour")


def test_min_and_max_is_derived_even_beside_data_named_max() -> None:
    assert is_derived_request("min and max of the readings as csv", lambda words: True)


def test_negated_derived_cue_is_not_derived() -> None:
    assert not is_derived_request("don't average anything")
    assert is_derived_request("don't export raw rows, average them")


@pytest.mark.parametrize(
    ("text", "data_words"),
    [
        ("Export the weather forecast as csv", {"weather", "forecast"}),
        ("Export the anomaly events to csv", {"anomaly", "events"}),
        ("Export the peak power readings to a csv", {"peak", "power"}),
        ("Create a csv of the Max Voltage values", {"max", "voltage"}),
        ("Download the daily data as csv", {"daily", "readings"}),
        ("Export the stats endpoint output as json", {"stats"}),
        ("Export the summary table as csv", {"summary"}),
        ("Export the average temperatures as csv", {"average", "temperature"}),
        ("Export the percentage column as csv", {"percentage"}),
        ("Export the price delta readings as csv", {"price", "delta"}),
    ],
)
def test_a_cue_that_is_the_datas_own_name_is_no_computation(
    text: str, data_words: set[str]
) -> None:
    # A tool's "forecast", a "peak_power" column: the request names the data it retrieved.
    # the group's words, folded as relevance folds them
    group = {singular(word) for word in data_words}

    def names_data(named: frozenset[str]) -> bool:
        return not named.isdisjoint(group)

    assert is_derived_request(text)  # with nothing to compare against, still a cue
    assert not is_derived_request(text, names_data)
    assert is_derived_request(text, lambda named: False)  # data of other words


@pytest.mark.parametrize(
    "text",
    [
        "Calculate the peak power and export a csv",  # a computation, whatever the data's words
        "Export the peak power sorted by time as csv",
        "Export the forecast, one row per hour, as csv",
    ],
)
def test_a_computation_on_data_named_like_a_cue_is_still_derived(text: str) -> None:
    assert is_derived_request(text, lambda named: True)


@pytest.mark.parametrize(
    "text",
    [
        "export the totals as csv",
        "export the top 10 sites as csv",
        "export the rows with voltage <= 12 as csv",
        "convert the readings to percent and export as csv",
    ],
)
def test_totals_top_n_comparisons_and_percent_conversions_are_derived(text: str) -> None:
    assert is_derived_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "export the readings with a running total as csv",
        "export the readings with a grand total as csv",
        "export the readings with subtotals as csv",
        "export the count of readings as csv",
        "export the readings in wide format as csv",
        "export the readings in long format as csv",
        "export the readings broken down by site as csv",
        "export only the rows where the status is error as csv",
        "export only the readings from sat-07 as csv",
        "export the standard deviation of the readings as csv",
        "export the variance of the readings as csv",
    ],
)
def test_each_cue_alone_makes_a_request_derived(text: str) -> None:
    # Each sentence holds one cue and no other: it is derived only if that cue is heard.
    assert is_derived_request(text)


def test_a_negation_is_heard_four_words_back_and_no_further() -> None:
    assert not is_derived_request("never asked you to compute it, export csv")
    assert is_derived_request("never once asked you to compute it, export csv")


@pytest.mark.parametrize(
    "speaker",
    ["i", "you", "we", "they", "it", "that", "this", "which", "what", "just", "really", "does",
     "do", "did", "i'd", "you'd", "dont", "don't", "I", "We"],
)  # fmt: skip
def test_mean_after_each_speech_word_is_speech_not_arithmetic(speaker: str) -> None:
    assert not is_derived_request(f"export the rows as csv, {speaker} mean all of them")
    assert is_derived_request("export the rows as csv, the mean of them")


@pytest.mark.parametrize(
    "negation",
    ["no", "not", "never", "without", "nor", "dont", "cannot", "don't", "won't", "shouldn't"],
)
def test_each_negation_refuses_the_cue_after_it(negation: str) -> None:
    assert not is_derived_request(f"export the rows as csv, {negation} calculate anything")
    assert is_derived_request("export the rows as csv, calculate anything")


def test_a_typographic_apostrophe_negates_as_a_plain_one_does() -> None:
    assert not is_derived_request("don\u2019t summarize, give me the raw rows as csv")
    assert not is_derived_request("export the rows as csv, I\u2019d mean all of them")


def test_the_word_before_mean_is_read_however_far_back_it_lies_in_its_clause() -> None:
    assert not is_derived_request("export the rows as csv, I" + " " * 300 + "mean all of them")


@pytest.mark.parametrize(
    "text",
    [
        "export to csv, keep all columns",
        "export to csv, keep every field",
        "select all columns and export to csv",
        "export to csv, keep the original column names",
        "export to csv, keep the column order",
        "export to csv, keep the columns as they are",
        "export to csv without changing any columns",
        "export to csv without renaming the columns",
        "export all columns but only for sat-07 to csv",
    ],
)
def test_keeping_every_column_or_changing_none_selects_nothing(text: str) -> None:
    assert not is_derived_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "export to csv, keep only the voltage column",
        "export to csv, keep voltage and current columns",
        "select the voltage column and export to csv",
        "export to csv without the unit column",
        "export to csv, keep all columns except unit",
        "include all fields but the id, as csv",
        "export every column apart from the id as csv",
    ],
)
def test_keeping_some_columns_or_all_but_some_is_a_selection(text: str) -> None:
    assert is_derived_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "export to csv; I will compute the averages myself",
        "csv please, I'll do the filtering myself",
        "export all the data as csv so I can calculate the mean",
        "export to csv so I can average it later",
        "export the raw rows as csv, we're going to aggregate them in Power BI",
        "export the raw data, I am going to compute the statistics",
        "export the rows as csv, I plan to filter them later",
        "export as csv, I'll work out the averages",
    ],
)
def test_a_computation_the_user_will_do_is_not_asked_for(text: str) -> None:
    assert not is_derived_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "I will need the hourly averages as csv",
        "I'll need the average per hour in a csv",
        "export csv so you can calculate the mean",
        "please calculate the mean, I will then export it myself",
        "I will want it sorted by time",
        "I can send the file on, once you have averaged it",
    ],
)
def test_a_computation_the_user_asks_for_is_derived_though_they_speak_of_themselves(
    text: str,
) -> None:
    assert is_derived_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "thanks for the summary, now export the raw data as csv",
        "great summary! export the raw rows to csv",
        "that average looks off, just export all the rows to csv",
        "the average seems wrong; export the raw data so I can check",
        "your summary was great. Now the raw data as csv please",
    ],
)
def test_a_remark_on_output_shown_asks_nothing_beside_a_request_for_the_raw_rows(
    text: str,
) -> None:
    assert not is_derived_request(text)


@pytest.mark.parametrize(
    "text",
    [
        "thanks for the summary, now export it as csv",  # "it" is the summary
        "the hourly average looks right, export it as csv",
        "nice summary table as csv please",  # praise that is not its whole clause
        "thank you for the data, now average all the rows per hour and export csv",
        "great summary, but not the raw data: export it as csv",  # the raw rows refused
    ],
)
def test_a_remark_on_output_shown_still_counts_without_a_request_for_the_raw_rows(
    text: str,
) -> None:
    assert is_derived_request(text)
