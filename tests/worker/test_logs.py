"""Logs never leak: exceptions as type, location and frames; every logger as JSON lines."""

from __future__ import annotations

import io
import json
import logging
import os
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
