"""`export-worker`: run the worker, feed it, look into its stores, operate its dead letters.

`--json` prints one JSON value on stdout and nothing else there: an array (`turns show`'s
holds its one record), except `status`'s one object. Exit 0 on success, 2 on a
usage error, 1 on any other failure, each failure with one line on stderr (docs/contract/cli.md).
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import click

from worker import logs
from worker.cli_context import Failure, print_json, show, with_backend, with_seeding
from worker.cli_dlq import dlq
from worker.environment import SettingsError
from worker.operations import Operations
from worker.ports import Backend, NotFound, service_of
from worker.scratch import choose_temporary_folder
from worker.sending import enqueue
from worker.serving import serve
from worker.settings import LOG_LEVELS, Settings
from worker.status_report import status_fields, status_lines
from worker.testing.seeding import Seeded, Seeding, seed
from worker.testing.settings import HarnessSettings
from worker.turn_report import turn_lines


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    help="Log level on stderr (run: info, else warning).",
)
@click.pass_context
def cli(ctx: click.Context, log_level: str | None) -> None:
    """Turn a chat agent's retrieved data into the file the user asked for."""
    ctx.obj = log_level
    choose_temporary_folder()  # before anything writes a temporary file (worker/scratch.py)
    if ctx.invoked_subcommand != "run":  # `run` configures its own, once it has its settings
        logs.configure(level=log_level, default="warning")


cli.add_command(dlq)


# --------------------------------------------------------------------------------------
@cli.command()
@click.option("--drain", is_flag=True, help="Exit 0 once the queue is empty.")
@click.option(
    "--concurrency", type=click.IntRange(min=1), default=None, metavar="N", help="Session workers."
)
@click.pass_context
def run(ctx: click.Context, drain: bool, concurrency: int | None) -> None:
    """Consume turn.completed events until stopped (SIGTERM/SIGINT) or drained."""
    try:
        loaded: Settings | None = Settings()
    except SettingsError:
        loaded = None  # raised again below, once it can be logged
    # Logging configured once, with the settings read once (unless they do not load).
    logs.configure(level=ctx.obj, default="info", settings=loaded)
    harness = HarnessSettings()  # no crash points or faults unless a harness asks
    operations: Operations | None = None
    try:
        settings = loaded or Settings()
        operations = Operations.from_settings(settings)
        asyncio.run(
            serve(
                settings,
                operations,
                drain=drain,
                concurrency=concurrency,
                checkpoint=harness.checkpoint(),
                inject=harness.fault_injection(),
            )
        )
    except Exception as exc:
        # A crash loop must show in a JSON log query too, not only in main()'s stderr line.
        logs.get_logger().critical("worker_failed", exc_info=exc)
        raise
    finally:
        if operations is not None:
            operations.tracing.close()  # flush the spans still buffered


@cli.command()
@click.argument("source", type=click.File("rb"), metavar="FILE|-")
def send(source: Any) -> None:
    """Enqueue turn.completed events from FILE (or - for stdin): one JSON object or JSON lines."""
    bodies = _split_bodies(source.read())

    async def work(backend: Backend, _: Settings) -> int:
        for body in bodies:
            await enqueue(backend.queue, body)
        return len(bodies)

    count = with_backend(work)
    click.echo(f"enqueued {count} event(s)", err=True)


def _split_bodies(data: bytes) -> list[bytes]:
    """One JSON value is one event; anything else is one event per non-empty line."""
    try:
        json.loads(data)
        return [data.strip()]
    except (ValueError, RecursionError):  # nested too deeply to parse: not one value either
        return [line.strip() for line in data.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------
@cli.group()
def dev() -> None:
    """Development helpers for the local backend."""


@dev.command("seed")
@click.argument("fixture", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def dev_seed(fixture: Path) -> None:
    """Load a fixture into the stores and enqueue its events, in order, exactly as given."""
    try:
        data = json.loads(fixture.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Failure(f"cannot read fixture {fixture}: {exc}") from None
    if not isinstance(data, dict):
        raise Failure(f"fixture {fixture} is not a JSON object")
    for key, kind in (("conversations", list), ("messages", list), ("artifacts", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            shape = "an array" if kind is list else "an object"
            raise Failure(f"fixture {fixture}: {key!r} must be {shape}")
    if data.get("events") is not None and not isinstance(data["events"], list):
        raise Failure(f"fixture {fixture}: 'events' must be an array")

    async def work(target: Seeding) -> Seeded:
        return await seed(target, data)

    done = with_seeding(work)
    click.echo(
        f"seeded {done.conversations} conversation(s), {done.messages} message(s), "
        f"{done.artifacts} artifact(s), {done.events} event(s)",
        err=True,
    )


@dev.command("events")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def dev_events(as_json: bool) -> None:
    """The export.published events sent (local backend: its outbox)."""

    async def work(target: Seeding) -> list[dict[str, Any]]:
        return await target.events.sent()

    show(
        with_seeding(work),
        as_json,
        lambda e: (
            f"{e.get('export_id')}  {e.get('format')}  {e.get('row_count')} rows  "
            f"{e.get('conversation_id')}/{e.get('turn_id')}"
        ),
    )


# --------------------------------------------------------------------------------------
@cli.group()
def turns() -> None:
    """Turn records (the ledger)."""


@turns.command("list")
@click.option("--conversation", metavar="ID", required=True, help="Conversation id.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def turns_list(conversation: str, as_json: bool) -> None:
    """A conversation's turn records, by seq."""

    async def work(backend: Backend, _: Settings) -> list[dict[str, Any]]:
        return [r.model_dump() for r in await backend.ledger.list_turns(conversation)]

    show(
        with_backend(work),
        as_json,
        lambda r: (
            f"{r.get('seq')}  {r.get('turn_id')}  {r.get('decision')}  "
            f"{r.get('format') or '-'}  {(r.get('export') or {}).get('row_count', '')}"
        ),
    )


@turns.command("show")
@click.argument("turn_id")
@click.option("--conversation", metavar="ID", required=True, help="Conversation id.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def turns_show(turn_id: str, conversation: str, as_json: bool) -> None:
    """One turn record, with why its rows were chosen."""

    async def work(backend: Backend, _: Settings) -> dict[str, Any] | None:
        record = await backend.ledger.get(conversation, turn_id)
        return None if record is None else record.model_dump()

    record = with_backend(work)
    if record is None:
        raise Failure(f"no turn record {turn_id!r} in conversation {conversation!r}")
    if as_json:
        print_json([record])
        return
    for line in turn_lines(record):
        click.echo(line)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status(as_json: bool) -> None:
    """Queue and dead-letter depths, the oldest message's age, the last export."""

    async def work(backend: Backend, settings: Settings) -> dict[str, Any]:
        stats = await backend.queue.stats()
        latest = await backend.ledger.latest_export()
        return status_fields(stats, latest, datetime.now(UTC), settings.backend)

    fields = with_backend(work)
    if as_json:
        click.echo(json.dumps(fields, ensure_ascii=False))
        return
    for line in status_lines(fields):
        click.echo(line)


@cli.group()
def exports() -> None:
    """Published exports."""


@exports.command("list")
@click.option("--conversation", metavar="ID", default=None, help="Only this conversation.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON array.")
def exports_list(conversation: str | None, as_json: bool) -> None:
    """Export entries of published turn records."""

    async def work(backend: Backend, _: Settings) -> list[dict[str, Any]]:
        records = await backend.ledger.list_exports(conversation)
        return [
            {
                "conversation_id": r.conversation_id,
                "turn_id": r.turn_id,
                **r.export.model_dump(),
            }
            for r in records
            if r.export is not None
        ]

    show(
        with_backend(work),
        as_json,
        lambda e: f"{e['export_id']}  {e['format']}  {e['row_count']} rows  {e['blob']}",
    )


@exports.command("get")
@click.argument("export_id")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="PATH"
)
def exports_get(export_id: str, output: Path | None) -> None:
    """The export's bytes: to PATH with -o, else to stdout."""
    if output is not None and not output.parent.is_dir():
        raise Failure(f"cannot write {output}: no folder {output.parent}")

    async def work(backend: Backend, _: Settings) -> None:
        record = await backend.ledger.find_export(export_id)
        if record is None or record.export is None:
            raise Failure(f"no export {export_id!r}")
        path = record.export.blob
        try:
            if output is not None:
                tmp = output.with_name(f".{output.name}.part")
                try:
                    with tmp.open("wb") as sink:
                        async for chunk in backend.blobs.read(path):
                            sink.write(chunk)
                    tmp.replace(output)
                except BaseException:
                    tmp.unlink(missing_ok=True)  # a failed copy leaves nothing behind
                    raise
            else:
                out = sys.stdout.buffer
                async for chunk in backend.blobs.read(path):
                    out.write(chunk)
                out.flush()
        except NotFound:
            raise Failure(f"export {export_id!r} is recorded but its blob is missing") from None

    with_backend(work)


# --------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------
def _fail(code: int, message: str) -> NoReturn:
    click.echo(f"export-worker: {message}", err=True)
    sys.exit(code)


def _no_command(exc: click.UsageError) -> bool:
    """Whether the usage error is a command group given no command."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return True
    ctx = exc.ctx
    return (
        ctx is not None
        and isinstance(ctx.command, click.Group)
        and ctx.invoked_subcommand is None
        and exc.message == "Missing command."
    )


def _commands_needed(ctx: click.Context | None) -> str:
    """What a group named without a command says: its commands."""
    if ctx is None or not isinstance(ctx.command, click.Group):
        return "a command is needed (--help lists them)"
    names = ", ".join(ctx.command.list_commands(ctx))
    group = ctx.command_path.partition(" ")[2]  # after the program's name: "dlq", or none
    needed = f"{group} needs a command" if group else "a command is needed"
    return f"{needed}: {names} (--help says what each does)"


YOUNG_COLLECTION_THRESHOLD = 10_000


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one line on stderr and the exit codes of docs/contract/cli.md."""
    # What is imported by now lives as long as the process: the collector never needs to
    # look at it again, neither in each full collection of a run nor at exit (where it
    # cost ~0.1 s of an empty run on a small machine, issue 10's start-up goal).
    gc.freeze()
    # A turn makes thousands of short-lived containers (a page's rows, the turn's records);
    # at the default threshold (700) the young generation was collected about once a turn,
    # each pass through what the turn still held: ~0.3 ms of a 13-17 ms headline turn
    # (benchmarks/PROFILE.md, eleventh round). At 10,000 it is ~0.05 ms; what is freed
    # by reference counting, nearly everything, never waits for a collection anyway.
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    try:
        code = cli.main(args=argv, prog_name="export-worker", standalone_mode=False)
    except click.UsageError as exc:
        if _no_command(exc):
            # A group named alone (`export-worker`, `export-worker --log-level debug`,
            # `export-worker dlq`): its commands, in a line.
            _fail(2, _commands_needed(exc.ctx))
        _fail(2, exc.format_message().splitlines()[0])
    except click.exceptions.Abort:
        _fail(1, "aborted")
    except Failure as exc:
        _fail(1, str(exc))
    except click.ClickException as exc:
        _fail(1, exc.format_message().splitlines()[0])
    except Exception as exc:
        service = service_of(exc)  # which service said it, unless its text already does
        line = str(exc).splitlines()[0] if str(exc) else ""
        lead = f"{service}: " if service and not line.startswith(f"{service}: ") else ""
        _fail(1, f"{type(exc).__name__}: {lead}{line}")
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
