"""The reliability harnesses' knobs: a settings group of their own, all off unless set.

Read like the worker's `Settings` (prefix `EXPORT_WORKER_`, also from `.env`) but kept apart
from them: production code never sees these. The CLI reads them when a command starts and
passes what they build (a checkpoint, fault injection) in explicitly.

| variable | effect |
|---|---|
| `CRASH_POINTS` | `name:probability,…`: exit 137 at a named point (`worker/checkpoints.py`) |
| `CRASH_SEED` | seeds the crash draws |
| `SLOW_POINTS` | `name:seconds,…`: wait there |
| `FAULT_RATE`, `FAULT_SEED` | every port call fails transiently at that rate (`faults.py`) |
"""

from __future__ import annotations

from collections.abc import Callable

from worker.checkpoints import Checkpoint, no_checkpoint
from worker.environment import EnvSettings, Setting, integer, number, optional, text
from worker.logs import get_logger
from worker.ports import Backend
from worker.testing.checkpoints import CrashAndSlowPoints, parse_points
from worker.testing.faults import FaultPlan, with_faults

PREFIX = "EXPORT_WORKER_"


class HarnessSettings(EnvSettings):
    """Crash points, slow points and fault injection for the reliability harnesses."""

    crash_points = Setting("", text)
    crash_seed = Setting(None, optional(integer()))
    slow_points = Setting("", text)
    fault_rate = Setting(0.0, number(ge=0, lt=1))
    fault_seed = Setting(None, optional(integer()))

    def checkpoint(self) -> Checkpoint:
        """The crash and slow points configured, or `no_checkpoint` when none are."""
        crash = parse_points(self.crash_points, f"{PREFIX}CRASH_POINTS")
        slow = parse_points(self.slow_points, f"{PREFIX}SLOW_POINTS")
        if not crash and not slow:
            return no_checkpoint
        return CrashAndSlowPoints(crash, slow, self.crash_seed)

    def fault_injection(self) -> Callable[[Backend], Backend] | None:
        """What wraps the adapters in fault injection, or None when the rate is 0."""
        if self.fault_rate <= 0:
            return None
        plan = FaultPlan(self.fault_rate, self.fault_seed)

        def inject(backend: Backend) -> Backend:
            get_logger().warning(
                "fault_injection_enabled",
                fault_rate=self.fault_rate,
                fault_seed=self.fault_seed,
                detail="every port call may fail with a transient error: for tests only",
            )
            return with_faults(backend, plan)

        return inject
