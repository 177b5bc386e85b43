"""Case az's counting: the recorded HTTP calls named by service and operation, the test
broker's tally between two snapshots, and the per-turn figures (the turns' run minus the
empty run, over the turns)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any


def http_operation(call: dict[str, Any], blob_host: str) -> tuple[str, str]:
    """(service, operation) of one recorded HTTP call (`worker/testing/http_calls.py`)."""
    method, query = call["method"], call["query"]
    parts = [p for p in call["path"].split("/") if p]
    failed = "" if (call.get("status") or 200) < 400 else f" → {call['status']}"
    if call["host"] == blob_host:
        if "restype=container" in query:
            operation = "create container" if method == "PUT" else f"container {method}"
        elif "comp=list" in query:
            operation = "list blobs"
        elif "comp=blocklist" in query:
            operation = "commit block list"
        elif "comp=block" in query:
            operation = "stage block"
        elif method == "PUT":
            operation = "put blob (one call)"
        elif method == "GET":
            operation = "read blob"
        elif method == "HEAD":
            operation = "blob properties"
        else:
            operation = f"{method} blob"
        return "Blob", operation + failed
    return "Cosmos", _cosmos_operation(method, parts, call.get("headers") or {}) + failed


def _cosmos_operation(method: str, parts: list[str], headers: dict[str, str]) -> str:
    if len(parts) >= 5 and parts[0] == "dbs" and parts[2] == "colls" and parts[4] == "docs":
        container = parts[3]
        if len(parts) == 5 and method == "POST":
            if str(headers.get("x-ms-documentdb-isquery", "")).lower() == "true":
                return f"query {container}"
            if str(headers.get("x-ms-documentdb-is-upsert", "")).lower() == "true":
                return f"upsert {container}"
            return f"create {container}"
        verb = {"GET": "point read", "PUT": "replace", "DELETE": "delete"}.get(method, method)
        return f"{verb} {container}"
    if len(parts) >= 5 and parts[4] == "pkranges":
        return "read partition key ranges"
    if len(parts) == 4 and parts[2] == "colls":
        return "read container"
    if len(parts) == 2 and parts[0] == "dbs":
        return "read database"
    if not parts:
        return "read account"
    return f"{method} {'/'.join(parts[::2])}"


def http_totals(
    calls: Iterable[dict[str, Any]], blob_host: str
) -> dict[str, dict[str, Counter[str]]]:
    """{service: {operation: Counter(count, sent, received, charge)}} of recorded calls."""
    totals: dict[str, dict[str, Counter[str]]] = {}
    for call in calls:
        service, operation = http_operation(call, blob_host)
        tally = totals.setdefault(service, {}).setdefault(operation, Counter())
        tally["count"] += 1
        tally["sent"] += call.get("sent") or 0
        tally["received"] += call.get("received") or 0
        if call.get("charge") is not None:
            tally["charge"] += float(call["charge"])
    return totals


def per_turn(
    run: dict[str, dict[str, Counter[str]]],
    empty: dict[str, dict[str, Counter[str]]],
    turns: int,
) -> dict[str, dict[str, dict[str, float]]]:
    """RUN minus EMPTY, divided by TURNS; operations that cancel out are left out."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for service in sorted(set(run) | set(empty)):
        ops = run.get(service, {})
        base = empty.get(service, {})
        for operation in sorted(set(ops) | set(base)):
            diff = Counter(ops.get(operation, Counter()))
            diff.subtract(base.get(operation, Counter()))
            if diff["count"] == 0:
                continue
            out.setdefault(service, {})[operation] = {
                k: round(v / turns, 3) for k, v in sorted(diff.items())
            }
    return out


def servicebus_totals(snapshot: dict[str, dict[str, int]]) -> dict[str, Counter[str]]:
    """The broker's tally as {operation: Counter(count, bytes)}."""
    return {k: Counter(count=v["count"], bytes=v["bytes"]) for k, v in snapshot.items()}


def tally_between(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> dict[str, Counter[str]]:
    """What the broker counted between two snapshots."""
    out: dict[str, Counter[str]] = {}
    for kind, now in servicebus_totals(after).items():
        diff = Counter(now)
        diff.subtract(servicebus_totals(before).get(kind, Counter()))
        if diff["count"]:
            out[kind] = diff
    return out
