"""A record of every HTTP call a process makes through azure-core's aiohttp transport (Blob
Storage and Cosmos DB), for the Service Bus benchmark (`benchmarks/azure_turns.py`).

Nothing in the worker imports this module. A benchmark installs it before the CLI's `main`
runs, so the calls are counted below the adapters (whatever the adapters decide to do)
and the worker's own behaviour is unchanged: each call is passed on as it came, and only
its method, address, a few headers and its sizes are noted.
"""

from __future__ import annotations

import atexit
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from azure.core.pipeline.transport import AioHttpTransport

# Request headers that tell operations apart (a Cosmos query, an upsert, a blob's type).
REQUEST_HEADERS = ("x-ms-documentdb-isquery", "x-ms-documentdb-is-upsert", "x-ms-blob-type")
# What the service says a call cost (Cosmos DB request units), when it says so.
CHARGE_HEADER = "x-ms-request-charge"


def call_summary(request: Any, response: Any) -> dict[str, Any]:
    """What is kept of one call: never a body, only its shape and sizes."""
    url = urlsplit(str(request.url))
    headers: Mapping[str, str] = request.headers
    answer: Mapping[str, str] = getattr(response, "headers", {}) or {}
    return {
        "host": url.netloc,
        "method": str(request.method).upper(),
        "path": url.path,
        "query": url.query,
        "headers": {h: headers[h] for h in REQUEST_HEADERS if h in headers},
        "status": getattr(response, "status_code", None),
        "sent": _length(headers, _body(request)),
        "received": _length(answer, None),
        "charge": answer.get(CHARGE_HEADER),
    }


def install(path: str | Path) -> list[dict[str, Any]]:
    """Record every call from now on; write them to PATH (a JSON list) when the process
    exits. Returns the live list (a test reads it without waiting for the exit)."""
    calls: list[dict[str, Any]] = []
    send = AioHttpTransport.send

    async def counted(self: AioHttpTransport, request: Any, **kwargs: Any) -> Any:
        response = await send(self, request, **kwargs)
        calls.append(call_summary(request, response))
        return response

    AioHttpTransport.send = counted
    atexit.register(_write, Path(path), calls)
    return calls


def _write(path: Path, calls: list[dict[str, Any]]) -> None:
    path.write_text(json.dumps(calls), encoding="utf-8")


def _body(request: Any) -> Any:
    for name in ("content", "data", "body"):
        value = getattr(request, name, None)
        if value is not None:
            return value
    return None


def _length(headers: Mapping[str, str], body: Any) -> int | None:
    """Bytes on the wire: Content-Length when stated, else the length of a body in hand."""
    stated = headers.get("Content-Length") or headers.get("content-length")
    if stated is not None and str(stated).isdigit():
        return int(stated)
    if isinstance(body, bytes | bytearray | memoryview):
        return len(body)
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    return 0 if body is None else None
