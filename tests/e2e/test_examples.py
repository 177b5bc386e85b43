"""The examples run as a chat-service engineer would run them, on the local backend: the
consumer waits, the chat service persists a turn and announces it, the worker publishes,
and the consumer downloads the file with every row the tool returned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_driver import Cli, csv_rows

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_chat_service_example_is_exported_and_the_consumer_downloads_the_file(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    cli = Cli(home)
    downloads = tmp_path / "downloads"
    consumer = subprocess.Popen(
        [
            sys.executable,
            str(EXAMPLES / "export_consumer.py"),
            "--conversation",
            "conv_demo",
            "--count",
            "1",
            "--out",
            str(downloads),
            "--timeout",
            "120",
        ],
        cwd=home,
        env=cli.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        produced = subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / "chat_service.py"),
                "--conversation",
                "conv_demo",
                "--samples",
                "240",
            ],
            cwd=home,
            env=cli.env(),
            capture_output=True,
            timeout=120,
            check=True,
        )
        ids = json.loads(produced.stdout)
        assert ids["conversation_id"] == "conv_demo" and ids["turn_id"] == "turn_1"
        cli.run("run", "--drain")
        out, err = consumer.communicate(timeout=120)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, err.decode(errors="replace")[-2000:]
    [line] = out.decode().splitlines()
    downloaded = json.loads(line)
    assert (downloaded["format"], downloaded["row_count"]) == ("csv", 240)

    [record] = cli.json("turns", "list", "--conversation", "conv_demo")
    assert record["decision"] == "published" and record["event_id"] == ids["event_id"]
    assert record["export"]["row_source"] == "action_rows"
    data = Path(downloaded["file"]).read_bytes()
    assert data == cli.export_bytes(record["export"]["export_id"])  # the file `exports get` gives
    header, rows = csv_rows(data)
    assert header == ["timestamp", "parameter", "value", "unit"]
    assert len(rows) == 240 and {r["parameter"] for r in rows} == {"BatteryVoltage1"}
    assert cli.json("dlq", "list") == []
