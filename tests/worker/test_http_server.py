"""The operations endpoint over real HTTP, on a free port of 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from worker.health import Liveness, LivenessBounds, Readiness
from worker.http_server import start_operations_server
from worker.metrics import Metrics


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def get(port: int, path: str) -> tuple[int, str, Any]:
    async with (
        aiohttp.ClientSession() as client,
        client.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        text = await response.text()
        content_type = response.headers["Content-Type"]
        body = await response.json() if content_type.startswith("application/json") else text
        return response.status, content_type, body


def test_probes_answer_200_or_503_with_a_json_reason_and_metrics_answer_prometheus_text() -> None:
    clock = FakeClock()
    liveness = Liveness(clock, LivenessBounds(start_seconds=5, stall_seconds=10))
    readiness = Readiness(clock=clock)
    metrics = Metrics()

    async def main() -> None:
        server = await start_operations_server("127.0.0.1", 0, liveness, readiness, metrics)
        try:
            assert server.port > 0
            assert await get(server.port, "/healthz") == (
                200,
                "application/json; charset=utf-8",
                {"status": "starting", "seconds_since_created": 0.0},
            )
            assert (await get(server.port, "/readyz"))[::2] == (503, {"status": "not_opened"})

            readiness.opened()
            liveness.loop_started()
            metrics.turn_settled("published", 0.2)
            metrics.turn_settled("no_request", 0.1)
            assert (await get(server.port, "/readyz"))[::2] == (200, {"status": "ready"})
            status, _, body = await get(server.port, "/healthz")
            assert (status, body["status"]) == (200, "progressing")

            clock.now = 11.0
            status, _, body = await get(server.port, "/healthz")
            assert (status, body["status"]) == (503, "stalled")

            status, content_type, text = await get(server.port, "/metrics")
            assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
            samples = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
            assert samples[("export_worker_turns_total", (("decision", "published"),))] == 1
            assert samples[("export_worker_turns_total", (("decision", "no_request"),))] == 1
            duration = ("export_worker_turn_duration_seconds_count", (("outcome", "completed"),))
            assert samples[duration] == 2

            readiness.closed()
            assert (await get(server.port, "/readyz"))[::2] == (503, {"status": "closed"})
            assert (await get(server.port, "/nothing"))[0] == 404
        finally:
            await server.close()

    asyncio.run(main())


def test_a_closed_server_no_longer_listens() -> None:
    async def main() -> None:
        server = await start_operations_server("127.0.0.1", 0, Liveness(), Readiness(), Metrics())
        assert (await get(server.port, "/metrics"))[0] == 200
        await server.close()
        with pytest.raises(aiohttp.ClientConnectionError):
            await get(server.port, "/metrics")

    asyncio.run(main())
