"""Start-up: `export-worker run` imports only what the configured run needs (issue 10's
start-up goal; each of these libraries costs tens of milliseconds and megabytes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# Imported when needed only: the endpoint's HTTP server when a port is set, the
# OpenTelemetry SDK when something receives spans, the xlsx writer (and xlsxwriter) and the
# xml writer when writing those formats, the Azure SDKs on the azure backend, rich never
# (structlog imports it whenever it is installed).
OPTIONAL = (
    "aiohttp",
    "opentelemetry.sdk",
    "xlsxwriter",
    "handlers.serialisers.xlsx_file",
    "handlers.serialisers.xml_file",
    "azure.servicebus",
    "azure.cosmos",
    "rich",
)

_PROBE = textwrap.dedent(
    """
    import json, sys
    from worker.cli import cli
    from worker.operations import Operations
    from worker.settings import Settings
    import worker.local.backend

    Operations.from_settings(Settings(), environ={})
    print(json.dumps(sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[1:])))))
    """
)


def _loaded_after_startup(*prefixes: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EXPORT_WORKER_"))}
    env.pop("APPLICATIONINSIGHTS_CONNECTION_STRING", None)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *prefixes],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_a_local_run_without_port_or_tracing_imports_no_optional_library() -> None:
    assert _loaded_after_startup(*OPTIONAL) == []


def test_the_probe_sees_what_start_up_does_import() -> None:
    # The same probe finds a library the CLI always needs: it is not blind.
    assert "click" in _loaded_after_startup("click")
