"""`dlq replay` and `dlq purge`: their selections, progress on long runs only (on stderr), and
stdout holding only what a dry run would do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_driver import Cli, load_fixture

from worker.cli_dlq import PROGRESS_FROM


def _dead_letters(tmp_path: Path, count: int) -> Cli:
    """A home with COUNT dead letters: bodies that are not events are dead-lettered at once."""
    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(home)
    lines = b"\n".join(b'{"not": "an event %d"}' % n for n in range(count))
    cli.run("send", "-", input=lines)
    cli.run("run", "--drain")
    assert len(cli.json("dlq", "list")) == count
    return cli


@pytest.mark.parametrize(("count", "shown"), [(PROGRESS_FROM - 1, False), (PROGRESS_FROM, True)])
def test_a_replay_of_many_dead_letters_shows_progress_and_a_short_one_does_not(
    tmp_path: Path, count: int, shown: bool
) -> None:
    cli = _dead_letters(tmp_path, count)
    done = cli.run("dlq", "replay", "--all")
    lines = done.stderr.decode().splitlines()
    assert ("replaying" in lines) is shown
    assert lines[-1] == f"replayed {count} message(s)"
    assert done.stdout == b""
    assert cli.json("dlq", "list") == []


def test_an_empty_list_says_so_on_stderr_and_prints_nothing_on_stdout(tmp_path: Path) -> None:
    cli = _dead_letters(tmp_path, 1)
    (entry,) = cli.json("dlq", "list")
    listed = cli.run("dlq", "list")
    assert listed.stdout.decode().startswith(f"{entry['sequence_number']}  {entry['reason']}  ")
    assert listed.stderr == b""
    narrowed = cli.run("dlq", "list", "--reason", "no_such_reason")
    assert narrowed.stdout == b""
    assert narrowed.stderr.decode() == "no dead-lettered messages with reason no_such_reason\n"
    cli.run("dlq", "purge", "--all", "--yes")
    emptied = cli.run("dlq", "list")
    assert (emptied.stdout, emptied.stderr.decode()) == (b"", "no dead-lettered messages\n")


def test_replay_by_reason_alone_takes_every_dead_letter_of_that_reason(tmp_path: Path) -> None:
    cli = _dead_letters(tmp_path, 2)
    assert (
        cli.run("dlq", "replay", "--reason", "turn_not_found")
        .stderr.decode()
        .endswith("replayed 0 message(s)\n")
    )
    assert len(cli.json("dlq", "list")) == 2
    done = cli.run("dlq", "replay", "--reason", "schema_invalid")
    assert done.stderr.decode().splitlines()[-1] == "replayed 2 message(s)"
    assert cli.json("dlq", "list") == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("replay",), "name SEQUENCE_NUMBER…, --all or --reason R"),
        (("replay", "--all", "1"), "not both"),
        (("purge", "--yes"), "name SEQUENCE_NUMBER… or --all"),
        (("purge", "--yes", "--reason", "schema_invalid"), "name SEQUENCE_NUMBER… or --all"),
        (("purge", "--dry-run"), "name SEQUENCE_NUMBER… or --all"),
        (("purge", "--all"), "add --yes"),
    ],
)
def test_a_dlq_command_without_a_choice_of_messages_is_a_usage_error(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    cli = _dead_letters(tmp_path, 1)
    proc = cli.run("dlq", *args, check=False)
    assert proc.returncode == 2 and says in proc.stderr.decode()
    assert len(cli.json("dlq", "list")) == 1


@pytest.mark.parametrize(
    "args",
    [("replay",), ("replay", "--all", "1"), ("purge", "--yes"), ("purge", "--yes", "--all", "1")],
)
def test_a_selection_usage_error_comes_before_the_backend_is_opened(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    # An Azure backend with nothing configured: opening it would fail (exit 1,
    # AzureNotConfigured); the mistyped command must say what is wrong with it instead.
    cli = Cli(tmp_path, extra_env={"EXPORT_WORKER_BACKEND": "azure"})
    assert cli.run("dlq", "list", check=False).returncode == 1
    proc = cli.run("dlq", *args, check=False)
    assert proc.returncode == 2, proc.stderr.decode()
    assert "AzureNotConfigured" not in proc.stderr.decode()
    assert "name SEQUENCE_NUMBER…" in proc.stderr.decode()


@pytest.mark.parametrize("command", ["replay", "purge"])
def test_a_sequence_number_named_twice_is_one_message(tmp_path: Path, command: str) -> None:
    cli = _dead_letters(tmp_path, 2)
    first, second = (str(d["sequence_number"]) for d in cli.json("dlq", "list"))
    if command == "replay":
        dry = cli.run("dlq", "replay", first, first, "--dry-run")
        assert dry.stdout.decode() == f"would replay {first}  schema_invalid  -\n"
        assert dry.stderr.decode().splitlines()[-1] == "would replay 1 message(s)"
        done = cli.run("dlq", "replay", first, first)
        assert done.stderr.decode().splitlines()[-1] == "replayed 1 message(s)"
    else:
        done = cli.run("dlq", "purge", first, first, "--yes")
        assert done.stderr.decode().splitlines()[-1] == "purged 1 message(s)"
    assert [str(d["sequence_number"]) for d in cli.json("dlq", "list")] == [second]


def _two_reasons(tmp_path: Path) -> tuple[Cli, str, str]:
    """A home with one `schema_invalid` and one `conversation_not_found` dead letter."""
    cli = _dead_letters(tmp_path, 1)
    cli.extra_env = {"EXPORT_WORKER_MAX_ATTEMPTS": "1"}
    fixture, _ = load_fixture("headline")  # its event, for a conversation never stored
    event = {**fixture["events"][0], "conversation_id": "conv_nowhere"}
    cli.run("send", "-", input=json.dumps(event).encode())
    cli.run("run", "--drain")
    by_reason = {d["reason"]: str(d["sequence_number"]) for d in cli.json("dlq", "list")}
    assert set(by_reason) == {"schema_invalid", "conversation_not_found"}
    return cli, by_reason["schema_invalid"], by_reason["conversation_not_found"]


def test_purge_all_of_one_reason_leaves_the_others_and_a_dry_run_changes_nothing(
    tmp_path: Path,
) -> None:
    cli, invalid, missing = _two_reasons(tmp_path)
    dry = cli.run("dlq", "purge", "--all", "--reason", "schema_invalid", "--dry-run")
    assert dry.stdout.decode().splitlines() == [f"would purge {invalid}  schema_invalid  -"]
    assert dry.stderr.decode().splitlines()[-1] == "would purge 1 message(s)"
    assert len(cli.json("dlq", "list")) == 2
    done = cli.run("dlq", "purge", "--all", "--reason", "schema_invalid", "--yes")
    assert done.stderr.decode().splitlines()[-1] == "purged 1 message(s)" and done.stdout == b""
    assert [str(d["sequence_number"]) for d in cli.json("dlq", "list")] == [missing]


def test_purge_by_number_with_a_reason_purges_only_the_numbers_of_that_reason(
    tmp_path: Path,
) -> None:
    cli, invalid, missing = _two_reasons(tmp_path)
    done = cli.run("dlq", "purge", invalid, missing, "--reason", "conversation_not_found", "--yes")
    assert done.stderr.decode().splitlines()[-1] == "purged 1 message(s)"
    assert [str(d["sequence_number"]) for d in cli.json("dlq", "list")] == [invalid]


def test_dlq_show_prints_one_message_with_its_body_and_a_missing_one_is_an_error(
    tmp_path: Path,
) -> None:
    cli = _dead_letters(tmp_path, 1)
    (listed,) = cli.json("dlq", "list")
    # Without --json: one line each, a message without a session shown as "-".
    assert cli.run("dlq", "list").stdout.decode() == (
        f"{listed['sequence_number']}  schema_invalid  -  {listed['description']}\n"
    )
    shown = cli.dead_letter(listed["sequence_number"])
    assert {k: shown[k] for k in listed} == listed
    assert shown["body"] == '{"not": "an event 0"}' and shown["properties"] == {}
    missing = cli.run("dlq", "show", str(listed["sequence_number"] + 1), check=False)
    assert missing.returncode == 1 and missing.stdout == b""
    assert (
        missing.stderr.decode()
        .strip()
        .endswith(f"no dead-lettered message {listed['sequence_number'] + 1}")
    )


@pytest.mark.parametrize("command", [("replay",), ("purge", "--yes")])
def test_a_number_that_is_not_dead_lettered_fails_the_command_and_changes_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    cli = _dead_letters(tmp_path, 1)
    (listed,) = cli.json("dlq", "list")
    absent = str(listed["sequence_number"] + 7)
    proc = cli.run("dlq", *command, str(listed["sequence_number"]), absent, check=False)
    assert proc.returncode == 1
    assert (
        proc.stderr.decode().strip().splitlines()[-1].endswith(f"no dead-lettered message {absent}")
    )
    assert cli.json("dlq", "list") == [listed]
