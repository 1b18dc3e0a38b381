"""What the OpenTelemetry tests share: in-memory span and metric capture through rxllm's explicit seam.

The SDK's global tracer provider can be set only once per process, so the tests never set it:
each test gets its own ``TracerProvider`` and ``MeterProvider`` and hands them to
:func:`rxllm.configure_telemetry` (the documented seam), which is reset afterwards. The global,
zero-configuration path is tested in a subprocess.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import rxllm

WAIT = 10.0


class _Ended(SpanProcessor):
    """Wakes waiters whenever a span ends (no sleeps: a condition variable)."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        with self.condition:
            self.count += 1
            self.condition.notify_all()


class Telemetry:
    """One test's providers, exporter and metric reader."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self._ended = _Ended()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer_provider.add_span_processor(self._ended)
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    def spans(self, count: int | None = None) -> list[ReadableSpan]:
        """The finished spans (first waiting until ``count`` have ended), in end order."""
        if count is not None:
            with self._ended.condition:
                ok = self._ended.condition.wait_for(lambda: self._ended.count >= count, WAIT)
            assert ok, f"expected {count} finished spans, got {self._ended.count}"
        return list(self.exporter.get_finished_spans())

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"{len(found)} spans named {name!r} in {[s.name for s in self.spans()]}"
        return found[0]

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Metric name -> [(attributes, data point)]."""
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data is not None else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    for point in metric.data.data_points:
                        out.setdefault(metric.name, []).append((dict(point.attributes or {}), point))
        return out


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    captured = Telemetry()
    rxllm.configure_telemetry(tracer_provider=captured.tracer_provider, meter_provider=captured.meter_provider)
    try:
        yield captured
    finally:
        rxllm.configure_telemetry()
        captured.tracer_provider.shutdown()
        captured.meter_provider.shutdown()


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The spans as an indented tree of names (children in start order)."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None and span.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            lines.append("  " * depth + span.name)
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan | trace.Span) -> int:
    context = span.get_span_context() if isinstance(span, trace.Span) else span.context
    assert context is not None
    return context.span_id
