"""What case az (`azure_turns.py`) hands to `run_all.py`: its figures, read back from the
measuring process's JSON line, and the lines of results.md that show them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Measured:
    """Wall, CPU and peak RSS of one process (as run_all's Usage)."""

    wall: float
    cpu: float
    rss_mb: float


@dataclass(frozen=True)
class AzureRun:
    """Case az: the turns on the Azure backend, or why it did not run."""

    skipped: str | None
    turns: int = 0
    project: Measured | None = None
    empty: Measured | None = None
    # {"Service Bus" | "Blob" | "Cosmos": {operation: {"count", "sent", "received", ...}}},
    # each figure per turn (net of the empty run's).
    operations: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    local: tuple[Measured, Measured] | None = None  # standalone --local: (turns, empty)

    def ms(self) -> float:
        """Wall ms per turn, net of start-up and shutdown."""
        assert self.project is not None and self.empty is not None and self.turns
        return (self.project.wall - self.empty.wall) / self.turns * 1000

    def cpu_ms(self) -> float:
        """CPU ms per turn of the worker process, net of start-up and shutdown."""
        assert self.project is not None and self.empty is not None and self.turns
        return (self.project.cpu - self.empty.cpu) / self.turns * 1000

    def to_json(self) -> dict[str, Any]:
        """The JSON line the measuring process prints."""

        def usage(u: Measured | None) -> dict[str, float] | None:
            return None if u is None else {"wall": u.wall, "cpu": u.cpu, "rss_mb": u.rss_mb}

        return {
            "skipped": self.skipped,
            "turns": self.turns,
            "project": usage(self.project),
            "empty": usage(self.empty),
            "operations": self.operations,
            "notes": list(self.notes),
            "local": None if self.local is None else [usage(u) for u in self.local],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> AzureRun:
        """Read back what `to_json` wrote."""

        def usage(u: dict[str, float] | None) -> Measured | None:
            return None if u is None else Measured(u["wall"], u["cpu"], u["rss_mb"])

        local = data.get("local")
        pair = None
        if local is not None:
            turns, empty = usage(local[0]), usage(local[1])
            assert turns is not None and empty is not None
            pair = (turns, empty)
        return AzureRun(
            data["skipped"],
            int(data.get("turns", 0)),
            usage(data.get("project")),
            usage(data.get("empty")),
            data.get("operations") or {},
            tuple(data.get("notes") or ()),
            pair,
        )


def parse_output(stdout: str) -> AzureRun:
    """The AzureRun on the last line of the measuring process's stdout."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        return AzureRun("not run: the measuring process printed nothing")
    return AzureRun.from_json(json.loads(lines[-1]))


# --------------------------------------------------------------------------------------
# Report lines for results.md
# --------------------------------------------------------------------------------------
def summary_cells(az: AzureRun, local_ms: float) -> tuple[str, str, str, str]:
    """(what, this project, the limit, ratio) of the az row of the goals table."""
    if az.skipped:
        what = (
            "the headline turns on the Azure backend (Service Bus test broker, Azurite, "
            "cosmosdb-server), ratio to local"
        )
        return what, az.skipped, "—", "—"
    what = f"{az.turns} headline turns on the Azure backend (stand-ins), ms/turn net of start-up"
    ratio = f"{az.ms() / local_ms:.1f}x" if local_ms > 0 else "n/a"
    return what, f"{az.ms():.1f} ms", f"local {local_ms:.1f} ms (case d)", ratio


def operations_section(az: AzureRun) -> list[str]:
    """The per-turn operations of case az, for results.md."""
    if az.skipped:
        return [f"Case az {az.skipped}."]
    assert az.project is not None and az.empty is not None
    lines = [
        f"Case az: {az.turns} turns, `run --drain` {az.project.wall:.2f} s wall, "
        f"{az.project.cpu:.2f} s CPU, {az.project.rss_mb:.0f} MB peak RSS; on the empty "
        f"queue {az.empty.wall:.2f} s, {az.empty.cpu:.2f} s CPU, {az.empty.rss_mb:.0f} MB. "
        f"Per turn net of that: {az.ms():.1f} ms wall, {az.cpu_ms():.1f} ms CPU of the worker "
        "(the stand-ins' own CPU is not in it).",
        "",
        "Operations per turn (the turns' run minus the empty run, over the turns; "
        "justification of each: [docs/capacity.md](../docs/capacity.md)):",
        "",
        "| service | operation | per turn | bytes sent | bytes received |",
        "|---|---|---|---|---|",
    ]
    for service, ops in az.operations.items():
        for operation, figures in ops.items():
            sent, received = figures.get("sent", 0), figures.get("received", 0)
            if "bytes" in figures:  # the broker's: message bytes, sent or delivered
                delivered = operation.startswith("deliver")
                sent, received = (0, figures["bytes"]) if delivered else (figures["bytes"], 0)
            count = figures["count"]
            lines.append(f"| {service} | {operation} | {count:g} | {sent:,.0f} | {received:,.0f} |")
    lines += ["", *(f"- {note}" for note in az.notes)]
    return lines
