"""benchmarks/chaos/silent_shutdown.py run as the README shows, at a small SDK timeout so
that it takes seconds: the stop it measures is bounded by the SDK timeout, and it reads the
margin from the template."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.benchmarks.script_runs import run_script

pytestmark = pytest.mark.servicebus_broker

LINE = re.compile(
    r"^silent shutdown: (?P<took>[\d.]+) s after the grace, (?P<verdict>within|past) the"
    r" replica's (?P<margin>\d+) s margin \(SDK_TIMEOUT_SECONDS 2\)$",
    re.MULTILINE,
)


def test_a_stop_on_a_silent_service_bus_is_measured_against_the_templates_margin(
    tmp_path: Path,
) -> None:
    ran = run_script("chaos/silent_shutdown.py", "--sdk-timeout", "2", cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    found = LINE.search(ran.stdout)
    assert found is not None, ran.stdout
    assert found["verdict"] == "within" and found["margin"] == "120"
    # The abandon's two SDK waits and the backstop, then the closes: seconds, not a minute.
    assert 2 * 2.0 <= float(found["took"]) < 2 * 2.0 + 5.0 + 2 * 2.0 + 3.0
