"""Drives the real `export-worker` executable as a subprocess on a temporary home."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def executable() -> list[str]:
    """The installed console script next to this interpreter, else `python -m worker.cli`."""
    script = Path(sys.executable).with_name("export-worker")
    return [str(script)] if script.exists() else [sys.executable, "-m", "worker.cli"]


@dataclass
class Cli:
    """One worker home; every call is a fresh process, as an operator would run it."""

    home: Path
    extra_env: dict[str, str] | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
        env["EXPORT_WORKER_HOME"] = str(self.home)
        env["EXPORT_WORKER_BACKEND"] = "local"
        env["EXPORT_WORKER_BACKOFF_BASE_SECONDS"] = "0.05"
        env.update(self.extra_env or {})
        return env

    def run(
        self, *args: str, input: bytes | None = None, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            [*executable(), *args],
            cwd=self.home,
            env=self.env(),
            input=input,
            capture_output=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"export-worker {' '.join(args)} exited {proc.returncode}: "
                f"{proc.stderr.decode(errors='replace')[-2000:]}"
            )
        return proc

    def popen(self, *args: str, output: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
        """The command started; its stdout and stderr piped, or both written to `output`."""
        return subprocess.Popen(
            [*executable(), *args],
            cwd=self.home,
            env=self.env(),
            stdout=output or subprocess.PIPE,
            stderr=output or subprocess.PIPE,
        )

    @contextmanager
    def started(
        self, *args: str, output: IO[bytes] | None = None
    ) -> Iterator[subprocess.Popen[bytes]]:
        """`popen` for the block: when it ends, the process is killed if still running (a
        failed assertion must neither leave a worker behind nor wait on one that never
        stops), reaped, and its pipes closed."""
        with self.popen(*args, output=output) as process:
            try:
                yield process
            finally:
                if process.poll() is None:
                    process.kill()

    def json(self, *args: str) -> list[dict[str, Any]]:
        out = self.run(*args, "--json").stdout
        value = json.loads(out)
        assert isinstance(value, list)
        return value

    def dead_letter(self, sequence_number: int | str) -> dict[str, Any]:
        """`dlq show SEQUENCE_NUMBER`, parsed (its one form is a JSON object)."""
        value = json.loads(self.run("dlq", "show", str(sequence_number)).stdout)
        assert isinstance(value, dict)
        return value

    def export_bytes(self, export_id: str) -> bytes:
        target = self.home / f"{export_id}.out"
        self.run("exports", "get", export_id, "-o", str(target))
        return target.read_bytes()


def csv_rows(data: bytes) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a CSV export (BOM and CRLF checked by the caller)."""
    text = data.decode("utf-8-sig")
    records = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    header, body = records[0], records[1:]
    return header, [dict(zip(header, r, strict=True)) for r in body]


def load_fixture(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A public fixture and its expected outcome."""
    fixture = json.loads((FIXTURES / f"{name}.fixture.json").read_text(encoding="utf-8"))
    expected = json.loads((FIXTURES / f"{name}.expected.json").read_text(encoding="utf-8"))
    return fixture, expected
