"""Case d's work on two or more source trees, in turn: which code drains headline turns faster.

The host's speed moves from minute to minute by more than most changes to the code, so a
change is measured against the code before it in interleaved runs: each round runs every
tree once (in the order A B, then B A), each on its own copy of one seeded home, and the
median of the rounds is compared. Nothing is deleted until the last round has run: on a
filesystem without a journal, files made soon after many deletions cost several times more
(PROFILE.md, twenty-second round). The deletion at the end leaves the mark a full run of
`run_all.py` reads, to warn when it begins too soon after it.

    .venv/bin/python benchmarks/ab_turns.py --tree new=. --tree old=@HEAD~1 --rounds 12

A tree is `NAME=PATH` (a folder holding `worker/`, `handlers/` and `schemas/`, put first on
the measured process's PYTHONPATH) or `NAME=@REV` (those folders at a git revision of this
repository); each is byte-compiled first, as an installed wheel is. Each run is
`export-worker run --drain` under `launch.py` (wall and CPU from wait4, through run_all's
`Bench`) on a copy of a home seeded with TURNS headline turns, beside the same tree on an
empty queue; a run's figure is per turn, net of that empty run. Every run must publish
every turn.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from run_all import (
    PACKAGES,
    ROOT,
    Bench,
    Failed,
    _published,
    compile_bytecode,
    delete_scratch,
    worker_env,
    workload,
)


@dataclass
class Tree:
    """A named source tree and the per-turn figures of its runs."""

    name: str
    path: Path
    wall_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)


def tree_at(spec: str, scratch: Path) -> Tree:
    """`NAME=PATH` or `NAME=@REV` as a Tree whose path holds the three packages, each
    byte-compiled: with PYTHONDONTWRITEBYTECODE set, a tree without its bytecode would
    compile every module from source on each start, and a tree with it would win by that."""
    name, separator, where = spec.partition("=")
    if not separator or not name or not where:
        raise SystemExit(f"--tree {spec!r}: expected NAME=PATH or NAME=@REV")
    if not where.startswith("@"):
        path = Path(where).resolve()
        missing = [p for p in PACKAGES if not (path / p).is_dir()]
        if missing:
            raise SystemExit(f"--tree {spec!r}: {path} has no {', '.join(missing)}")
    else:
        path = scratch / f"tree-{name}"
        path.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", where[1:], *PACKAGES],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            error = archive.stderr.decode(errors="replace").strip()
            raise SystemExit(f"--tree {spec!r}: {error}")
        subprocess.run(["tar", "-x", "-C", str(path)], input=archive.stdout, check=True)
    compile_bytecode(path)
    return Tree(name, path)


def drain(bench: Bench, tree: Tree, home: Path, what: str) -> tuple[float, float]:
    """`export-worker run --drain` of `tree`'s code on `home` (its packages first on the
    path): its wall and CPU seconds."""
    path = os.pathsep.join(filter(None, [str(tree.path), os.environ.get("PYTHONPATH")]))
    usage = bench.worker(f"{tree.name}: {what}", home, {**worker_env(home), "PYTHONPATH": path})
    return usage.wall, usage.cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH or NAME=@REV")
    parser.add_argument("--rounds", type=int, default=12, help="runs of each tree")
    parser.add_argument("--turns", type=int, default=100, help="headline turns in the home")
    args = parser.parse_args(argv)
    if len(args.tree) < 2 or args.rounds < 1 or args.turns < 1:
        parser.error("two trees at least, one round and one turn at least")
    scratch = Path(tempfile.mkdtemp(prefix="ab-turns-"))
    try:
        trees = [tree_at(spec, scratch) for spec in args.tree]
        if len({t.name for t in trees}) != len(trees):
            parser.error("each tree needs a name of its own")
        logs = scratch / "logs"
        logs.mkdir()
        bench = Bench(scratch, logs, "audit")
        seeded = scratch / "seeded"
        workload("seed-headline", seeded, "--turns", str(args.turns))
        for round_ in range(args.rounds):
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                home = scratch / f"r{round_:03d}-{tree.name}"
                shutil.copytree(seeded, home, symlinks=True)  # copy2: xattrs kept
                empty = bench.home(f"{tree.name}-empty")
                wall, cpu = drain(bench, tree, home, "run --drain")
                idle_wall, idle_cpu = drain(bench, tree, empty, "run --drain, empty queue")
                _published(workload("outcome", home), args.turns)
                tree.wall_ms.append((wall - idle_wall) * 1000 / args.turns)
                tree.cpu_ms.append((cpu - idle_cpu) * 1000 / args.turns)
        print(f"# {args.turns} headline turns, {args.rounds} interleaved rounds, ms a turn net")
        print("| tree | wall (median) | CPU (median) | wall of each round |")
        print("|---|---|---|---|")
        for tree in trees:
            rounds = ", ".join(f"{ms:.2f}" for ms in tree.wall_ms)
            print(
                f"| {tree.name} | {statistics.median(tree.wall_ms):.2f} "
                f"| {statistics.median(tree.cpu_ms):.2f} | {rounds} |"
            )
    except Failed as exc:
        raise SystemExit(str(exc)) from None
    finally:
        delete_scratch(scratch)  # and leaves the mark a full run reads (run_all.py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
