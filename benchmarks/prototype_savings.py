"""What the prototyped fixes save on the real process, and that the export bytes stay the same.

For each case, a fresh home is seeded per configuration and drained by the real CLI with
the named patches of `prototypes.py` applied (`python prototypes.py --patch … -- run
--drain`, under the same small launcher as run_all.py, default settings). "today" runs the
same wrapper with no patch. Every configuration must publish the same export (sha256) as
"today", or the script fails.

    .venv/bin/python benchmarks/prototype_savings.py                     # every case
    .venv/bin/python benchmarks/prototype_savings.py --cases a,e --quick
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import PYTHON, Bench, Failed, Usage, _published, worker_env, workload

BENCH = Path(__file__).resolve().parent
ROWS = "parse,clean,digest,seen,spool,csv,page"
RUNTIME = "session,drain"
CONFIGS: dict[str, list[str]] = {
    "a": ["", ROWS, "seen", "spool", "digest", "csv", "clean", "parse,page"],
    "b": ["", ROWS, "seen"],
    "d": ["", "session", RUNTIME, ROWS, f"{ROWS},{RUNTIME}"],
    "e": ["", "drain"],
}


def run_config(bench: Bench, case: str, patches: str, sizes: dict[str, int]) -> tuple[Usage, Any]:
    """Seed a home for CASE, drain it with PATCHES applied; usage and the exports' sha256s."""
    home = bench.home(f"{case}-{patches.replace(',', '+') or 'today'}")
    if case in ("a", "b"):
        pages = sizes["pages_a"] if case == "a" else sizes["pages_b"]
        rows = sizes["rows"] // pages
        workload("seed-rows", home, "--pages", str(pages), "--rows", str(rows))
    elif case == "d":
        workload("seed-headline", home, "--turns", str(sizes["turns"]))
    else:
        workload("seed-empty", home)
    command = [PYTHON, str(BENCH / "prototypes.py"), "--patch", patches, "--", "run", "--drain"]
    usage, _ = bench.launch(home.name, command, home, worker_env(home))
    expected = {"a": 1, "b": 1, "d": sizes["turns"], "e": 0}[case]
    exports = _published(workload("outcome", home), expected)
    shutil.rmtree(home)
    return usage, sorted(e["export"]["sha256"] for e in exports)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=lambda s: s.split(","), default=list(CONFIGS))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    sizes = {"rows": 1_000_000, "pages_a": 10, "pages_b": 100, "turns": 100}
    if args.quick:
        sizes = {"rows": 20_000, "pages_a": 10, "pages_b": 100, "turns": 5}
    scratch = Path(tempfile.mkdtemp(prefix="export-savings-"))
    (scratch / "logs").mkdir()
    bench = Bench(scratch, scratch / "logs", "strace")
    print(f"# prototype savings, load average at start {os.getloadavg()[0]:.2f}")
    print(
        "| case | patches | wall s | CPU s | peak RSS MB | wall saved | CPU saved | same sha256 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    try:
        for case in args.cases:
            today: tuple[Usage, Any] | None = None
            for patches in CONFIGS[case]:
                usage, shas = run_config(bench, case, patches, sizes)
                today = today or (usage, shas)
                same = shas == today[1]
                saved = f"{(today[0].wall - usage.wall) / today[0].wall:.0%}"
                cpu = f"{(today[0].cpu - usage.cpu) / today[0].cpu:.0%}"
                print(
                    f"| {case} | {patches or 'today'} | {usage.wall:.2f} | {usage.cpu:.2f} | "
                    f"{usage.rss_mb:.0f} | {saved} | {cpu} | {same} |",
                    flush=True,
                )
                if not same:
                    raise Failed(f"{case} with {patches}: the export bytes changed")
    except Failed as exc:
        print(f"prototype_savings: {exc} (logs in {scratch / 'logs'})", file=sys.stderr)
        return 1
    shutil.rmtree(scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
