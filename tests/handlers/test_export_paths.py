"""Where exports live and which artifact paths may be read (stored-data.md, files.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from handlers.errors import PermanentError
from handlers.export_paths import (
    confine_artifact,
    download_file_name,
    export_blob_path,
    export_id,
    parse_timestamp,
)


def test_export_id_is_sha256_of_conversation_turn_format() -> None:
    # Pinned by the public fixtures' expected files.
    assert export_id("conv_headline_a", "turn_headline_a1", "csv") == "exp_0bb0dffa1ca590a6f8d1"
    assert export_id("conv_headline_a", "turn_headline_a1", "json") != "exp_0bb0dffa1ca590a6f8d1"


def test_export_blob_path_is_deterministic() -> None:
    assert export_blob_path("exports", "c", "t", "exp_1", "xlsx") == "exports/c/t/exp_1.xlsx"


def test_download_file_name_uses_action_and_timestamp() -> None:
    at = datetime(2026, 11, 20, 9, 1, 39, tzinfo=UTC)
    assert download_file_name("list_parameter_history", at, "csv") == (
        "list_parameter_history_20261120_090139.csv"
    )
    assert download_file_name(None, at, "json") == "export_20261120_090139.json"
    assert download_file_name('a/b"c', at, "xml") == "a_b_c_20261120_090139.xml"


@pytest.mark.parametrize(
    "path",
    [
        "artifacts/other_conv/t/x.json",
        "exports/conv_a/t/x.json",
        "artifacts/conv_a/../other/x.json",
        "artifacts/conv_a//x.json",
        "artifacts/conv_a/",
        "artifacts/conv_ab/x.json",
        "/artifacts/conv_a/x.json",
        "artifacts/conv_a/x\\..\\y.json",
    ],
)
def test_artifact_path_outside_conversation_is_not_authorized(path: str) -> None:
    with pytest.raises(PermanentError) as caught:
        confine_artifact(path, "artifacts", "conv_a")
    assert caught.value.reason == "not_authorized"


def test_artifact_path_inside_conversation_is_read() -> None:
    path = "artifacts/conv_a/turn_1/call_1.json"
    assert confine_artifact(path, "artifacts", "conv_a") == path


def test_timestamp_parsing() -> None:
    assert parse_timestamp("2026-11-20T09:01:39Z") == datetime(2026, 11, 20, 9, 1, 39, tzinfo=UTC)
    assert parse_timestamp("yesterday") is None
    expected = datetime(2026, 11, 20, 9, 1, 39, tzinfo=UTC)
    assert parse_timestamp("2026-11-20t09:01:39z") == expected  # RFC 3339 allows lower case
    assert parse_timestamp("2026-11-20T10:01:39+01:00") == expected


def test_download_file_name_keeps_dots_strips_leading_and_trailing_dots_and_cuts_at_80() -> None:
    at = datetime(2026, 11, 20, 9, 1, 39, tzinfo=UTC)
    assert download_file_name("v1.2_export", at, "csv") == "v1.2_export_20261120_090139.csv"
    assert download_file_name("._list_.", at, "csv") == "list_20261120_090139.csv"
    assert download_file_name("...", at, "csv") == "export_20261120_090139.csv"
    assert download_file_name("a" * 100, at, "csv") == "a" * 80 + "_20261120_090139.csv"
