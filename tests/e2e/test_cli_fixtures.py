"""End to end through the real CLI on the local backend: the public fixtures and operations."""

from __future__ import annotations

import hashlib
import json
import math
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_driver import FIXTURES, Cli, csv_rows, load_fixture

# Every public fixture with an expected outcome: the shared three and the project's own.
PUBLIC = sorted(p.name.removesuffix(".expected.json") for p in FIXTURES.glob("*.expected.json"))


_RULES = {
    "assistant_table",
    "excerpt_replaced",
    "single_group",
    "dominant",
    "combined",
    "reach_back_named",
    "reach_back_newest",
    "reach_back_any",
}


def _same(want: Any, got: str) -> bool:
    if isinstance(want, bool):
        return got == ("true" if want else "false")
    if isinstance(want, int | float):
        return math.isclose(float(got), float(want), abs_tol=1e-9)
    return got == want


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    home = tmp_path / "home"
    home.mkdir()
    return Cli(home)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_fixture_decides_and_exports_as_expected(cli: Cli, name: str) -> None:
    _, expected = load_fixture(name)
    fixture_path = Path(__file__).resolve().parents[1] / "fixtures" / "public"
    cli.run("dev", "seed", str(fixture_path / f"{name}.fixture.json"))
    cli.run("run", "--drain")

    assert cli.json("dlq", "list") == []
    for cid in expected["conversations"]:
        records = cli.json("turns", "list", "--conversation", cid)
        assert sorted(r["turn_id"] for r in records) == sorted(
            t for t, e in expected["turns"].items() if e["conversation_id"] == cid
        )
        for record in records:
            want = expected["turns"][record["turn_id"]]
            for key in ("decision", "format", "carried", "user_id", "event_id"):
                assert record[key] == want[key], key
            assert record["state_after"] == want["state_after"]
            if want["export"] is None:
                assert record["export"] is None
                continue
            _check_export(cli, record, want["export"])

    events = cli.json("dev", "events")
    published = [e for e in expected["turns"].values() if e["decision"] == "published"]
    assert sorted(e["export_id"] for e in events) == sorted(
        e["export"]["export_id"] for e in published
    )


def _check_export(cli: Cli, record: dict[str, Any], want: dict[str, Any]) -> None:
    export = record["export"]
    assert record["event_sent"] is True
    for key in ("format", "export_id", "blob", "row_source", "row_count", "truncated"):
        assert export[key] == want[key], key
    if "selection_rule" in want:
        assert export["selection"]["rule"] == want["selection_rule"]
    assert export["selection"]["rule"] in _RULES
    chosen = [g for g in export["selection"]["groups"] if g["chosen"]]
    assert bool(chosen) == (export["row_source"] != "assistant_table")
    if want.get("columns_exact") is not None:
        assert export["columns"] == want["columns_exact"]
    for column in want.get("columns_required") or []:
        assert column in export["columns"]
    for column in want.get("columns_forbidden") or []:
        assert column not in export["columns"]
    if want.get("source_artifacts") is not None:
        assert sorted(export["source_artifacts"]) == want["source_artifacts"]
    for path in want.get("source_artifacts_include") or []:
        assert path in export["source_artifacts"]
    for path in want.get("source_artifacts_exclude") or []:
        assert path not in export["source_artifacts"]

    data = cli.export_bytes(export["export_id"])
    assert export["bytes"] == len(data)
    assert export["sha256"] == hashlib.sha256(data).hexdigest()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\n" not in data.replace(b"\r\n", b"")
    header, rows = csv_rows(data)
    assert header == export["columns"]
    assert len(rows) == want["row_count"]
    for label, index in (("first_row", 0), ("last_row", -1)):
        for column, value in (want.get(label) or {}).items():
            assert _same(value, rows[index][column]), (label, column)
    for partial in want.get("rows_include") or []:
        assert any(all(_same(v, r.get(c, "")) for c, v in partial.items()) for r in rows)
    for column, counts in (want.get("value_counts") or {}).items():
        got: dict[str, int] = {}
        for r in rows:
            got[r[column]] = got.get(r[column], 0) + 1
        assert got == counts


def test_malformed_event_is_dead_lettered_and_next_good_turn_still_published(
    cli: Cli, tmp_path: Path
) -> None:
    fixture, expected = load_fixture("headline")
    good = fixture["events"][0]
    fixture["events"] = []
    seeded = tmp_path / "seed.json"
    seeded.write_text(json.dumps(fixture))
    cli.run("dev", "seed", str(seeded))
    wrong_version = {**good, "version": 2, "event_id": "evt_v2"}
    missing = {k: v for k, v in good.items() if k != "reply_message_id"}
    lines = [b"this is not json", json.dumps(wrong_version).encode(), json.dumps(missing).encode()]
    lines.append(json.dumps(good).encode())
    cli.run("send", "-", input=b"\n".join(lines))
    cli.run("run", "--drain")

    dead = cli.json("dlq", "list")
    assert [d["reason"] for d in dead] == ["schema_invalid"] * 3
    assert all(
        set(d)
        >= {
            "sequence_number",
            "message_id",
            "session_id",
            "description",
            "enqueued_at",
            "delivery_count",
        }
        for d in dead
    )
    records = cli.json("turns", "list", "--conversation", good["conversation_id"])
    assert [r["decision"] for r in records] == ["published"]
    want = expected["turns"][good["turn_id"]]["export"]
    assert records[0]["export"]["row_count"] == want["row_count"]


def test_the_longest_ids_an_event_may_carry_publish_and_one_more_is_schema_invalid(
    cli: Cli, tmp_path: Path
) -> None:
    """Parts of 255 bytes, and 993 characters of ids together, fit the local store and a
    Blob Storage name (events.md): the turn publishes. One character more is refused when
    the event is read, never as a bug after the work is done."""
    conversation_id = "c" * 255 + "/" + "\u00e9" * 127 + "c"  # 255 bytes a part
    turn_id = "t" * 255 + "/" + "t" * 255 + "/" + "\U0001f600" * 48 + "t"  # an emoji: 2 units
    assert len(conversation_id) + len(turn_id) + 48 == 993
    text = (FIXTURES / "headline.fixture.json").read_text(encoding="utf-8")
    text = text.replace("conv_headline_a", conversation_id).replace("turn_headline_a1", turn_id)
    fixture = json.loads(text)
    too_long = {**fixture["events"][0], "event_id": "evt_longer", "turn_id": turn_id + "t"}
    fixture["events"].append(too_long)
    seeded = tmp_path / "seed.json"
    seeded.write_text(json.dumps(fixture), encoding="utf-8")
    cli.run("dev", "seed", str(seeded))
    cli.run("run", "--drain")

    [dead] = cli.json("dlq", "list")
    assert dead["reason"] == "schema_invalid" and dead["message_id"] == "evt_longer"
    assert "1025 characters, over Blob Storage's 1024" in dead["description"]
    [record] = cli.json("turns", "list", "--conversation", conversation_id)
    assert record["turn_id"] == turn_id and record["decision"] == "published"
    _, want = load_fixture("headline")
    _, rows = csv_rows(cli.export_bytes(record["export"]["export_id"]))
    assert len(rows) == want["turns"]["turn_headline_a1"]["export"]["row_count"]


def test_replaying_a_turn_that_was_meanwhile_published_changes_nothing(
    cli: Cli, tmp_path: Path
) -> None:
    fixture, _ = load_fixture("headline")
    good = fixture["events"][0]
    conversations = fixture["conversations"]
    # The conversation is not visible yet: the event is retried, then dead-lettered.
    seeded = tmp_path / "seed.json"
    seeded.write_text(json.dumps({**fixture, "conversations": []}))
    cli.extra_env = {"EXPORT_WORKER_MAX_ATTEMPTS": "2"}
    cli.run("dev", "seed", str(seeded))
    cli.run("run", "--drain")
    [dead] = cli.json("dlq", "list")
    assert dead["reason"] == "conversation_not_found"
    assert dead["session_id"] == good["conversation_id"]
    assert dead["delivery_count"] == 2

    # Meanwhile the conversation appears and the chat service re-sends: published once.
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"conversations": conversations, "events": [good]}))
    cli.run("dev", "seed", str(later))
    cli.run("run", "--drain")
    [first] = cli.json("turns", "list", "--conversation", good["conversation_id"])
    assert first["decision"] == "published"

    # The operator replays the old dead letter: a no-op, nothing doubles.
    assert "would replay" in cli.run("dlq", "replay", "--all", "--dry-run").stdout.decode()
    assert len(cli.json("dlq", "list")) == 1
    cli.run("dlq", "replay", str(dead["sequence_number"]))
    assert cli.json("dlq", "list") == []
    cli.run("run", "--drain")
    assert cli.json("dlq", "list") == []
    assert cli.json("turns", "list", "--conversation", good["conversation_id"]) == [first]
    assert len(cli.json("dev", "events")) == 1
    assert len(cli.json("exports", "list")) == 1
    exports_dir = cli.home / "blobs" / "exports" / good["conversation_id"]
    assert len([p for p in exports_dir.rglob("*") if p.is_file()]) == 1


def test_two_run_processes_on_one_home_export_every_turn_once(cli: Cli, tmp_path: Path) -> None:
    fixture, _ = load_fixture("two_small_groups")
    base_conv = fixture["conversations"][0]
    conversations, messages, artifacts, events = [], [], {}, []
    for n in range(12):
        cid = f"{base_conv['id']}_{n}"
        conversations.append({**base_conv, "id": cid})
        for m in fixture["messages"]:
            results = [
                {**r, "artifact": r["artifact"].replace(base_conv["id"], cid)}
                for r in m.get("results", [])
            ]
            copy = {**m, "id": f"{m['id']}_{n}", "conversation_id": cid}
            if results:
                copy["results"] = results
            messages.append(copy)
        for path, value in fixture["artifacts"].items():
            artifacts[path.replace(base_conv["id"], cid)] = value
        for e in fixture["events"]:
            events.append(
                {
                    **e,
                    "conversation_id": cid,
                    "event_id": f"{e['event_id']}_{n}",
                    "user_message_id": f"{e['user_message_id']}_{n}",
                    "reply_message_id": f"{e['reply_message_id']}_{n}",
                }
            )
    seeded = tmp_path / "many.json"
    seeded.write_text(
        json.dumps(
            {
                "conversations": conversations,
                "messages": messages,
                "artifacts": artifacts,
                "events": events,
            }
        )
    )
    cli.run("dev", "seed", str(seeded))
    # Their output goes to files: a pipe nobody reads while the other is awaited could
    # fill and stop its writer with a session held.
    with (
        (tmp_path / "first.log").open("wb") as log_1,
        (tmp_path / "second.log").open("wb") as log_2,
        cli.started("run", "--drain", output=log_1) as first,
        cli.started("run", "--drain", output=log_2) as second,
    ):
        assert (first.wait(timeout=120), second.wait(timeout=120)) == (0, 0)

    exports = cli.json("exports", "list")
    assert len(exports) == 12
    assert len({e["export_id"] for e in exports}) == 12
    events_sent = cli.json("dev", "events")
    assert sorted(e["export_id"] for e in events_sent) == sorted(e["export_id"] for e in exports)
    assert cli.json("dlq", "list") == []


def test_a_worker_started_for_a_block_is_killed_and_reaped_when_the_block_fails(
    cli: Cli,
) -> None:
    # The driver's own promise: a test whose assertion fails with `run` still going
    # neither hangs on it nor leaves it running.
    class Failed(Exception):
        pass

    with pytest.raises(Failed), cli.started("run") as worker:  # no --drain: never ends
        raise Failed
    assert worker.returncode == -signal.SIGKILL
    assert worker.stdout is not None and worker.stdout.closed


def test_usage_error_exits_2_with_one_line(cli: Cli) -> None:
    proc = cli.run("turns", "list", check=False)
    assert proc.returncode == 2
    assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_a_group_named_without_a_command_lists_its_commands_in_one_line(cli: Cli) -> None:
    everything = ("run", "dlq", "exports", "status")
    for args, names in (
        ((), everything),
        (("--log-level", "debug"), everything),
        (("dlq",), ("replay",)),
    ):
        proc = cli.run(*args, check=False)
        assert proc.returncode == 2 and proc.stdout == b""
        (line,) = proc.stderr.decode().strip().splitlines()
        assert ("dlq needs a command" if "dlq" in args else "a command is needed") in line, line
        assert all(name in line for name in names), line


def test_missing_export_id_exits_1_with_a_clear_message(cli: Cli) -> None:
    proc = cli.run("exports", "get", "exp_nothing", check=False)
    assert proc.returncode == 1
    assert "exp_nothing" in proc.stderr.decode()
    assert len(proc.stderr.decode().strip().splitlines()) == 1


def test_exports_get_that_fails_leaves_no_partial_file(cli: Cli) -> None:
    cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    cli.run("run", "--drain")
    [export] = cli.json("exports", "list")
    for blob in (cli.home / "blobs").rglob("*.csv"):
        blob.unlink()  # recorded, but its blob is gone
    out = cli.home / "out"
    out.mkdir()
    proc = cli.run("exports", "get", export["export_id"], "-o", str(out / "f.csv"), check=False)
    assert proc.returncode == 1 and "missing" in proc.stderr.decode()
    assert list(out.iterdir()) == []


def test_json_output_is_only_json(cli: Cli) -> None:
    for args in (
        ("dlq", "list"),
        ("exports", "list"),
        ("dev", "events"),
        ("turns", "list", "--conversation", "nobody"),
    ):
        out = cli.run(*args, "--json").stdout
        assert json.loads(out) == []


def test_turns_show_prints_one_record_and_why_its_rows_were_chosen(cli: Cli) -> None:
    cli.run("dev", "seed", str(FIXTURES / "relevance.fixture.json"))
    cli.run("run", "--drain")
    args = ("turns", "show", "turn_relevance_a3", "--conversation", "conv_relevance_a")
    [record] = cli.json(*args)
    assert record == next(
        r
        for r in cli.json("turns", "list", "--conversation", "conv_relevance_a")
        if r["turn_id"] == "turn_relevance_a3"
    )
    selection = record["export"]["selection"]
    assert selection["rule"] == "reach_back_named"
    chosen = [g for g in selection["groups"] if g["chosen"]]
    assert [(g["turn_id"], g["action"], g["rows"]) for g in chosen] == [
        ("turn_relevance_a1", "list_parameter_history", 900)
    ]
    newer = next(g for g in selection["groups"] if g["turn_id"] == "turn_relevance_a2")
    assert newer["rows"] is None and newer["score"] == 0  # never read, names nothing asked
    text = cli.run(*args).stdout.decode()
    assert "reach_back_named" in text and "list_parameter_history" in text
    assert "BatteryVoltage1" not in text  # no row data, only decisions


def test_turns_show_of_an_unrecorded_turn_exits_1_with_one_line(cli: Cli) -> None:
    proc = cli.run("turns", "show", "turn_nowhere", "--conversation", "conv_x", check=False)
    assert proc.returncode == 1 and proc.stdout == b""
    assert len(proc.stderr.decode().strip().splitlines()) == 1
    assert "turn_nowhere" in proc.stderr.decode()
    usage = cli.run("turns", "show", "turn_nowhere", check=False)
    assert usage.returncode == 2


def one_line_failure(proc: subprocess.CompletedProcess[bytes]) -> str:
    """The failure's one line on stderr (exit code 1, nothing on stdout)."""
    assert proc.returncode == 1 and proc.stdout == b"", proc
    (line,) = proc.stderr.decode().strip().splitlines()
    assert "Traceback" not in line
    return line


def test_setup_mistakes_fail_in_one_line_that_names_what_to_fix(cli: Cli, tmp_path: Path) -> None:
    # A fresh operator's slips: each named in the line, not as an internal file or a bare
    # library error.
    missing = tmp_path / "no-such-folder" / "x.csv"
    line = one_line_failure(cli.run("exports", "get", "exp_x", "-o", str(missing), check=False))
    assert f"no folder {missing.parent}" in line
    malformed = tmp_path / "fixture.json"
    malformed.write_text(json.dumps({"conversations": 5}))
    line = one_line_failure(cli.run("dev", "seed", str(malformed), check=False))
    assert "'conversations' must be an array" in line
    for body, says in (
        ([], "is not a JSON object"),
        ({"events": {}}, "'events' must be an array"),
        ({"artifacts": []}, "'artifacts' must be an object"),
    ):
        malformed.write_text(json.dumps(body))
        line = one_line_failure(cli.run("dev", "seed", str(malformed), check=False))
        assert says in line, line
    a_file = tmp_path / "home-file"
    a_file.write_text("")
    cli.extra_env = {"EXPORT_WORKER_HOME": str(a_file)}
    line = one_line_failure(cli.run("status", check=False))
    assert f"the home {a_file} is not a folder" in line
    # `run` logs as it goes (JSON lines on stderr): its failure is the last line.
    cli.extra_env = {
        "EXPORT_WORKER_HTTP_HOST": "no.such.host.invalid",
        "EXPORT_WORKER_HTTP_PORT": "18093",  # never bound: the name does not resolve
    }
    proc = cli.run("run", "--drain", check=False)
    assert proc.returncode == 1
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("export-worker: OSError: cannot listen on no.such.host.invalid:18093")


def test_more_attempts_than_the_local_queue_delivers_stops_run_not_the_operators_tools(
    cli: Cli,
) -> None:
    # The operator recovers with dlq, turns and send whatever the setting holds; only the
    # consumer refuses a value the queue would cut short.
    cli.extra_env = {"EXPORT_WORKER_MAX_ATTEMPTS": "11"}
    cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    for command in (("status",), ("dlq", "list"), ("exports", "list")):
        cli.run(*command)
    cli.run("send", "-", input=b'{"type": "turn.completed"}')  # invalid: dead-lettered later
    proc = cli.run("run", "--drain", check=False)
    assert proc.returncode == 1
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert "EXPORT_WORKER_MAX_ATTEMPTS must be at most 10 on the local backend" in last


def test_state_changing_commands_say_what_they_did_on_stderr_only(cli: Cli) -> None:
    # docs/contract/cli.md: their summary goes to stderr, so stdout holds only data.
    seeded = cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    assert seeded.stdout == b""
    assert seeded.stderr.decode().strip() == (
        "seeded 1 conversation(s), 7 message(s), 4 artifact(s), 1 event(s)"
    )
    sent = cli.run("send", "-", input=b'{"not": "an event"}\n{"nor": "this"}\n')
    assert sent.stdout == b"" and sent.stderr.decode().strip() == "enqueued 2 event(s)"


def test_the_log_level_given_before_run_wins_over_runs_default(cli: Cli) -> None:
    cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    quiet = cli.run("--log-level", "warning", "run", "--drain")
    assert b"worker_started" not in quiet.stderr and b"turn_published" not in quiet.stderr
    cli.run("dev", "seed", str(FIXTURES / "two_small_groups.fixture.json"))
    assert b"worker_started" in cli.run("run", "--drain").stderr  # run's default: info


def test_the_log_level_reaches_commands_other_than_run_as_json_lines_on_stderr(cli: Cli) -> None:
    # Every command configures logging (warning unless told): at debug, even asyncio's
    # "Using selector" line is a JSON line on stderr, and stdout still holds only the JSON.
    proc = cli.run("--log-level", "debug", "status", "--json")
    assert isinstance(json.loads(proc.stdout), dict)
    lines = [json.loads(line) for line in proc.stderr.decode().splitlines()]
    assert lines and any(line["level"] == "debug" for line in lines)
    assert cli.run("status", "--json").stderr == b""  # warning by default: nothing to say


def test_status_without_json_prints_its_readable_lines(cli: Cli) -> None:
    cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    lines = cli.run("status").stdout.decode().splitlines()
    assert [line.split()[0] for line in lines] == ["backend", "queue", "oldest", "dead", "last"]
    assert lines[0] == "backend          local" and lines[1] == "queue depth      1"
    assert lines[4] == "last export      none yet"


def test_turns_list_without_json_prints_one_line_a_turn(cli: Cli) -> None:
    fixture, _ = load_fixture("relevance")
    cli.run("dev", "seed", str(FIXTURES / "relevance.fixture.json"))
    cli.run("run", "--drain")
    cid = fixture["events"][0]["conversation_id"]
    records = cli.json("turns", "list", "--conversation", cid)
    assert [r["decision"] for r in records] == ["no_request", "no_request", "published"]
    lines = cli.run("turns", "list", "--conversation", cid).stdout.decode().splitlines()
    first, second, third = records
    assert lines == [
        f"{first['seq']}  {first['turn_id']}  no_request  -  ",  # no format, no rows
        f"{second['seq']}  {second['turn_id']}  no_request  -  ",
        f"{third['seq']}  {third['turn_id']}  published  csv  {third['export']['row_count']}",
    ]


def test_exports_get_without_output_writes_the_files_bytes_to_stdout(cli: Cli) -> None:
    cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    cli.run("run", "--drain")
    [export] = cli.json("exports", "list")
    streamed = cli.run("exports", "get", export["export_id"])
    assert streamed.stdout == cli.export_bytes(export["export_id"]) and streamed.stderr == b""
    assert hashlib.sha256(streamed.stdout).hexdigest() == export["sha256"]
    to_a_folder = cli.run("exports", "get", export["export_id"], "-o", str(cli.home), check=False)
    assert to_a_folder.returncode == 2 and b"is a directory" in to_a_folder.stderr


def test_run_takes_one_session_worker_or_more(cli: Cli) -> None:
    cli.run("dev", "seed", str(FIXTURES / "headline.fixture.json"))
    refused = cli.run("run", "--drain", "--concurrency", "0", check=False)
    assert refused.returncode == 2 and b"--concurrency" in refused.stderr
    one = cli.run("run", "--drain", "--concurrency", "1")
    logged = [json.loads(line) for line in one.stderr.decode().splitlines()]
    (started,) = [line for line in logged if line["event"] == "worker_started"]
    assert started["concurrency"] == 1
    assert len(cli.json("exports", "list")) == 1
