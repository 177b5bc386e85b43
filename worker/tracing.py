"""Traces, optional (`pip install '.[otel]'`): one span per turn, continuing the trace of the
chat service that sent the event, with a child span per read, fetch, upload and publish.

Without OpenTelemetry installed, or with no exporter configured, every call here is a
no-op, so the runtime calls it unconditionally. The exporter is chosen by the standard
variables: `OTEL_TRACES_EXPORTER` (e.g. `otlp`, `console`) or an `OTEL_EXPORTER_OTLP_*`
endpoint, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_PROPAGATORS`; with
`APPLICATIONINSIGHTS_CONNECTION_STRING` set and `azure-monitor-opentelemetry` installed,
Azure Monitor's distro is configured instead.

Spans carry ids, never row data: an exception is recorded as its type only (the SDK's
default records the message, which may quote rows).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from worker.logs import get_logger
from worker.observer import AttributeValue, Step

SERVICE_NAME = "turn-export-worker"
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
# Service Bus SDKs put the W3C traceparent of the sender here.
DIAGNOSTIC_ID = "Diagnostic-Id"
ATTRIBUTE_PREFIX = "export_worker."


class TurnSpan:
    """The span of one turn; ids learned during the turn (the export id) are added here."""

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def annotate(self, **attributes: AttributeValue | None) -> None:
        """Add ids or enums (never values) as attributes, e.g. export_id, decision."""
        if self._span is None:
            return
        for name, value in attributes.items():
            if value is not None:
                self._span.set_attribute(ATTRIBUTE_PREFIX + name, value)


class Tracing:
    """Spans for the runtime and the handler; `Tracing()` does nothing."""

    def __init__(self, tracer: Any = None, provider: Any = None) -> None:
        """`tracer`: an OpenTelemetry tracer (None: no-op); `provider`: flushed by close()."""
        self._tracer = tracer
        self._provider = provider

    @property
    def enabled(self) -> bool:
        """Whether spans are recorded."""
        return self._tracer is not None

    @contextlib.contextmanager
    def turn(
        self,
        properties: Mapping[str, Any],
        *,
        conversation_id: str,
        turn_id: str = "",
        event_id: str = "",
        message_id: str = "",
    ) -> Iterator[TurnSpan]:
        """The span of one delivery, child of the sender's trace when `properties` (the
        message's application properties) carry one. Ids not known yet (empty) are left
        out; the handler adds them with `annotate` once it has parsed the event."""
        if self._tracer is None:
            yield TurnSpan()
            return
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind

        parent = propagate.extract(_incoming_carrier(properties))
        attributes: dict[str, AttributeValue] = {
            "messaging.system": "servicebus",
            "messaging.operation.type": "process",
        }
        ids = {"conversation_id": conversation_id, "turn_id": turn_id, "event_id": event_id}
        attributes.update({ATTRIBUTE_PREFIX + k: v for k, v in ids.items() if v})
        if message_id:
            attributes["messaging.message.id"] = message_id
        with self._span("turn", parent, SpanKind.CONSUMER, attributes) as span:
            yield TurnSpan(span)

    @contextlib.contextmanager
    def step(self, name: Step, **attributes: AttributeValue) -> Iterator[None]:
        """A child span of the current one around reads, the fetch, the upload, the publish."""
        if self._tracer is None:
            yield
            return
        from opentelemetry.trace import SpanKind

        kind = SpanKind.PRODUCER if name == "publish" else SpanKind.INTERNAL
        named = {ATTRIBUTE_PREFIX + k: v for k, v in attributes.items()}
        with self._span(name, None, kind, named):
            yield

    def annotate(self, **attributes: AttributeValue | None) -> None:
        """Add ids or enums (never values) to the current span: inside the handler, outside
        any step, the turn's."""
        if self._tracer is None:
            return
        from opentelemetry import trace

        TurnSpan(trace.get_current_span()).annotate(**attributes)

    def outgoing(self, properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """`properties` plus the current trace context (traceparent, tracestate, and the
        same traceparent as Diagnostic-Id for Service Bus consumers), for export.published."""
        carrier: dict[str, Any] = dict(properties or {})
        if self._tracer is None:
            return carrier
        from opentelemetry import propagate

        injected: dict[str, str] = {}
        propagate.inject(injected)
        carrier.update(injected)
        if TRACEPARENT in injected:
            carrier[DIAGNOSTIC_ID] = injected[TRACEPARENT]
        return carrier

    def close(self) -> None:
        """Flush and stop the exporter this object configured (if any)."""
        if self._provider is not None:
            self._provider.shutdown()

    @contextlib.contextmanager
    def _span(
        self, name: str, parent: Any, kind: Any, attributes: Mapping[str, AttributeValue]
    ) -> Iterator[Any]:
        from opentelemetry.trace import Status, StatusCode

        with self._tracer.start_as_current_span(
            name,
            context=parent,
            kind=kind,
            attributes=dict(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                span.set_attribute("exception.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise


def _incoming_carrier(properties: Mapping[str, Any]) -> dict[str, str]:
    """The trace headers of a received message: traceparent, else the Diagnostic-Id."""
    carrier: dict[str, str] = {}
    traceparent = _text(properties.get(TRACEPARENT)) or _text(properties.get(DIAGNOSTIC_ID))
    if traceparent:
        carrier[TRACEPARENT] = traceparent
        tracestate = _text(properties.get(TRACESTATE))
        if tracestate:
            carrier[TRACESTATE] = tracestate
    return carrier


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else ""


# --------------------------------------------------------------------------------------
def from_provider(provider: Any) -> Tracing:
    """Tracing through an OpenTelemetry tracer provider (tests pass one with an in-memory
    exporter)."""
    return Tracing(provider.get_tracer(SERVICE_NAME))


def configure_tracing(environ: Mapping[str, str] | None = None) -> Tracing:
    """Tracing as the standard environment variables say; a no-op when OpenTelemetry is
    not installed or nothing is configured to receive spans."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Tracing()
    names = _exporter_names(env)
    if not names and not env.get("APPLICATIONINSIGHTS_CONNECTION_STRING"):
        # Nothing receives spans: the SDK is not even imported (~0.1 s of start-up).
        return Tracing()
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        # Spans were asked for: say why none will come rather than drop them unseen.
        get_logger().warning("tracing_not_installed", extra="otel")
        return Tracing()
    if env.get("APPLICATIONINSIGHTS_CONNECTION_STRING"):
        try:
            from azure.monitor.opentelemetry import configure_azure_monitor
        except ImportError:
            get_logger().warning("tracing_azure_monitor_not_installed")
        else:
            configure_azure_monitor()  # reads the connection string from the environment
            return Tracing(trace.get_tracer(SERVICE_NAME))
    if not names:
        return Tracing()
    resource = Resource.create({} if "OTEL_SERVICE_NAME" in env else {"service.name": SERVICE_NAME})
    provider = TracerProvider(resource=resource)
    for name in names:
        exporter = _exporter(name)
        if exporter is None:
            get_logger().warning("tracing_exporter_unknown", exporter=name)
            continue
        provider.add_span_processor(BatchSpanProcessor(exporter()))
    return Tracing(provider.get_tracer(SERVICE_NAME), provider)


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    """Exporters named by OTEL_TRACES_EXPORTER; `otlp` when only an OTLP endpoint is set."""
    named = env.get("OTEL_TRACES_EXPORTER", "").strip()
    if named:
        return [n.strip() for n in named.split(",") if n.strip() and n.strip() != "none"]
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def _exporter(name: str) -> Any:
    """The span exporter class registered under `name` (the SDK's entry-point group);
    `otlp` falls back to the HTTP exporter the `otel` extra installs."""
    from importlib.metadata import entry_points

    candidates = [name, "otlp_proto_http"] if name == "otlp" else [name]
    for candidate in candidates:
        for point in entry_points(group="opentelemetry_traces_exporter", name=candidate):
            return point.load()
    return None
