"""`export-worker dlq`: the dead-letter queue's list, show, replay and purge
(docs/contract/cli.md)."""

from __future__ import annotations

import json
import sys

import click

from worker.cli_context import Failure, show, with_backend
from worker.ports import Backend, DeadLetteredMessage, NotFound
from worker.settings import Settings

# A replay of this many messages or more shows progress on stderr (a bar on a TTY, else
# its label once).
PROGRESS_FROM = 20


@click.group()
def dlq() -> None:
    """The dead-letter queue: list, show, replay, purge."""


@dlq.command("list")
@click.option("--reason", default=None, metavar="R", help="Only this reason.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def dlq_list(reason: str | None, as_json: bool) -> None:
    """Dead-lettered messages, oldest first."""

    async def work(backend: Backend, _: Settings) -> list[DeadLetteredMessage]:
        return await backend.queue.dead_letters(reason)

    entries = with_backend(work, probe=False)
    if not entries and not as_json:
        # Said on stderr: stdout stays one line per message (none), as scripts read it.
        click.echo(
            "no dead-lettered messages" + (f" with reason {reason}" if reason else ""), err=True
        )
    show(
        [d.summary() for d in entries],
        as_json,
        lambda d: (
            f"{d['sequence_number']}  {d['reason']}  {d['session_id'] or '-'}  {d['description']}"
        ),
    )


@dlq.command("show")
@click.argument("sequence_number", type=int)
def dlq_show(sequence_number: int) -> None:
    """One dead-lettered message with its body and properties."""

    async def work(backend: Backend, _: Settings) -> DeadLetteredMessage:
        try:
            return await backend.queue.dead_letter_entry(sequence_number)
        except NotFound:
            raise Failure(f"no dead-lettered message {sequence_number}") from None

    entry = with_backend(work, probe=False)
    shown = entry.summary()
    shown["properties"] = dict(entry.properties)
    shown["body"] = entry.body.decode("utf-8", "replace")
    # A property of a type JSON has not (an AMQP uuid: a .NET Guid) is shown as its text;
    # `replay` sends it back as it came.
    click.echo(json.dumps(shown, ensure_ascii=False, indent=2, default=str))


def _check_selection(
    numbers: tuple[int, ...], take_all: bool, reason: str | None, *, by_reason: bool
) -> None:
    """A usage error for a selection that names nothing or too much: raised before the
    backend is opened, so a mistyped command says so without reaching for a queue."""
    if take_all and numbers:
        raise click.UsageError("name SEQUENCE_NUMBER… or --all, not both")
    if not take_all and not numbers and (reason is None or not by_reason):
        # Replay's --reason selects on its own; purge's only narrows numbers or --all (it
        # deletes for good, so what it deletes is named in full).
        choices = (
            "SEQUENCE_NUMBER…, --all or --reason R" if by_reason else "SEQUENCE_NUMBER… or --all"
        )
        raise click.UsageError(f"name {choices}")


def _selected(
    entries: list[DeadLetteredMessage], numbers: tuple[int, ...], reason: str | None
) -> list[DeadLetteredMessage]:
    """The messages a checked selection names (`_check_selection`)."""
    if not numbers:  # --all, or replay's --reason R alone: every one with that reason
        return [d for d in entries if reason is None or d.reason == reason]
    by_number = {d.sequence_number: d for d in entries}
    missing = [n for n in numbers if n not in by_number]
    if missing:
        raise Failure(f"no dead-lettered message {missing[0]}")
    # A number named twice is one message: replayed or purged once, and counted once.
    chosen = dict.fromkeys(numbers)
    return [by_number[n] for n in chosen if reason is None or by_number[n].reason == reason]


def _brief(d: DeadLetteredMessage) -> str:
    """A dry run's line for one message: its number, reason and session ("-" for none)."""
    return f"{d.sequence_number}  {d.reason}  {d.session_id or '-'}"


@dlq.command("replay")
@click.argument("sequence_numbers", nargs=-1, type=int, metavar="[SEQUENCE_NUMBER]...")
@click.option("--all", "take_all", is_flag=True, help="Every dead-lettered message.")
@click.option("--reason", default=None, metavar="R", help="Only those with this reason.")
@click.option("--dry-run", is_flag=True, help="Say what would be replayed; change nothing.")
def dlq_replay(
    sequence_numbers: tuple[int, ...], take_all: bool, reason: str | None, dry_run: bool
) -> None:
    """Re-send dead-lettered bodies on their sessions, then remove the dead-lettered copies."""
    _check_selection(sequence_numbers, take_all, reason, by_reason=True)

    async def work(backend: Backend, _: Settings) -> int:
        chosen = _selected(await backend.queue.dead_letters(), sequence_numbers, reason)
        if dry_run:
            for d in chosen:
                click.echo(f"would replay {_brief(d)}")
            return len(chosen)
        with click.progressbar(
            length=len(chosen),
            label="replaying",
            file=sys.stderr,
            hidden=len(chosen) < PROGRESS_FROM,
        ) as progress:
            for d in chosen:
                await backend.queue.replay(d.sequence_number)
                progress.update(1)
        return len(chosen)

    count = with_backend(work, probe=False)
    click.echo(f"{'would replay' if dry_run else 'replayed'} {count} message(s)", err=True)


@dlq.command("purge")
@click.argument("sequence_numbers", nargs=-1, type=int, metavar="[SEQUENCE_NUMBER]...")
@click.option("--all", "take_all", is_flag=True, help="Every dead-lettered message.")
@click.option("--reason", default=None, metavar="R", help="Only those with this reason.")
@click.option("--dry-run", is_flag=True, help="Say what would be purged; change nothing.")
@click.option("--yes", is_flag=True, help="Confirm: purged messages are gone for good.")
def dlq_purge(
    sequence_numbers: tuple[int, ...], take_all: bool, reason: str | None, dry_run: bool, yes: bool
) -> None:
    """Delete dead-lettered messages for good."""
    if not yes and not dry_run:
        raise click.UsageError("purge deletes for good: add --yes")
    _check_selection(sequence_numbers, take_all, reason, by_reason=False)

    async def work(backend: Backend, _: Settings) -> int:
        chosen = _selected(await backend.queue.dead_letters(), sequence_numbers, reason)
        for d in chosen:
            if dry_run:
                click.echo(f"would purge {_brief(d)}")
            else:
                await backend.queue.purge(d.sequence_number)
        return len(chosen)

    count = with_backend(work, probe=False)
    click.echo(f"{'would purge' if dry_run else 'purged'} {count} message(s)", err=True)
