"""Operations whose spans are kept in memory: what the span tests of this folder share."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from worker.metrics import Recorder
from worker.operations import Operations
from worker.tracing import from_provider


def traced(metrics: Recorder) -> tuple[Operations, InMemorySpanExporter, TracerProvider]:
    """Operations with `metrics` and spans kept in memory (shut the provider down after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Operations(metrics, tracing=from_provider(provider)), exporter, provider


def turn_spans(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    """The attributes of each finished turn span."""
    return [dict(s.attributes or {}) for s in exporter.get_finished_spans() if s.name == "turn"]
