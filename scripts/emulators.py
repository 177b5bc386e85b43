#!/usr/bin/env python3
"""Start and stop the local stand-ins for Azure Blob Storage (Azurite) and Cosmos DB
(@vercel/cosmosdb-server), each on a free 127.0.0.1 port.

    eval "$(scripts/emulators.py start --state DIR)"   # prints `export NAME=value` lines
    scripts/emulators.py stop --state DIR               # stops what `start` started
    scripts/emulators.py run -- COMMAND ...             # start, run COMMAND, always stop

`start` waits until both servers answer HTTP; the processes it started (and only those)
are recorded in DIR/pids.json for `stop`. The servers come from node_modules (`npm ci`).
Only the standard library is used, so any Python 3.11 can run this.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "node_modules" / ".bin"
HOST = "127.0.0.1"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
# Azurite's well-known development account (public, documented; not a secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
# cosmosdb-server checks no signature; the SDK only needs a base64 key to sign with.
COSMOS_KEY = "ZXhwb3J0LXdvcmtlci10ZXN0LWtleQ=="


def free_port() -> int:
    """A port nobody listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def node_bin(name: str) -> Path:
    """A server's launcher from node_modules/.bin; says how to install it when missing."""
    path = BIN / name
    if not path.exists():
        raise SystemExit(f"emulators: {path} is missing: run `npm ci` in {ROOT}")
    return path


def answers(url: str) -> bool:
    """Whether an HTTP(S) server answers at `url` (any status will do)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # cosmosdb-server's self-signed certificate
    try:
        with urllib.request.urlopen(url, timeout=2, context=context):
            return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def wait_until_ready(name: str, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Block until the server answers; fail with its log when it dies or takes too long."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{tail(log)}")
        if answers(url):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not answer at {url} in {READY_TIMEOUT:.0f}s:\n{tail(log)}")


def tail(log: Path, lines: int = 20) -> str:
    """The end of a server's log, for error messages."""
    with contextlib.suppress(OSError):
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    return "(no log)"


def spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a server in its own process group, so `stop` can end it and its children."""
    with log.open("wb") as out:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def start(state: Path) -> dict[str, str]:
    """Start both servers, record their pids in `state`, return the variables to export."""
    state.mkdir(parents=True, exist_ok=True)
    node = "node"
    blob_port, cosmos_port = free_port(), free_port()
    servers = {
        "azurite": (
            [
                node,
                str(node_bin("azurite-blob")),
                "--blobHost",
                HOST,
                "--blobPort",
                str(blob_port),
                "--location",
                str(state / "azurite"),
                "--silent",
                "--loose",
                "--skipApiVersionCheck",
                "--disableTelemetry",
            ],
            f"http://{HOST}:{blob_port}/{ACCOUNT}?comp=list",
        ),
        "cosmosdb-server": (
            [node, str(node_bin("cosmosdb-server")), "--host", HOST, "--port", str(cosmos_port)],
            f"https://{HOST}:{cosmos_port}/",
        ),
    }
    pids: dict[str, int] = {}
    try:
        for name, (command, url) in servers.items():
            log = state / f"{name}.log"
            process = spawn(command, log)
            pids[name] = process.pid
            record(state, pids)
            wait_until_ready(name, process, url, log)
    except BaseException:
        stop(state)
        raise
    return {
        "EXPORT_WORKER_TEST_BLOB_CONNECTION_STRING": (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://{HOST}:{blob_port}/{ACCOUNT};"
        ),
        "EXPORT_WORKER_TEST_COSMOS_ENDPOINT": f"https://{HOST}:{cosmos_port}/",
        "EXPORT_WORKER_TEST_COSMOS_KEY": COSMOS_KEY,
        "EXPORT_WORKER_TEST_COSMOS_VERIFY_TLS": "false",
    }


def record(state: Path, pids: dict[str, int]) -> None:
    """Write the started pids before waiting, so a failed start can still be stopped."""
    (state / "pids.json").write_text(json.dumps(pids))


def stop(state: Path) -> None:
    """End the process groups `start` recorded: SIGTERM, then SIGKILL after a grace."""
    pid_file = state / "pids.json"
    try:
        pids: dict[str, int] = json.loads(pid_file.read_text())
    except (OSError, ValueError):
        return
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for pid in pids.values():
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        reap(pid)
    pid_file.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    """Whether the process still runs (a zombie child is reaped and counts as gone)."""
    if reap(pid):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap(pid: int) -> bool:
    """Collect our own exited child; True when it has exited."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False  # not our child (started by an earlier `start` call)
    return done == pid


def main(argv: list[str]) -> int:
    """Command line: start | stop | run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("start", "stop"):
        sub = commands.add_parser(name)
        sub.add_argument("--state", type=Path, required=True, help="folder for pids and logs")
    run = commands.add_parser("run")
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)

    if args.command == "start":
        variables = start(args.state)
        for name, value in variables.items():
            print(f"export {name}={shlex.quote(value)}")
        return 0
    if args.command == "stop":
        stop(args.state)
        return 0
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        parser.error("run needs a command after --")
    with tempfile.TemporaryDirectory(prefix="emulators-") as folder:
        state = Path(folder)
        try:
            variables = start(state)
            return subprocess.call(command, env={**os.environ, **variables})
        finally:
            stop(state)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
