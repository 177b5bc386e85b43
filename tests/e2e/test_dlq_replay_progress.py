"""`dlq replay` shows progress on long runs only, on stderr, and stdout stays empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_driver import Cli

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
        assert dry.stdout.decode().count("would replay") == 1
        assert dry.stderr.decode().splitlines()[-1] == "would replay 1 message(s)"
        done = cli.run("dlq", "replay", first, first)
        assert done.stderr.decode().splitlines()[-1] == "replayed 1 message(s)"
    else:
        done = cli.run("dlq", "purge", first, first, "--yes")
        assert done.stderr.decode().splitlines()[-1] == "purged 1 message(s)"
    assert [str(d["sequence_number"]) for d in cli.json("dlq", "list")] == [second]
