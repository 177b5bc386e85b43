"""How long a worker takes to stop when Service Bus stops answering mid-turn, against the
time the replica is given (infra/main.bicep: `terminationGracePeriodSeconds` is
`SHUTDOWN_GRACE_SECONDS` plus a fixed margin, read from the template here).

On the AMQP test broker (tests/servicebus_broker) behind a proxy that holds its traffic
(tests/held_network.py): the Service Bus adapter at its default settings
(`SDK_TIMEOUT_SECONDS` 30 unless `--sdk-timeout`) serves one turn whose handler never
ends; the network goes silent, then the runtime is stopped as SIGTERM stops it. The grace
runs out, the turn is cancelled and its message abandoned, and the abandon and the closes
meet the silence. The figure is the time from the stop to the queue closed, less the
grace; it must stay within the margin, or Container Apps kills the replica mid-close
(harmless to the message, whose lock lapses, but not a clean stop).

    .venv/bin/python benchmarks/chaos/silent_shutdown.py

prints `silent shutdown: S s after the grace, within the replica's M s margin` (exit 0) or
`... past ...` (exit 1). It takes about the figure itself: about a minute at the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the test broker and the held network live in tests/

from tests.held_network import HeldNetwork  # noqa: E402
from tests.servicebus_broker import QueueConfig, ServiceBusBroker  # noqa: E402
from worker.azure.servicebus import AzureQueue  # noqa: E402
from worker.ports import QueueMessage  # noqa: E402
from worker.retry_policy import RetryPolicy  # noqa: E402
from worker.runtime import Runtime  # noqa: E402
from worker.settings import Settings  # noqa: E402

QUEUE = "turns"
GRACE_SECONDS = 1.0
LOCK_SECONDS = 60.0


def termination_margin() -> int:
    """The seconds the template gives a replica past SHUTDOWN_GRACE_SECONDS."""
    template = (ROOT / "infra" / "main.bicep").read_text(encoding="utf-8")
    found = re.search(
        r"terminationGracePeriodSeconds:\s*shutdownGraceSeconds\s*\+\s*(\d+)", template
    )
    if found is None:
        raise SystemExit("infra/main.bicep sets terminationGracePeriodSeconds otherwise")
    return int(found.group(1))


class NeverEnds:
    """A handler whose turn runs until it is cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def handle(self, message: QueueMessage) -> object:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def stop_on_silence(
    broker: ServiceBusBroker, network: HeldNetwork, sdk_timeout: float
) -> float:
    """Seconds from the stop to the queue closed, the grace included."""
    through = broker.connection_string_through(network.port)
    settings = Settings(
        env_file=None,
        backend="azure",
        servicebus_connection_string=through,
        queue_name=QUEUE,
        sdk_timeout_seconds=sdk_timeout,
        lock_duration_seconds=LOCK_SECONDS,
    )
    queue = AzureQueue(settings)
    await queue.send(b"turn", "conv-1")
    handler = NeverEnds()
    runtime = Runtime(
        handler,  # type: ignore[arg-type]
        queue,
        concurrency=2,
        retry=RetryPolicy(base_seconds=0, max_seconds=0),
        lock_duration=LOCK_SECONDS,
        session_idle=0.2,
        shutdown_grace=GRACE_SECONDS,
    )
    running = asyncio.create_task(runtime.run())
    await asyncio.wait_for(handler.started.wait(), 60)
    network.hold()
    stopped_at = time.monotonic()
    runtime.stop()
    await running
    await queue.close()
    return time.monotonic() - stopped_at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sdk-timeout",
        type=float,
        default=Settings(env_file=None).sdk_timeout_seconds,
        help="SDK_TIMEOUT_SECONDS (default: the worker's default)",
    )
    args = parser.parse_args()
    margin = termination_margin()
    config = QueueConfig(QUEUE, requires_session=True, lock_duration=LOCK_SECONDS)
    with ServiceBusBroker([config]) as broker, HeldNetwork(("127.0.0.1", broker.port)) as network:
        took = asyncio.run(stop_on_silence(broker, network, args.sdk_timeout)) - GRACE_SECONDS
    within = took <= margin
    print(
        f"silent shutdown: {took:.1f} s after the grace, {'within' if within else 'past'}"
        f" the replica's {margin} s margin (SDK_TIMEOUT_SECONDS {args.sdk_timeout:g})"
    )
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
