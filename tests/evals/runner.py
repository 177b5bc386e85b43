"""Run the eval cases through the real CLI on a temporary home and score them.

`export-worker dev seed` for each case, one `export-worker run --drain`, then
`export-worker turns list --conversation C --json` for each case's conversation. A case is
correct when every labelled turn's record matches its labels on every labelled field.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CASES = Path(__file__).resolve().parent / "cases"
FIELDS = (
    "decision",
    "format",
    "carried",
    "row_source",
    "selection_rule",
    "row_count",
    "source_artifacts",
    "columns",
)


@dataclass
class Outcome:
    """One case's score: the mismatches found, none when correct."""

    name: str
    rule: str
    mismatches: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return not self.mismatches


def executable() -> list[str]:
    """The console script beside this interpreter, else `python -m worker.cli`."""
    script = Path(sys.executable).with_name("export-worker")
    return [str(script)] if script.exists() else [sys.executable, "-m", "worker.cli"]


class Cli:
    """`export-worker` commands on one local home: fresh processes, or in this process.

    In process, each command runs through the same click group the console script runs
    (`worker.cli.cli`), with the same environment; only the process start-up is saved.
    """

    def __init__(self, home: Path, argv0: Sequence[str] | None) -> None:
        self.home = home
        self.argv0 = None if argv0 is None else list(argv0)
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORT_WORKER_")}
        env.update(EXPORT_WORKER_HOME=str(home), EXPORT_WORKER_BACKEND="local")
        self.env = env

    def run(self, *args: str, timeout: float = 120) -> bytes:
        """The command's stdout; RuntimeError when it fails."""
        if self.argv0 is None:
            return self._in_process(args)
        proc = subprocess.run(
            [*self.argv0, *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip()[-500:]
            raise RuntimeError(f"export-worker {' '.join(args)} exited {proc.returncode}: {tail}")
        return proc.stdout

    def _in_process(self, args: Sequence[str]) -> bytes:
        from click.testing import CliRunner

        from worker.cli import cli

        overrides = {k: None for k in os.environ if k.startswith("EXPORT_WORKER_")}
        overrides.update(EXPORT_WORKER_HOME=str(self.home), EXPORT_WORKER_BACKEND="local")
        cwd = os.getcwd()
        os.chdir(self.home)
        try:
            result = CliRunner(env=overrides).invoke(cli, list(args), catch_exceptions=True)
        finally:
            os.chdir(cwd)
        if result.exit_code != 0:
            raise RuntimeError(
                f"export-worker {' '.join(args)} exited {result.exit_code}: "
                f"{result.exception!r} {result.stderr[-500:]}"
            )
        return result.stdout_bytes


def actual(record: dict[str, Any]) -> dict[str, Any]:
    """The labelled fields as a turn record holds them."""
    export = record.get("export") or {}
    selection = export.get("selection") or {}
    return {
        "decision": record.get("decision"),
        "format": record.get("format"),
        "carried": record.get("carried"),
        "row_source": export.get("row_source"),
        "selection_rule": selection.get("rule"),
        "row_count": export.get("row_count"),
        "source_artifacts": sorted(export["source_artifacts"]) if export else None,
        "columns": export.get("columns"),
    }


def score(expected: dict[str, Any], records: list[dict[str, Any]]) -> Outcome:
    """Compare one case's labels with the turn records of its conversation."""
    outcome = Outcome(expected["case"], expected["rule"])
    by_turn = {r["turn_id"]: r for r in records}
    for turn_id in by_turn.keys() - expected["turns"].keys():
        outcome.mismatches.append(f"{turn_id}: a record no event asked for")
    for turn_id, labels in expected["turns"].items():
        record = by_turn.get(turn_id)
        if record is None:
            outcome.mismatches.append(f"{turn_id}: no turn record")
            continue
        got = actual(record)
        for name in FIELDS:
            if name in labels and got[name] != labels[name]:
                outcome.mismatches.append(
                    f"{turn_id}: {name} is {got[name]!r}, labelled {labels[name]!r}"
                )
    return outcome


def run(
    cases_dir: Path = CASES,
    jobs: int = 3,
    argv0: Sequence[str] | None = None,
    in_process: bool = False,
) -> list[Outcome]:
    """Seed every case on one fresh home, drain once, and score each conversation."""
    expected = [
        json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(cases_dir.glob("*.expected.json"))
    ]
    home = Path(tempfile.mkdtemp(prefix="export-worker-evals-"))
    try:
        cli = Cli(home, None if in_process else argv0 or executable())
        # In process, commands run one at a time: they share this interpreter's state.
        workers = 1 if in_process else max(1, jobs)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            fixtures = [str((cases_dir / e["fixture"]).resolve()) for e in expected]
            list(pool.map(lambda f: cli.run("dev", "seed", f), fixtures))
            cli.run("run", "--drain", timeout=1800)
            listings = list(
                pool.map(
                    lambda e: cli.run(
                        "turns", "list", "--conversation", e["conversation_id"], "--json"
                    ),
                    expected,
                )
            )
        return [score(e, json.loads(out)) for e, out in zip(expected, listings, strict=True)]
    finally:
        shutil.rmtree(home, ignore_errors=True)


def report(outcomes: Sequence[Outcome], verbose: bool = False) -> list[str]:
    """Accuracy per rule bucket and overall, then the mismatches of every miss."""
    lines = []
    rules = sorted({o.rule for o in outcomes})
    width = max([len(r) for r in rules] + [len("overall")])
    for rule in rules:
        mine = [o for o in outcomes if o.rule == rule]
        right = sum(o.correct for o in mine)
        lines.append(f"{rule:<{width}}  {right:>3}/{len(mine):<3}  {100 * right / len(mine):5.1f}%")
    right = sum(o.correct for o in outcomes)
    total = len(outcomes)
    lines.append(
        f"{'overall':<{width}}  {right:>3}/{total:<3}  {100 * right / max(total, 1):5.1f}%"
    )
    for o in outcomes:
        if not o.correct:
            lines.append(f"MISS {o.name} [{o.rule}]")
            lines.extend(f"     {m}" for m in o.mismatches[: None if verbose else 3])
    return lines
