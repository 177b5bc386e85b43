"""The eval set (tests/evals/README.md): at least 80 labelled conversations, reproducible from
the generator, and every one decided as labelled when run through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from .generate import write
from .runner import CASES, report, run, score


def test_eval_set_has_at_least_80_labelled_conversations_in_every_bucket() -> None:
    labels = [json.loads(p.read_text("utf-8")) for p in CASES.glob("*.expected.json")]
    assert len(labels) >= 80
    assert all((CASES / label["fixture"]).is_file() for label in labels)
    buckets = {label["rule"] for label in labels}
    assert {"relevance", "excerpt_tolerant", "composed_table", "format_intent"} <= buckets
    assert {"table_parsing", "carried", "reach_back_recency", "current_turn"} <= buckets


def test_generator_writes_exactly_the_committed_cases(tmp_path: Path) -> None:
    write(tmp_path)
    committed = sorted(p.name for p in CASES.glob("*.json"))
    assert sorted(p.name for p in tmp_path.glob("*.json")) == committed
    for name in committed:
        assert (tmp_path / name).read_bytes() == (CASES / name).read_bytes(), name


def test_a_record_that_differs_from_its_labels_is_a_miss() -> None:
    expected = {
        "case": "x",
        "rule": "relevance",
        "turns": {"t1": {"decision": "published", "row_count": 900, "selection_rule": "dominant"}},
    }
    record = {
        "turn_id": "t1",
        "decision": "published",
        "export": {"row_count": 3, "source_artifacts": [], "selection": {"rule": "dominant"}},
    }
    missed = score(expected, [record])
    assert not missed.correct and missed.mismatches == ["t1: row_count is 3, labelled 900"]
    assert not score(expected, []).correct
    assert "overall      0/1      0.0%" in report([missed])


def test_eval_set_is_decided_as_labelled_through_the_cli() -> None:
    outcomes = run(CASES, in_process=True)
    assert len(outcomes) >= 80
    assert all(o.correct for o in outcomes), "\n".join(report(outcomes, verbose=True))
