"""The soak benchmark (benchmarks/soak.py): it drives the real worker over many turns and
samples it from /proc. Figures are never asserted here, only that it serves every turn,
watches the process while it does, and refuses an outcome that is wrong."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmarks.processes import assert_stopped_and_waited_for, children_started
from tests.benchmarks.script_runs import benchmark_module, run_script


def soak() -> ModuleType:
    return benchmark_module("soak")


def test_the_soak_serves_every_turn_and_samples_the_worker_while_it_does(tmp_path: Path) -> None:
    report = tmp_path / "soak.md"
    proc = run_script("soak.py", "--quick", "--output", str(report), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(runs) == {"local"}  # --quick alone soaks the local backend
    figures = runs["local"]
    assert (figures["turns"], figures["published"]) == (200, 200)
    samples = figures["samples"]
    assert len(samples) >= 2
    counts = [s["published"] for s in samples]
    assert counts == sorted(counts) and counts[-1] == 200
    # A sample is a look at the worker itself: resident, with its threads and its stores open.
    assert all(s["rss_kb"] > 0 and s["threads"] >= 1 and s["fds"] >= 3 for s in samples)
    text = report.read_text(encoding="utf-8")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f" at commit {commit}" in text.splitlines()[2]  # the code the figures are of
    assert "| turns published | s | VmRSS MiB | threads | open fds |" in text
    assert "200 turn records `published`, each from its 2 winning artifacts" in text


def test_the_growth_is_the_least_squares_slope_per_thousand_turns() -> None:
    module = soak()
    assert module.slope([(0, 100), (500, 350), (1000, 600)], per=1000) == pytest.approx(500)
    assert module.slope([(0, 5), (10, 5)], per=1000) == 0
    assert module.slope([(7, 1), (7, 9)], per=1000) is None  # no spread of turns
    assert module.slope([], per=1000) is None


def test_the_growth_reads_only_the_second_half_of_the_turns() -> None:
    module = soak()
    # Warm-up in the first half (a steep climb), flat afterwards: no growth is reported.
    samples = tuple(
        module.Sample(float(k), published, rss, 5, 20)
        for k, (published, rss) in enumerate(
            [(0, 6_000), (100, 30_000), (400, 34_000), (500, 35_000), (700, 35_000), (999, 35_000)]
        )
    )
    stopping = module.Sample(6.0, 1000, 20_000, 1, 3, stopping=True)  # shutting down
    run = module.Soak("local", 1000, 10.0, (*samples, stopping), ())
    assert [s.published for s in run.second_half()] == [500, 700, 999]
    assert run.growth_kb_per_1000() == 0
    # Each tenth's first sample at or past it, the first working sample ahead of them.
    assert [s.published for s in run.at_tenths()] == [100, 400, 500, 700, 999]


def test_a_turn_not_published_from_its_winning_artifacts_fails_the_soak() -> None:
    module = soak()  # the local soak checks its outcome as case az does, without the services
    manifest = {"turns": [{"turn_id": "t1", "blobs": ["a", "b"]}]}

    def outcome(sources: list[str], decision: str = "published") -> dict[str, object]:
        export = {"turn_id": "t1", "decision": decision, "export": {"source_artifacts": sources}}
        return {"exports": [export], "dead_letters": [], "unexported_decisions": []}

    assert module.check_outcome(outcome(["b", "a"]), manifest, 1, None, module.Failed)
    with pytest.raises(module.Failed, match="t1 read other artifacts than its winning two"):
        module.check_outcome(outcome(["a", "c"]), manifest, 1, None, module.Failed)
    with pytest.raises(module.Failed, match="1 turns published, expected 2"):
        module.check_outcome(outcome(["a", "b"]), manifest, 2, None, module.Failed)


def test_an_azure_soak_that_cannot_run_says_why_and_measures_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPORT_WORKER_SKIP_EMULATED", "1")
    proc = run_script("soak.py", "--backend", "azure", "--turns", "5", cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert runs == {"azure": {"skipped": "EXPORT_WORKER_SKIP_EMULATED=1"}}
    assert "## azure backend: not run: EXPORT_WORKER_SKIP_EMULATED=1" in proc.stdout


def test_a_stop_that_comes_as_the_soaks_worker_starts_stops_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SIGTERM inside `Popen`, after the worker had started, unwound out of `Watched`
    # before anything held the worker: it ran on alone (`run` on Azure: for ever).
    module, stopping = soak(), benchmark_module("stopping")
    worker = tmp_path / "export-worker"
    worker.write_text("#!/bin/sh\nexec sleep 60\n")
    worker.chmod(0o755)
    started = children_started(monkeypatch, stopping_each=True)
    monkeypatch.setattr(module, "WORKER", str(worker))
    watch = module.Watch(turns=1, interval=0.05, trace=False, scratch=tmp_path)
    code = stopping.stoppable(lambda: module.watched_run(tmp_path, dict(os.environ), watch)[0])
    assert code == 128 + signal.SIGTERM
    assert_stopped_and_waited_for(started)
