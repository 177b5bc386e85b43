"""docs/contract/decision.md step 6 (row extraction) and step 8 (secret keys)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from handlers.compaction import build_citation
from handlers.rows import cell_text, clean_row, extract_rows, is_truncated, normalize_key


def rows(result: Any) -> list[dict[str, Any]]:
    return list(extract_rows(result))


def test_json_string_result_is_parsed() -> None:
    payload = {"items": [{"a": 1}, {"a": 2}], "count": 2}
    assert rows(json.dumps(payload)) == [{"a": 1}, {"a": 2}]
    assert rows(json.dumps([{"a": 1}])) == [{"a": 1}]


def test_json_string_under_a_row_key_is_parsed() -> None:
    assert rows({"body": json.dumps({"rows": [{"a": 1}]})}) == [{"a": 1}]


def test_non_json_string_gives_value_row() -> None:
    assert rows("all systems nominal") == [{"value": "all systems nominal"}]
    assert rows("{not json") == [{"value": "{not json"}]


def test_json_scalar_text_stays_text() -> None:
    # Only objects and arrays are parsed: "42" is the text the tool returned.
    assert rows("42") == [{"value": "42"}]


def test_list_gives_one_row_per_item() -> None:
    assert rows([{"a": 1}, 7, "x", [1, 2], {"b": None}]) == [
        {"a": 1},
        {"value": 7},
        {"value": "x"},
        {"value": [1, 2]},
        {"b": None},
    ]


def test_list_items_are_rows_as_they_are() -> None:
    # A dict inside a list is a row: its control-looking keys are data, not an envelope.
    assert rows([{"status": "online", "items": [1]}]) == [{"status": "online", "items": [1]}]


def test_row_keys_order() -> None:
    both = {"result": [{"from": "result"}], "data": [{"from": "data"}]}
    assert rows(both) == [{"from": "data"}]
    keys = ["rows", "data", "items", "results", "records", "value", "values", "result"]
    keys += ["body", "output", "payload"]
    for earlier, later in itertools.pairwise(keys):
        result = {later: [{"from": later}], earlier: [{"from": earlier}]}
        assert rows(result) == [{"from": earlier}], (earlier, later)


def test_row_keys_matched_ignoring_case_and_punctuation() -> None:
    assert rows({"Items": [{"a": 1}]}) == [{"a": 1}]
    assert rows({"re-sults": [{"a": 2}], "total": 1}) == [{"a": 2}]
    assert rows({"PAY_LOAD": {"x": 1}}) == [{"x": 1}]


def test_empty_row_key_is_skipped_for_the_next() -> None:
    assert rows({"rows": [], "data": None, "items": [{"a": 1}]}) == [{"a": 1}]


def test_scalar_under_row_key_gives_value_row() -> None:
    assert rows({"result": 42, "status": "ok"}) == [{"value": 42}]
    assert rows({"output": "done"}) == [{"value": "done"}]


def test_control_keys_dropped() -> None:
    result = {
        "id": 7,
        "Count": 1,
        "status": "ok",
        "message": "fine",
        "total": 1,
        "next_link": "/p2",
        "nextLink": "/p2",
        "page": 1,
        "pagination": {"size": 1},
        "name": "x",
    }
    assert rows(result) == [{"id": 7, "name": "x"}]


def test_status_only_envelope_gives_no_rows() -> None:
    assert rows({"status": "ok", "message": "nothing found"}) == []
    assert rows({"items": [], "count": 0, "next_link": None}) == []


def test_record_with_an_empty_row_named_field_is_one_row() -> None:
    assert rows({"name": "x", "value": None}) == [{"name": "x", "value": None}]


def test_none_or_empty_gives_no_rows() -> None:
    for empty in (None, "", "  ", [], {}, {"items": []}):
        assert rows(empty) == [], empty


def test_nesting_bounded_at_four_levels() -> None:
    # Levels: the result is 1; row keys are followed into levels 2, 3 and 4.
    three_deep = {"data": {"data": {"items": [{"a": 1}, {"a": 2}]}}}
    assert rows(three_deep) == [{"a": 1}, {"a": 2}]
    # A dict reached at level 4 is itself the row: its row key is not followed further.
    four_deep = {"data": {"data": {"data": {"items": [{"a": 1}], "count": 1}}}}
    assert rows(four_deep) == [{"items": [{"a": 1}]}]
    list_at_four = {"data": {"data": {"data": [{"a": 1}, {"a": 2}]}}}
    assert rows(list_at_four) == [{"a": 1}, {"a": 2}]


def test_secret_keys_dropped_at_any_depth() -> None:
    row = {
        "name": "svc",
        "api_key": "k",
        "Access-Token": "t",
        "password": "p",
        "passwd": "p",
        "clientSecret": "s",
        "ConnectionString": "c",
        "credentials": {"user": "u"},
        "Authorization": "Bearer x",
        "config": {"db_password": "p", "host": "h", "inner": [{"refresh_token": "t", "id": 1}]},
        "list": [[{"secret": 1, "ok": 2}]],
    }
    assert clean_row(row) == {
        "name": "svc",
        "config": {"host": "h", "inner": [{"id": 1}]},
        "list": [[{"ok": 2}]],
    }


@pytest.mark.parametrize(
    "key",
    [
        "access_key",
        "AWSAccessKeyId",
        "storageAccountKey",
        "account-key",
        "private_key",
        "PrivateKeyPem",
        "subscription_key",
        "Ocp-Apim-Subscription-Key",
        "shared_access_signature",
        "SharedAccessKeyName",
        "sharedAccessPolicy",
    ],
)
def test_secret_key_fragments_of_the_full_list_are_dropped_at_any_depth(key: str) -> None:
    row = {key: "s", "id": 1, "nested": {key: "s", "deeper": [{key: "s", "ok": True}]}}
    assert clean_row(row) == {"id": 1, "nested": {"deeper": [{"ok": True}]}}


@pytest.mark.parametrize("key", ["access", "account", "key", "public_key", "keyboard", "shared"])
def test_keys_without_a_secret_fragment_are_kept(key: str) -> None:
    assert clean_row({key: 1}) == {key: 1}


def test_secret_keys_cleaning_leaves_the_row_unchanged() -> None:
    row = {"token": "t", "nested": {"secret": 1}}
    clean_row(row)
    assert row == {"token": "t", "nested": {"secret": 1}}


@pytest.mark.parametrize(
    "key", ["truncated", "is_truncated", "rows_truncated", "isTruncated", "resultTruncated"]
)
def test_truncated_flag_at_top_level(key: str) -> None:
    assert is_truncated({key: True, "items": [{"a": 1}]})
    assert is_truncated(json.dumps({key: "true", "items": [{"a": 1}]}))


# --- columnar tables: query services answer with column names and rows of values ---------
_READINGS = [["2026-11-19T00:00:00Z", "vm1", 12.5], ["2026-11-19T00:01:00Z", "vm1", None]]
_READING_ROWS = [
    {"TimeGenerated": "2026-11-19T00:00:00Z", "Computer": "vm1", "CounterValue": 12.5},
    {"TimeGenerated": "2026-11-19T00:01:00Z", "Computer": "vm1", "CounterValue": None},
]


@pytest.mark.parametrize(
    "result",
    [
        # Log Analytics: column objects with a name and a type, under `tables`
        {
            "tables": [
                {
                    "name": "PrimaryResult",
                    "columns": [
                        {"name": "TimeGenerated", "type": "datetime"},
                        {"name": "Computer", "type": "string"},
                        {"name": "CounterValue", "type": "real"},
                    ],
                    "rows": _READINGS,
                }
            ]
        },
        # Kusto: the first of its tables is the query's result
        {
            "Tables": [
                {
                    "TableName": "Table_0",
                    "Columns": [
                        {"ColumnName": "TimeGenerated", "DataType": "DateTime"},
                        {"ColumnName": "Computer", "DataType": "String"},
                        {"ColumnName": "CounterValue", "DataType": "Double"},
                    ],
                    "Rows": _READINGS,
                },
                {"TableName": "Table_1", "Columns": [{"ColumnName": "Value"}], "Rows": [["x"]]},
            ]
        },
        # Azure Resource Graph's table format: under `data`
        {
            "totalRecords": 2,
            "data": {
                "columns": [
                    {"name": "TimeGenerated"},
                    {"name": "Computer"},
                    {"name": "CounterValue"},
                ],
                "rows": _READINGS,
            },
        },
        # pandas' DataFrame.to_json(orient="split"): the lists under `data`, an index beside
        {
            "columns": ["TimeGenerated", "Computer", "CounterValue"],
            "index": [0, 1],
            "data": _READINGS,
        },
        # plain column names, as a JSON string
        json.dumps({"columns": ["TimeGenerated", "Computer", "CounterValue"], "rows": _READINGS}),
    ],
)
def test_columnar_table_gives_one_row_per_list_keyed_by_its_columns(result: Any) -> None:
    assert rows(result) == _READING_ROWS


@pytest.mark.parametrize(
    "result",
    [
        {"tables": [{"name": "PrimaryResult", "columns": [{"name": "a"}], "rows": []}]},
        {"columns": ["a", "b"], "rows": []},
        {"columns": ["a", "b"], "index": [], "data": []},
    ],
)
def test_columnar_table_without_rows_gives_no_rows(result: Any) -> None:
    assert rows(result) == []


def test_rows_of_lists_that_do_not_fit_the_columns_stay_value_rows() -> None:
    # No columns, or a row of another width: the lists are values, as any list item is.
    assert rows({"rows": [[1, 2], [3, 4]]}) == [{"value": [1, 2]}, {"value": [3, 4]}]
    assert rows({"columns": ["a", "b"], "rows": [[1, 2], [3]]}) == [
        {"value": [1, 2]},
        {"value": [3]},
    ]
    assert rows({"columns": [{"type": "int"}], "rows": [[1]]}) == [{"value": [1]}]
    assert rows({"columns": ["a", "a"], "rows": [[1, 2]]}) == [{"value": [1, 2]}]
    # a column without a name, or named by a number, would key a value by it
    assert rows({"columns": ["a", ""], "rows": [[1, 2]]}) == [{"value": [1, 2]}]
    assert rows({"columns": ["a", 5], "rows": [[1, 2]]}) == [{"value": [1, 2]}]


def test_a_compacted_columnar_table_keeps_its_remaining_items_after_its_rows() -> None:
    result = {"columns": ["a", "b"], "rows": [[1, 2], [3, 4], {"remaining_items": 5}]}
    assert rows(result) == [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"remaining_items": 5}]


def test_columns_without_a_rows_key_or_beside_an_empty_field_are_a_record() -> None:
    # Only an empty `rows` or `data` says a columnar table answered no rows.
    record = {"columns": ["a", "b"], "name": "t", "comment": ""}
    assert rows(record) == [record]


def test_a_columnar_table_reached_at_the_fourth_level_is_itself_the_row() -> None:
    table = {"columns": ["a", "b"], "rows": [[1, 2]]}
    assert rows({"data": {"tables": [table]}}) == [{"a": 1, "b": 2}]
    # the table is the fourth level: its rows are not followed
    assert rows({"data": {"data": {"tables": [table]}}}) == [table]
    # the `tables` holder is the fourth level: its tables are not followed
    assert rows({"data": {"data": {"data": {"tables": [table]}}}}) == [{"tables": [table]}]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["rows", "Rows", "columns", "Columns", "tables", "data", "name", "x"])
            | st.text(max_size=4),
            inner,
            max_size=4,
        )
    ),
    max_leaves=24,
)


@given(_JSON)
def test_any_json_result_gives_dict_rows_and_a_citation_that_counts_them(result: Any) -> None:
    found = rows(result)
    assert all(isinstance(row, dict) for row in found)
    assert build_citation(result)["row_count"] == len(found)


@given(
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=5, unique=True).flatmap(
        lambda names: st.tuples(
            st.just(names),
            st.lists(
                st.lists(
                    st.integers() | st.text(max_size=4) | st.none(),
                    min_size=len(names),
                    max_size=len(names),
                ),
                min_size=1,
                max_size=6,
            ),
        )
    )
)
def test_a_columnar_table_gives_each_list_keyed_by_the_columns(table: Any) -> None:
    names, values = table
    named = [{"name": name, "type": "string"} for name in names]
    expected = [dict(zip(names, row, strict=True)) for row in values]
    assert rows({"columns": names, "rows": values}) == expected
    assert rows({"tables": [{"name": "PrimaryResult", "columns": named, "rows": values}]}) == (
        expected
    )


def test_a_schema_of_tables_without_rows_is_one_row_as_before() -> None:
    schema = {"database": "telemetry", "tables": [{"name": "readings", "columns": ["t", "v"]}]}
    assert rows(schema) == [schema]


def test_a_resource_graph_result_flagged_truncated_is_truncated() -> None:
    result = {"data": {"columns": ["a"], "rows": [[1]]}, "resultTruncated": "true"}
    assert is_truncated(result) and rows(result) == [{"a": 1}]
    assert not is_truncated({**result, "resultTruncated": "false"})


def test_truncated_flag_in_the_dict_that_held_the_rows() -> None:
    assert is_truncated({"data": {"truncated": True, "items": [{"a": 1}]}})


@pytest.mark.parametrize("block", ["pagination", "page", "meta", "Metadata", "paging"])
def test_truncated_flag_in_the_envelopes_paging_block(block: str) -> None:
    assert is_truncated({"rows": [{"a": 1}], block: {"is_truncated": True}})
    assert is_truncated({"data": {"items": [{"a": 1}], block: {"truncated": "true"}}})
    assert not is_truncated({"rows": [{"a": 1}], block: {"truncated": False}})
    assert not is_truncated({"rows": [{"a": 1}], "detail": {"truncated": True}})  # not paging


def test_truncated_flag_false_or_absent_is_not_truncated() -> None:
    assert not is_truncated({"truncated": False, "items": [{"a": 1}]})
    assert not is_truncated({"truncated": "false", "items": [{"a": 1}]})
    assert not is_truncated([{"truncated": True}])  # a row's own field, not the result's
    assert not is_truncated("plain text")


def test_cell_text_forms() -> None:
    assert cell_text("  x ") == "x"
    assert cell_text(True) == "true"
    assert cell_text(False) == "false"
    assert cell_text(None) == ""
    assert cell_text(12) == "12"
    assert cell_text(12.45) == "12.45"
    assert cell_text({"a": [1, "é"]}) == '{"a":[1,"é"]}'


@given(st.text() | st.integers() | st.sampled_from(["Next-Link", "İd", "ǅ_x", "x²½", "Ⅻ_৩"]))
@example("ΣΑΣ-Οδός")
def test_normalize_key_keeps_what_isalnum_keeps_of_the_key_lower_cased(key: object) -> None:
    expected = "".join(ch for ch in str(key).lower() if ch.isalnum())
    assert normalize_key(key) == expected


def test_record_whose_fields_are_all_empty_is_still_one_row() -> None:
    # Only empty row keys make a bare envelope; a record's own empty fields are a row.
    assert rows({"name": None, "note": ""}) == [{"name": None, "note": ""}]


def test_truncated_flag_in_a_page_info_block_and_yes_as_a_flag() -> None:
    assert is_truncated({"items": [{"a": 1}], "pageInfo": {"truncated": True}})
    assert is_truncated({"items": [{"a": 1}], "truncated": " Yes "})
