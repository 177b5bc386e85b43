"""Issue 11 done: the public fixtures drained by a long-running `export-worker run` with its
operations endpoint on; probes answer, metrics count the recorded turns, `status` shows
the queue empty, and SIGTERM ends it with exit 0. Every wait polls; nothing sleeps blind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from cli_driver import FIXTURES, Cli, executable
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")
POLL_SECONDS = 0.05
DEADLINE_SECONDS = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get(port: int, path: str) -> tuple[int, bytes]:
    """Status and body of a GET; status 0 while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()
    except (urllib.error.URLError, ConnectionError):
        return 0, b""


def poll(probe: Callable[[], T | None], what: str, worker: subprocess.Popen[bytes]) -> T:
    """`probe()` until it gives something; fails at the deadline or if the worker exits."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while True:
        got = probe()
        if got is not None:
            return got
        if worker.poll() is not None:
            raise AssertionError(f"the worker exited {worker.returncode} before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {DEADLINE_SECONDS} s")
        time.sleep(POLL_SECONDS)


def samples(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics by (name, sorted labels)."""
    status, body = get(port, "/metrics")
    assert status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def by_label(found: dict[Any, float], name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: v for (n, labels), v in found.items() if n == name and v}


def test_a_running_worker_drains_the_public_fixtures_and_reports_them(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    cli = Cli(home, extra_env={"EXPORT_WORKER_HTTP_PORT": str(port)})
    expected_turns: dict[str, dict[str, Any]] = {}
    for fixture in sorted(FIXTURES.glob("*.fixture.json")):
        cli.run("dev", "seed", str(fixture))
        expected = fixture.with_name(fixture.name.replace(".fixture.", ".expected."))
        expected_turns.update(json.loads(expected.read_text())["turns"])
    assert len(list(FIXTURES.glob("*.fixture.json"))) == 5
    events = sum(len(json.loads(f.read_text())["events"]) for f in FIXTURES.glob("*.fixture.json"))
    before = json.loads(cli.run("status", "--json").stdout)
    assert before["queue_depth"] == events

    with (tmp_path / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            [*executable(), "run"], cwd=home, env=cli.env(), stdout=log, stderr=log
        )
        try:

            def answered(path: str) -> dict[str, Any] | None:
                status, body = get(port, path)
                return json.loads(body) if status == 200 else None

            assert poll(lambda: answered("/readyz"), "/readyz 200", worker) == {"status": "ready"}
            poll(lambda: answered("/healthz"), "/healthz 200", worker)

            def drained() -> dict[str, Any] | None:
                shown = json.loads(cli.run("status", "--json").stdout)
                return shown if shown["queue_depth"] == 0 else None

            status = poll(drained, "an empty queue in status --json", worker)
            assert status["dead_letter_depth"] == 0 and status["dead_letters_by_reason"] == {}
            assert status["oldest_message_age_seconds"] is None
            assert status["last_export_at"] is not None

            recorded = [
                record
                for cid in sorted({t["conversation_id"] for t in expected_turns.values()})
                for record in cli.json("turns", "list", "--conversation", cid)
            ]
            decisions = Counter(r["decision"] for r in recorded)
            assert decisions == Counter(t["decision"] for t in expected_turns.values())

            # The queue is empty once the last message is completed; the worker counts it
            # an instant later, so poll until every recorded turn is counted.
            def counted() -> dict[Any, float] | None:
                found = samples(port)
                turns = by_label(found, "export_worker_turns_total", "decision")
                return found if sum(turns.values()) >= len(recorded) else None

            found = poll(counted, "every recorded turn in /metrics", worker)
            assert by_label(found, "export_worker_turns_total", "decision") == {
                d: float(n) for d, n in decisions.items()
            }
            durations = by_label(found, "export_worker_turn_duration_seconds_count", "outcome")
            assert durations == {"completed": float(len(recorded))}
            every = (("le", "+Inf"), ("outcome", "completed"))
            assert found[("export_worker_turn_duration_seconds_bucket", every)] == len(recorded)
            assert by_label(found, "export_worker_exports_total", "format") == {
                "csv": float(decisions["published"])
            }
            assert by_label(found, "export_worker_dead_letters_total", "reason") == {}
            assert found[("export_worker_queue_wait_seconds_count", ())] == len(recorded)
            assert found[("export_worker_sessions_held", ())] == 0

            assert get(port, "/healthz")[0] == 200 and get(port, "/readyz")[0] == 200
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=DEADLINE_SECONDS) == 0
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert get(port, "/healthz")[0] == 0  # the endpoint closed with the worker
    lines = [json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines()]
    started = [e for e in lines if e.get("event") == "operations_endpoint_started"]
    assert [e["port"] for e in started] == [port]
