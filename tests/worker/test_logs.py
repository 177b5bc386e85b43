"""Logs never leak: exceptions as type, location and frames; every logger as JSON lines."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from worker import cli, logs, serving
from worker.ports import Backend, BlobInfo, BlobUpload
from worker.settings import Settings

SECRET = "SECRET-ROW-7f3a9c"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def lines(text: str) -> list[dict[str, Any]]:
    """The JSON lines of the output (the CLI also writes plain one-line messages)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def configured(level: str | None = "info") -> io.StringIO:
    out = io.StringIO()
    logs.configure(level=level, stream=out, pretty=False)
    return out


def fail_with_row(value: str) -> None:
    try:
        {}[value]
    except KeyError as exc:
        raise ValueError(f"cannot serialise cell {value!r}") from exc


def test_an_exception_is_logged_as_type_location_and_frames_never_its_message() -> None:
    out = configured()
    try:
        fail_with_row(SECRET)
    except ValueError as exc:
        logs.get_logger(conversation_id="c1").error("handler_failed", exc_info=exc)
    assert SECRET not in out.getvalue()
    (line,) = lines(out.getvalue())
    exception = line["exception"]
    assert exception["type"] == "ValueError"
    assert exception["at"].endswith("test_logs.py:" + str(exception["frames"][-1]["line"]))
    assert [f["function"] for f in exception["frames"]] == [
        "test_an_exception_is_logged_as_type_location_and_frames_never_its_message",
        "fail_with_row",
    ]
    assert [c["type"] for c in exception["causes"]] == ["KeyError"]
    assert set(exception["frames"][0]) == {"file", "line", "function"}
    # Relative to the import root it came from: no machine-specific prefix.
    assert exception["frames"][0]["file"].endswith("test_logs.py")
    assert not exception["frames"][0]["file"].startswith("/")


def test_exc_info_true_inside_an_except_block_is_rendered_the_same_way() -> None:
    out = configured()
    try:
        fail_with_row(SECRET)
    except ValueError:
        logs.get_logger().error("handler_failed", exc_info=True)
    (line,) = lines(out.getvalue())
    assert line["exception"]["type"] == "ValueError" and SECRET not in out.getvalue()


def test_standard_library_records_are_json_lines_of_the_same_renderer() -> None:
    out = configured()
    try:
        fail_with_row(SECRET)
    except ValueError:
        logging.getLogger("asyncio").error(
            "Task exception was never retrieved\nfuture: <Task exception=%r>",
            SECRET,
            exc_info=True,
        )
    logging.getLogger("azure.servicebus").warning("Connection to the broker was lost")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("an old call", DeprecationWarning, stacklevel=1)
    parsed = lines(out.getvalue())
    assert SECRET not in out.getvalue()
    assert [(p["logger"], p["level"], p["event"]) for p in parsed[:2]] == [
        ("asyncio", "error", "Task exception was never retrieved"),
        ("azure.servicebus", "warning", "Connection to the broker was lost"),
    ]
    assert parsed[0]["exception"]["type"] == "ValueError"
    assert parsed[2]["logger"] == "py.warnings" and "an old call" in parsed[2]["event"]
    assert all("timestamp" in p for p in parsed)


def test_the_azure_sdks_request_chatter_at_info_is_not_logged() -> None:
    out = configured("debug")
    logging.getLogger("azure.core.pipeline.policies.http_logging_policy").info("Request URL")
    logging.getLogger("urllib3.connectionpool").info("Starting new HTTPS connection")
    logging.getLogger("msal.application").info("Token acquired")
    logging.getLogger("export_worker.other").debug("kept")
    assert [p["event"] for p in lines(out.getvalue())] == ["kept"]


def test_the_log_level_setting_applies_unless_the_flag_names_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXPORT_WORKER_LOG_LEVEL", "ERROR")
    out = configured(level=None)
    logs.get_logger().warning("dropped")
    logs.get_logger().error("kept")
    assert [p["event"] for p in lines(out.getvalue())] == ["kept"]
    out = configured(level="warning")
    logs.get_logger().warning("kept_by_flag")
    assert [p["event"] for p in lines(out.getvalue())] == ["kept_by_flag"]


def test_settings_the_caller_has_read_give_the_level_and_are_not_read_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXPORT_WORKER_LOG_LEVEL", "ERROR")  # what reading them again would say
    read = Settings(env_file=None, log_level="warning")
    out = io.StringIO()
    logs.configure(stream=out, pretty=False, settings=read)
    logs.get_logger().info("dropped")
    logs.get_logger().warning("kept")
    assert [p["event"] for p in lines(out.getvalue())] == ["kept"]


def test_a_field_named_for_a_secret_is_redacted_and_every_other_field_kept() -> None:
    out = configured()
    secrets = {
        "connection_string": "Endpoint=sb://x/;SharedAccessKey=abc",
        "account_key": "k",
        "client_secret": "s",
        "db_password": "p",
        "sas_token": "t",
        "Credential": "c",
    }
    logs.get_logger(conversation_id="c1").info("token_refreshed", rows=3, **secrets)
    (line,) = lines(out.getvalue())
    assert {name: line[name] for name in secrets} == dict.fromkeys(secrets, "[redacted]")
    assert (line["event"], line["conversation_id"], line["rows"]) == ("token_refreshed", "c1", 3)
    assert all(value not in out.getvalue() for value in secrets.values() if len(value) > 1)


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_an_exception_given_as_a_sys_exc_info_tuple_is_rendered() -> None:
    out = configured()
    exc = raised(ValueError(SECRET))
    logs.get_logger().error("handler_failed", exc_info=(ValueError, exc, exc.__traceback__))
    (line,) = lines(out.getvalue())
    assert line["exception"]["type"] == "ValueError" and SECRET not in out.getvalue()


def test_a_stack_info_request_adds_no_stack_to_the_line() -> None:
    out = configured()
    logs.get_logger().info("looked", stack_info=True)
    (line,) = lines(out.getvalue())
    assert set(line) == {"event", "level", "timestamp"}


def test_an_exception_never_raised_has_no_location_and_no_frames() -> None:
    assert logs.describe_exception(ValueError(SECRET)) == {
        "type": "ValueError",
        "at": "",
        "frames": [],
    }


def test_a_frame_outside_every_import_root_keeps_its_whole_path() -> None:
    code = compile("raise ValueError('x')", "/nowhere/generated.py", "exec")
    exc = raised_by(lambda: exec(code))
    assert logs.describe_exception(exc)["at"] == "/nowhere/generated.py:1"


def raised_by(call: Any) -> BaseException:
    try:
        call()
    except BaseException as caught:
        return caught
    raise AssertionError("nothing was raised")


def test_an_exception_keeps_only_its_innermost_frames() -> None:
    def deeper(n: int) -> None:
        if n == 0:
            raise ValueError(SECRET)
        deeper(n - 1)

    frames = logs.describe_exception(raised_by(lambda: deeper(logs.MAX_FRAMES + 10)))["frames"]
    assert len(frames) == logs.MAX_FRAMES == 30
    assert {frame["function"] for frame in frames} == {"deeper"}  # the callers are cut


def test_causes_are_followed_through_the_chain_at_most_five_deep() -> None:
    def chained(depth: int) -> BaseException:
        exc = raised(KeyError("k0"))
        for _ in range(1, depth):
            cause, exc = exc, raised(OSError(SECRET))
            exc.__cause__ = cause  # as `raise ... from cause` sets it
        return exc

    assert [c["type"] for c in logs.describe_exception(chained(3))["causes"]] == [
        "OSError",
        "KeyError",
    ]
    assert len(logs.describe_exception(chained(9))["causes"]) == logs.MAX_CAUSES == 5


def test_a_cause_that_loops_back_is_listed_once() -> None:
    first, second, third = raised(ValueError("a")), raised(KeyError("b")), raised(OSError("c"))
    first.__cause__, second.__cause__, third.__cause__ = second, third, second
    causes = logs.describe_exception(first)["causes"]
    assert [c["type"] for c in causes] == ["KeyError", "OSError"]


def test_an_exceptions_type_is_named_with_its_module_unless_builtin_or_main() -> None:
    def of_module(module: str) -> str:
        kind = type("Boom", (Exception,), {"__module__": module})
        return str(logs.describe_exception(kind())["type"])

    assert [of_module(m) for m in ("handlers.rows", "__main__", "builtins")] == [
        "handlers.rows.Boom",
        "Boom",
        "Boom",
    ]


def test_a_frames_file_is_named_from_the_longest_import_root_it_lies_under(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "path", ["", "/srv", "/srv/app/lib", "/srv/app"])
    code = compile("raise ValueError('x')", "/srv/app/lib/pkg/mod.py", "exec")
    assert logs.describe_exception(raised_by(lambda: exec(code)))["at"] == "pkg/mod.py:1"


def test_a_foreign_record_keeps_at_most_its_first_500_characters() -> None:
    out = configured()
    logging.getLogger("azure.servicebus").warning("x" * 600)
    (line,) = lines(out.getvalue())
    assert line["event"] == "x" * logs.MAX_FOREIGN_MESSAGE and logs.MAX_FOREIGN_MESSAGE == 500


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_pretty_lines_and_anything_else_json_lines() -> None:
    out, terminal = io.StringIO(), Terminal()
    logs.configure(level="info", stream=out)
    logs.get_logger().info("plain")
    logs.configure(level="info", stream=terminal)
    logs.get_logger().info("pretty")
    (line,) = lines(out.getvalue())
    assert line["event"] == "plain"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", line["timestamp"])  # UTC
    assert "pretty" in terminal.getvalue() and not lines(terminal.getvalue())


def test_a_logger_made_before_logging_is_configured_again_follows_the_new_stream() -> None:
    logger = logs.get_logger()
    first = configured()
    logger.info("one")
    second = configured()
    logger.info("two")
    assert [p["event"] for p in lines(first.getvalue())] == ["one"]
    assert [p["event"] for p in lines(second.getvalue())] == ["two"]


def test_pretty_output_shows_the_exception_as_type_location_frames_and_causes() -> None:
    out = io.StringIO()
    logs.configure(level="info", stream=out, pretty=True)
    try:
        fail_with_row(SECRET)
    except ValueError as exc:
        logs.get_logger().error("handler_failed", exc_info=exc)
    text = out.getvalue()
    assert SECRET not in text and not lines(text)
    assert re.search(r"\nValueError at (\S+/)?test_logs\.py:\d+\n", text)
    assert re.search(r"\n  (\S+/)?test_logs\.py:\d+ in fail_with_row\n", text)
    assert re.search(r"\n  caused by KeyError at (\S+/)?test_logs\.py:\d+\n", text)


def test_configuring_again_replaces_the_handler_so_a_record_is_written_once() -> None:
    configured()
    out = configured()
    logging.getLogger("azure.servicebus").warning("once")
    assert [p["event"] for p in lines(out.getvalue())] == ["once"]
    assert sum(isinstance(h, logs._RoutedHandler) for h in logging.getLogger().handlers) == 1


# -- the planted secret, through the real CLI and runtime -----------------------------------
class RejectingUpload:
    """An upload that fails on commit quoting what it was given: a bug that leaks rows."""

    def __init__(self, inner: BlobUpload) -> None:
        self.inner = inner
        self.data = b""

    async def write(self, chunk: bytes) -> None:
        self.data += chunk

    async def commit(self) -> None:
        try:
            raise KeyError(self.data.decode())
        except KeyError as exc:
            raise ValueError(f"cannot store {self.data.decode()!r}") from exc

    async def abort(self) -> None:
        await self.inner.abort()


class RejectingBlobs:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def upload(self, path: str, info: BlobInfo) -> BlobUpload:
        return RejectingUpload(await self.inner.upload(path, info))


def test_a_row_value_in_a_failing_handlers_exception_reaches_no_log_line_nor_dead_letter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = json.loads((FIXTURES / "headline.fixture.json").read_text())
    pages = [a for a in fixture["artifacts"].values() if "items" in a["result"]]
    pages[-1]["result"]["items"][0]["unit"] = SECRET
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(fixture))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXPORT_WORKER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EXPORT_WORKER_BACKEND", "local")
    monkeypatch.setenv("EXPORT_WORKER_BACKOFF_BASE_SECONDS", "0")
    opened = serving.open_backend

    async def rejecting_backend(settings: Any, **options: Any) -> Backend:
        backend = await opened(settings, **options)
        backend.blobs = RejectingBlobs(backend.blobs)
        return backend

    monkeypatch.setattr(serving, "open_backend", rejecting_backend)  # what `run` opens

    def export_worker(*args: str) -> None:
        with pytest.raises(SystemExit) as exited:
            cli.main(list(args))
        assert exited.value.code == 0

    export_worker("dev", "seed", str(planted))
    export_worker("run", "--drain")
    export_worker("dlq", "list", "--json")
    captured = capsys.readouterr()

    assert SECRET not in captured.out and SECRET not in captured.err
    events = lines(captured.err)
    (failed,) = [e for e in events if e["event"] == "handler_failed"]
    assert failed["exception"]["type"] == "ValueError"
    assert failed["exception"]["frames"][-1]["function"] == "commit"
    assert [c["type"] for c in failed["exception"]["causes"]] == ["KeyError"]
    (dead,) = json.loads(captured.out)
    assert dead["reason"] == "handler_error" and dead["description"].startswith("ValueError")


def test_a_fatal_start_up_error_of_run_is_a_json_line_and_one_stderr_line(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
    env.update(EXPORT_WORKER_BACKEND="local", EXPORT_WORKER_HOME=str(blocker / "home"))
    script = Path(sys.executable).with_name("export-worker")
    proc = subprocess.run(
        [str(script), "run", "--drain"], cwd=tmp_path, env=env, capture_output=True, timeout=120
    )
    assert proc.returncode == 1
    err = proc.stderr.decode().splitlines()
    assert err[-1].startswith("export-worker: ")
    (failed,) = [json.loads(line) for line in err[:-1]]
    assert failed["event"] == "worker_failed" and failed["level"] == "critical"
    assert failed["exception"]["type"] in ("FileExistsError", "NotADirectoryError")


@pytest.mark.parametrize(("flag", "code"), [("verbose", 2), ("WARNING", 0), ("debug", 0)])
def test_the_log_level_flag_takes_a_known_level_in_any_case(
    flag: str, code: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An unknown level was taken silently (logs at the default), where the setting refuses it.
    from click.testing import CliRunner

    from worker.cli import cli

    monkeypatch.setenv("EXPORT_WORKER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("EXPORT_WORKER_BACKEND", "local")
    result = CliRunner().invoke(cli, ["--log-level", flag, "status", "--json"])
    assert result.exit_code == code, result.output


@pytest.mark.parametrize("level", ["debug", "info", "warning", "error", "critical"])
def test_every_level_configuration_md_names_is_a_log_level_setting_in_any_case(
    level: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EXPORT_WORKER_LOG_LEVEL", level.upper())
    assert Settings().log_level == level
