"""Smoke test: every benchmark script runs at its `--quick` size and prints its table.

Timing and memory figures are never asserted here (they live in benchmarks/results.md);
this only keeps the scripts working as the code they drive changes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.benchmarks.script_runs import run_script

CASES = {
    "export_memory.py": "| sweep | format | pages | rows/page | rows |",
    "export_throughput.py": "| session idle s | processes x concurrency | turns |",
    "core_decision.py": "| case | messages | µs per call | calls/s |",
}


@pytest.mark.parametrize("script", sorted(CASES))
def test_benchmark_runs_quick_and_prints_its_table(script: str, tmp_path: Path) -> None:
    proc = run_script(script, "--quick", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(line.startswith(CASES[script]) for line in lines), proc.stdout[-2000:]
    header_at = next(i for i, line in enumerate(lines) if line.startswith(CASES[script]))
    rows = [line for line in lines[header_at + 2 :] if line.startswith("| ")]
    assert rows, f"{script} printed a header but no measured row:\n{proc.stdout[-2000:]}"


def test_run_all_measures_every_case_at_quick_size_and_writes_its_report(tmp_path: Path) -> None:
    report = tmp_path / "results.md"
    proc = run_script("run_all.py", "--quick", "--output", str(report), cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = report.read_text(encoding="utf-8")
    header = "| case | what | this project | the limit, same run | ratio | goal | holds |"
    assert header in text, text[-2000:]
    cases = {line.split(" | ")[0] for line in text.splitlines() if line.startswith("| ")}
    # Every case of the issue has a measured row (or the Service Bus one says why not).
    assert {"| a", "| b", "| c", "| d", "| e", "| f", "| g", "| w", "| az"} <= cases, text[-2000:]
    # Case w: the wide xlsx at two sizes, the second twice the first.
    assert "`run --drain`, xlsx, 200 groups × 3 rows, 601 columns" in text, text[-2000:]
    # Case d's figures come from adjacent groups (one at this size), each group's ratio listed.
    assert "headline turns (the median group of 1)" in text, text[-2000:]
    assert "ratio of each group in order: " in text, text[-2000:]
    # Beside it, the decision core's warm work on the same turn, added to the bare turn.
    assert "the decision core's pure work on the same turn" in text, text[-2000:]
    # Its scratch homes are gone, and the mark of their deletion is in its temporary folder.
    assert [p for p in tmp_path.glob("export-bench-*") if p.is_dir()] == []
    assert (tmp_path / "export-bench-deleted").exists()


def test_the_decision_core_reports_the_headline_turn_as_one_json_line(tmp_path: Path) -> None:
    proc = run_script("core_decision.py", "--headline-json", "--quick", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert figures["number"] == 20 and figures["repeats"] == 2
    assert 0 < figures["ms"] < 1000


def test_the_loop_probe_drains_its_turns_and_accounts_for_the_loop(tmp_path: Path) -> None:
    proc = run_script("loop_probe.py", "--turns", "4", cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (figures["turns"], figures["published"], figures["dead_lettered"]) == (4, 4, 0)
    # The loop thread's CPU and its waits in select are parts of the wall, not more than it.
    wall = figures["wall_ms_a_turn"]
    assert 0 < figures["loop_thread_cpu_ms_a_turn"] <= figures["process_cpu_ms_a_turn"]
    assert figures["loop_thread_cpu_ms_a_turn"] + figures["loop_blocked_in_select_ms_a_turn"] <= (
        wall * 1.05
    )
    assert figures["checkpoints_a_turn"] == len(figures["checkpoint_ms"]) / 4


def test_the_ab_runner_drains_each_tree_in_turn_and_prints_its_medians(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    proc = run_script(
        "ab_turns.py",
        "--tree",
        f"here={root}",
        "--tree",
        "committed=@HEAD",
        "--rounds",
        "2",
        "--turns",
        "2",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {
        line.split(" | ")[0][2:]: line.split(" | ")
        for line in proc.stdout.splitlines()
        if line.startswith("| ") and not line.startswith("| tree")
    }
    assert set(rows) == {"here", "committed"}, proc.stdout
    for cells in rows.values():
        assert float(cells[1]) > 0 and float(cells[2]) > 0
        assert len(cells[3].strip(" |").split(", ")) == 2  # one figure a round


def test_the_ab_runner_refuses_a_tree_it_cannot_find(tmp_path: Path) -> None:
    proc = run_script(
        "ab_turns.py", "--tree", f"a={tmp_path}", "--tree", "b=@HEAD", cwd=tmp_path, timeout=60
    )
    assert proc.returncode != 0
    assert "has no worker, handlers, schemas" in proc.stderr


def test_the_ab_runner_measures_the_code_of_the_tree_it_is_given(tmp_path: Path) -> None:
    # A tree whose CLI exits at once: were the installed package run instead, it would pass.
    root = Path(__file__).resolve().parents[2]
    broken = tmp_path / "broken"
    for package in ("worker", "handlers", "schemas"):
        shutil.copytree(
            root / package, broken / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    cli = broken / "worker" / "cli.py"
    cli.write_text(
        cli.read_text(encoding="utf-8") + "\n\ndef main() -> None:\n    raise SystemExit(3)\n"
    )
    proc = run_script(
        "ab_turns.py",
        "--tree",
        f"broken={broken}",
        "--tree",
        "b=@HEAD",
        "--rounds",
        "1",
        "--turns",
        "1",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "broken: run --drain exited 3" in proc.stderr, proc.stderr[-2000:]
