"""The README's two commands, as a new user meets them: the first run as written on a copy
of the project (it installs the worker into a fresh venv from the package index, seeds the
headline sample, drains the queue and lists the file), the second being what `.ci/run`
runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a clone does not hold: environments, caches, the worker's data, a built egg.
NOT_CLONED = shutil.ignore_patterns(
    ".git", ".venv*", "node_modules", "__pycache__", "*.egg-info", ".*_cache", ".export-worker"
)


def readme_commands() -> list[str]:
    """The lines of the README's first code block."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def fresh_machine_env() -> dict[str, str]:
    """This environment without the test run's venv or worker settings: `python3` is the
    machine's, as on a fresh machine."""
    venv = os.environ.get("VIRTUAL_ENV")
    path = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if not (venv and entry.startswith(venv)) and not entry.startswith(str(ROOT))
    ]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("EXPORT_WORKER_", "PYTHON", "PIP_")) and key != "VIRTUAL_ENV"
    }
    env["PATH"] = os.pathsep.join(path)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_the_readme_has_the_install_and_run_line_then_the_test_command() -> None:
    install_and_run, test = readme_commands()
    assert install_and_run.startswith("python3 -m venv .venv && ")
    assert test == "scripts/test"
    assert (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().endswith("exec scripts/test")


@pytest.mark.slow
def test_the_readmes_first_line_installs_the_worker_and_exports_the_sample(tmp_path: Path) -> None:
    env = fresh_machine_env()
    if shutil.which("python3", path=env["PATH"]) is None:
        pytest.fail("no python3 on PATH: the README's first line cannot run here")
    project = tmp_path / "turn-export-worker"
    shutil.copytree(ROOT, project, ignore=NOT_CLONED, symlinks=True)
    install_and_run = readme_commands()[0]

    done = subprocess.run(
        ["bash", "-c", install_and_run],
        cwd=project,
        env=env,
        capture_output=True,
        timeout=900,
    )

    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    # `exports list`, the line's last command: one csv of the sample's 900 rows.
    [listed] = done.stdout.decode().strip().splitlines()[-1:]
    export_id, file_format, rows, unit, path = listed.split()
    assert (file_format, rows, unit) == ("csv", "900", "rows")
    shown = subprocess.run(
        [str(project / ".venv" / "bin" / "export-worker"), "exports", "get", export_id],
        cwd=project,
        env=env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert path.endswith(f"{export_id}.csv")
    assert len(shown.stdout.decode().splitlines()) == 1 + 900  # the header, then every row
