"""Settings from the environment and `.env` (worker/environment.py): where a value comes
from, how it is parsed and checked, and how a bad one is reported."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worker.cli import main
from worker.environment import Secret, Setting, SettingsError, integer, number, read_dotenv
from worker.settings import Settings
from worker.testing.settings import HarnessSettings


def write_env(tmp_path: Path, text: str) -> Path:
    """A `.env` file holding `text`."""
    file = tmp_path / ".env"
    file.write_text(text, encoding="utf-8")
    return file


def test_a_setting_is_read_from_its_prefixed_variable_in_any_case() -> None:
    read = Settings(env_file=None, environ={"export_worker_Max_Attempts": "7", "MAX_ATTEMPTS": "9"})
    assert read.max_attempts == 7


def test_the_environment_wins_over_the_dotenv_file_and_arguments_win_over_both(
    tmp_path: Path,
) -> None:
    file = write_env(tmp_path, "EXPORT_WORKER_MAX_ATTEMPTS=3\nEXPORT_WORKER_CONCURRENCY=2\n")
    environ = {"EXPORT_WORKER_MAX_ATTEMPTS": "6", "EXPORT_WORKER_CSV_BOM": "false"}
    read = Settings(env_file=file, environ=environ, csv_bom=True)
    assert (read.max_attempts, read.concurrency, read.csv_bom) == (6, 2, True)


def test_an_unset_setting_takes_its_default_and_unknown_variables_are_ignored() -> None:
    read = Settings(env_file=None, environ={"EXPORT_WORKER_NO_SUCH_THING": "x"})
    assert read == Settings(env_file=None, environ={})
    assert read.backend == "local" and read.home == Path(".export-worker")


def test_every_refused_value_is_named_in_one_error() -> None:
    environ = {
        "EXPORT_WORKER_MAX_ATTEMPTS": "0",
        "EXPORT_WORKER_BACKEND": "cloud",
        "EXPORT_WORKER_CSV_BOM": "maybe",
    }
    with pytest.raises(SettingsError) as refused:
        Settings(env_file=None, environ=environ)
    message = str(refused.value)
    assert "EXPORT_WORKER_MAX_ATTEMPTS must be an integer >= 1, got '0'" in message
    assert "EXPORT_WORKER_BACKEND must be one of local, azure, got 'cloud'" in message
    assert (
        "EXPORT_WORKER_CSV_BOM must be true or false (yes/no, on/off, 1/0), got 'maybe'" in message
    )


def test_an_unknown_keyword_argument_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="no setting max_atempts"):
        Settings(env_file=None, environ={}, max_atempts=3)
    with pytest.raises(TypeError, match="no setting max_atempts"):
        Settings(env_file=None, environ={}).replace(max_atempts=3)


def test_a_secret_never_shows_in_a_repr_or_a_refusal() -> None:
    read = Settings(env_file=None, environ={"EXPORT_WORKER_COSMOS_KEY": "s3cr3t-key"})
    assert read.cosmos_key == Secret("s3cr3t-key")
    assert read.cosmos_key is not None and read.cosmos_key.get_secret_value() == "s3cr3t-key"
    assert "s3cr3t" not in repr(read) and "s3cr3t" not in str(read.cosmos_key)
    with pytest.raises(SettingsError) as refused:
        Settings(env_file=None, environ={}, cosmos_key=12345)
    assert "EXPORT_WORKER_COSMOS_KEY must be text" in str(refused.value)
    assert "12345" not in str(refused.value)


def reads_as_secret(setting: Setting[Any]) -> bool:
    """Whether the setting's parser makes a secret of text (told by its parser, not by the
    flag that hides its refused values)."""
    try:
        return isinstance(setting.parse("x"), Secret)
    except Exception:  # refused: a setting of another kind
        return False


SECRETS = sorted(name for name, setting in Settings.fields().items() if reads_as_secret(setting))


def test_every_secret_setting_is_refused_without_its_value() -> None:
    assert SECRETS == ["blob_connection_string", "cosmos_key", "servicebus_connection_string"]
    for name in SECRETS:
        with pytest.raises(SettingsError) as refused:
            Settings(env_file=None, environ={}, **{name: 987654321})
        assert f"EXPORT_WORKER_{name.upper()} must be text" in str(refused.value)
        assert "987654321" not in str(refused.value)


def test_settings_are_frozen_and_replace_checks_what_it_changes() -> None:
    read = Settings(env_file=None, environ={})
    with pytest.raises(AttributeError):
        read.max_attempts = 2  # type: ignore[misc]
    changed = read.replace(max_attempts="8", cosmos_key="k")
    assert (changed.max_attempts, changed.cosmos_key, read.max_attempts) == (8, Secret("k"), 5)
    with pytest.raises(SettingsError, match="EXPORT_WORKER_HTTP_PORT"):
        read.replace(http_port=70000)


def test_optional_settings_are_empty_text_when_set_empty_and_none_when_unset() -> None:
    read = Settings(env_file=None, environ={"EXPORT_WORKER_COSMOS_ENDPOINT": ""})
    assert (read.cosmos_endpoint, read.blob_account_url) == ("", None)


def test_the_log_level_is_any_case_of_a_known_level() -> None:
    read = Settings(env_file=None, environ={"EXPORT_WORKER_LOG_LEVEL": "WARNING"})
    assert read.log_level == "warning"


@pytest.mark.parametrize(
    ("written", "parsed"),
    [(w, True) for w in ("1", "true", "TRUE", "yes", "On", "t", "y")]
    + [(w, False) for w in ("0", "false", "No", "off", "F", "n")],
)
def test_booleans_are_the_usual_words_in_any_case(written: str, parsed: bool) -> None:
    assert Settings(env_file=None, environ={"EXPORT_WORKER_CSV_BOM": written}).csv_bom is parsed


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(["", " ", "+"]))
def test_integers_parse_from_text_and_keep_their_bounds(value: int, decoration: str) -> None:
    parse = integer(ge=0, le=65535)
    sign = "+" if decoration == "+" and value >= 0 else ""
    written = f"{decoration if decoration == ' ' else ''}{sign}{value}"
    if 0 <= value <= 65535:
        assert parse(written) == value
    else:
        with pytest.raises(ValueError):
            parse(written)


@pytest.mark.parametrize("written", ["5.5", "", "five", "nan"])
def test_text_that_is_not_a_whole_number_is_no_integer(written: str) -> None:
    with pytest.raises(ValueError):
        integer()(written)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_numbers_parse_from_their_repr_and_never_accept_nan(value: float) -> None:
    parse = number(gt=0)
    if not math.isnan(value) and value > 0:
        assert parse(repr(value)) == value
    else:
        with pytest.raises(ValueError):
            parse(repr(value))


def test_the_harness_settings_read_the_same_way() -> None:
    read = HarnessSettings(env_file=None, environ={"EXPORT_WORKER_FAULT_RATE": "0.25"})
    assert (read.fault_rate, read.crash_seed) == (0.25, None)
    with pytest.raises(
        SettingsError, match="EXPORT_WORKER_FAULT_RATE must be a number >= 0 and < 1"
    ):
        HarnessSettings(env_file=None, environ={"EXPORT_WORKER_FAULT_RATE": "1"})


# --------------------------------------------------------------------------------------
# .env syntax
# --------------------------------------------------------------------------------------
def test_dotenv_lines_comments_exports_and_quotes(tmp_path: Path) -> None:
    file = write_env(
        tmp_path,
        "# a comment\n"
        "\n"
        "export EXPORT_WORKER_QUEUE_NAME = turns  # trailing comment\n"
        "EXPORT_WORKER_TOPIC_NAME='lit # eral\\n'\n"
        'EXPORT_WORKER_COSMOS_DATABASE="a \\"b\\"\\tc\\\\"\n'
        "EXPORT_WORKER_HTTP_HOST=host#not-a-comment\n"
        "EXPORT_WORKER_BLOB_ACCOUNT_URL=\n",
    )
    assert read_dotenv(file) == {
        "EXPORT_WORKER_QUEUE_NAME": "turns",
        "EXPORT_WORKER_TOPIC_NAME": "lit # eral\\n",
        "EXPORT_WORKER_COSMOS_DATABASE": 'a "b"\tc\\',
        "EXPORT_WORKER_HTTP_HOST": "host#not-a-comment",
        "EXPORT_WORKER_BLOB_ACCOUNT_URL": "",
    }


def test_a_missing_dotenv_file_sets_nothing(tmp_path: Path) -> None:
    assert read_dotenv(tmp_path / "absent.env") == {}


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ('EXPORT_WORKER_QUEUE_NAME="open\n', 'unclosed "'),
        ("EXPORT_WORKER_QUEUE_NAME='open\n", "unclosed '"),
        ('EXPORT_WORKER_QUEUE_NAME="ends in an escaped quote\\"\n', 'unclosed "'),
        ("just words\n", "expected NAME=value"),
    ],
)
def test_a_dotenv_line_that_cannot_be_read_is_an_error_with_its_line(
    tmp_path: Path, line: str, complaint: str
) -> None:
    file = write_env(tmp_path, "EXPORT_WORKER_TOPIC_NAME=t\n" + line)
    with pytest.raises(SettingsError, match=f".env:2: .*{complaint}|.env:2: {complaint}"):
        read_dotenv(file)


# --------------------------------------------------------------------------------------
# Through the CLI
# --------------------------------------------------------------------------------------
def test_run_with_a_bad_setting_exits_1_with_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXPORT_WORKER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EXPORT_WORKER_CONCURRENCY", "none")
    with pytest.raises(SystemExit) as exited:
        main(["run", "--drain"])
    assert exited.value.code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        "export-worker: SettingsError: invalid settings: "
        "EXPORT_WORKER_CONCURRENCY must be an integer >= 1, got 'none'"
    )
