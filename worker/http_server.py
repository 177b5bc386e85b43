"""The worker's operations endpoint: /healthz, /readyz and /metrics over HTTP (aiohttp).

It answers probes and scrapes only; the worker takes no requests. Access logs are off:
probes come every few seconds and would drown the worker's own events.
"""

from __future__ import annotations

from aiohttp import web

from worker.health import Liveness, Readiness, Verdict
from worker.metrics import Metrics

_LIVENESS: web.AppKey[Liveness] = web.AppKey("liveness", Liveness)
_READINESS: web.AppKey[Readiness] = web.AppKey("readiness", Readiness)
_METRICS: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)


def _answer(verdict: Verdict) -> web.Response:
    return web.json_response(verdict.body(), status=200 if verdict.ok else 503)


async def _healthz(request: web.Request) -> web.Response:
    return _answer(request.app[_LIVENESS].verdict())


async def _readyz(request: web.Request) -> web.Response:
    return _answer(await request.app[_READINESS].verdict())


async def _metrics(request: web.Request) -> web.Response:
    body, content_type = request.app[_METRICS].render(request.headers.get("Accept", ""))
    return web.Response(body=body, headers={"Content-Type": content_type})


def application(liveness: Liveness, readiness: Readiness, metrics: Metrics) -> web.Application:
    """The aiohttp application serving the three endpoints."""
    app = web.Application()
    app[_LIVENESS] = liveness
    app[_READINESS] = readiness
    app[_METRICS] = metrics
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app


class OperationsServer:
    """The endpoint, listening; `port` is the bound one (useful when asked for port 0)."""

    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self._runner = runner
        self.port = port

    async def close(self) -> None:
        """Stop listening and release the socket."""
        await self._runner.cleanup()


async def start_operations_server(
    host: str, port: int, liveness: Liveness, readiness: Readiness, metrics: Metrics
) -> OperationsServer:
    """Listen on `host`:`port` (0: a free port) and serve until closed."""
    runner = web.AppRunner(application(liveness, readiness, metrics), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except OSError as exc:  # a name that does not resolve, a port in use: say which
        await runner.cleanup()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    except BaseException:
        await runner.cleanup()
        raise
    bound = runner.addresses[0][1] if runner.addresses else port
    return OperationsServer(runner, int(bound))
