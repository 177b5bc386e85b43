"""`python -m tests.evals`: score the eval set through the real CLI; exit 0 only at 100%."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .runner import CASES, report, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.evals", description=__doc__)
    parser.add_argument("--cases", type=Path, default=CASES, help="folder of labelled cases")
    parser.add_argument("--jobs", type=int, default=3, help="CLI processes at a time")
    parser.add_argument("--bin", default=None, help="the executable (default: the venv's)")
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the CLI's commands in this process (same click group, no process start-up)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="every mismatch of a miss")
    args = parser.parse_args(argv)
    argv0 = shlex.split(args.bin) if args.bin else None
    outcomes = run(args.cases, args.jobs, argv0, in_process=args.in_process)
    for line in report(outcomes, args.verbose):
        print(line)
    return 0 if outcomes and all(o.correct for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
