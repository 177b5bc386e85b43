"""Generate the eval set: `python -m tests.evals.generate` rewrites tests/evals/cases/.

Deterministic (one seeded random source, cases in a fixed order), so the committed cases
are exactly what this script writes; a test checks that. Each case is a `dev seed` fixture
(docs/contract/cli.md) plus its labels, written from the contract by the scenario that built it.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import scenarios_carried as carried
from . import scenarios_recency as recency
from . import scenarios_relevance as relevance
from . import scenarios_rows as rows
from . import scenarios_text as wording
from .builders import Case

SEED = 1208
CASES = Path(__file__).resolve().parent / "cases"

Build = Callable[[Case, random.Random], None]


def plan() -> list[tuple[str, str, str, Build]]:
    """(rule bucket, slug, summary, builder) for every case, in order."""
    cases: list[tuple[str, str, str, Build]] = []
    for i, (text, fmt) in enumerate(wording.INTENTS):
        slug = f"intent_{i:02d}"
        cases.append(
            (
                "format_intent",
                slug,
                f"{text!r} requests {fmt}",
                lambda c, r, t=text, f=fmt: wording.format_intent(c, r, t, f),
            )
        )
    for slug, summary, build in wording.table_cases():
        cases.append(("table_parsing", slug, summary, build))
    for i in range(18):
        cases.append(
            (
                "excerpt_tolerant",
                f"excerpt_{i:02d}",
                "a loosely pasted excerpt is an excerpt",
                lambda c, r: rows.excerpt_case(c, r),
            )
        )
    for off in ("value", "time", "column", "flag", "rounded_time", "value"):
        cases.append(
            (
                "composed_table",
                f"composed_{off}",
                f"an excerpt look-alike with a changed {off}",
                lambda c, r, o=off: rows.excerpt_case(c, r, off=o),
            )
        )
    cases.append(("composed_table", "hourly_means", "values in no row", rows.hourly_means))
    cases.append(
        (
            "composed_table",
            "whole_dataset",
            "as many rows as the actions gave",
            rows.whole_small_dataset,
        )
    )
    cases.append(("current_turn", "dominant", "lookups and a 900-row dataset", rows.dominant))
    for sizes in ((3, 4), (3, 12), (2, 10)):
        cases.append(
            (
                "current_turn",
                f"groups_{sizes[0]}_{sizes[1]}",
                f"two groups of {sizes}",
                lambda c, r, s=sizes: rows.combined(c, r, s),
            )
        )
    cases.append(("current_turn", "dedup_pages", "repeats of page 1 dropped", rows.dedup_pages))
    cases.append(("current_turn", "secrets", "secret keys at any depth", rows.secrets))
    cases.append(
        (
            "current_turn",
            "current_over_history",
            "the turn's own rows, no reach-back",
            recency.current_versus_history,
        )
    )
    cases.append(
        (
            "current_turn",
            "failed_current",
            "failed calls: reach back",
            recency.failed_current_reaches_back,
        )
    )
    for i, with_table in enumerate((True, False, True, False)):
        cases.append(
            (
                "derived",
                f"derived_{i}",
                "derived output needs a composed table",
                lambda c, r, w=with_table: rows.derived(c, r, w),
            )
        )
    for slug, summary, build in relevance.relevance_cases():
        cases.append(("relevance", slug, summary, build))
    for slug, summary, build in recency.recency_cases():
        cases.append(("reach_back_recency", slug, summary, build))
    for slug, summary, build in carried.carried_cases():
        cases.append(("carried", slug, summary, build))
    # Added after the first set, so that its cases (and their random draws) stay as they were.
    for i, (text, fmt) in enumerate(wording.MORE_INTENTS):
        cases.append(
            (
                "format_intent",
                f"intent_more_{i:02d}",
                f"{text!r} requests {fmt}",
                lambda c, r, t=text, f=fmt: wording.format_intent(c, r, t, f),
            )
        )
    for i in range(3):
        cases.append(
            ("row_shapes", f"log_query_{i}", "a columnar query answer, row by row", rows.log_query)
        )
    for i in range(4):
        cases.append(
            (
                "excerpt_tolerant",
                f"excerpt_null_cut_{i}",
                "nulls shown as markers and cut texts still make an excerpt",
                rows.null_and_cut_excerpt,
            )
        )
    for i in range(3):
        cases.append(
            (
                "current_turn",
                f"lookup_excerpt_{i}",
                "a table showing a lookup's rows: the dominant group is exported",
                rows.lookup_excerpt,
            )
        )
    return cases


def build_all() -> list[Case]:
    """Every case, built in order from one seeded random source."""
    rng = random.Random(SEED)
    built = []
    for number, (rule, slug, summary, build) in enumerate(plan(), start=1):
        case = Case(number, slug, rule, summary)
        build(case, rng)
        assert case.labels and len(case.labels) == len(case.events), case.name
        built.append(case)
    return built


def dump(value: Any) -> str:
    """Fixture JSON: one message or artifact per line, like the public fixtures."""
    if isinstance(value, dict) and set(value) >= {"messages", "artifacts"}:
        parts = []
        for key, item in value.items():
            if isinstance(item, list):
                lines = ",\n".join(" " + json.dumps(x, ensure_ascii=False) for x in item)
                parts.append(f' "{key}": [\n{lines}\n ]')
            else:
                lines = ",\n".join(
                    f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                    for k, v in item.items()
                )
                parts.append(f' "{key}": {{\n{lines}\n }}')
        return "{\n" + ",\n".join(parts) + "\n}\n"
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def write(target: Path) -> list[Case]:
    """Write every case's fixture and labels into `target` (old case files removed)."""
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.json"):
        old.unlink()
    cases = build_all()
    for case in cases:
        (target / f"{case.name}.fixture.json").write_text(dump(case.fixture()), encoding="utf-8")
        (target / f"{case.name}.expected.json").write_text(dump(case.expected()), encoding="utf-8")
    return cases


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else CASES
    cases = write(target)
    print(f"wrote {len(cases)} cases to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
