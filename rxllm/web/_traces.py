"""The spans a server keeps for its ``/debug/trace`` routes: rxllm's own OpenTelemetry spans.

:class:`SpanStore` is an OpenTelemetry span processor that keeps the last ``max_spans`` finished
spans in memory (ADK Python's dev server keeps its spans the same way, in an in-memory exporter).
A session's trace is every span of the traces whose ``invoke_agent`` span names the session
(``gen_ai.conversation.id``); an event's trace is the spans of the invocation that produced it.
Spans are serialised as ADK's ``/debug/trace/session`` answers them: ``name``, ``span_id``,
``trace_id``, ``start_time``, ``end_time`` (nanoseconds), ``attributes``, ``parent_span_id``.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

__all__ = ["SpanStore"]


class SpanStore:
    """A bounded, thread-safe store of finished spans; :meth:`processor` feeds it from a tracer provider."""

    def __init__(self, max_spans: int = 20_000) -> None:
        self._spans: collections.deque[Any] = collections.deque(maxlen=max_spans)
        self._lock = threading.Lock()

    def add(self, span: Any) -> None:
        """Keep a finished span (the oldest goes when the store is full)."""
        with self._lock:
            self._spans.append(span)

    def processor(self) -> Any:
        """An opentelemetry-sdk ``SpanProcessor`` that adds every finished span here."""
        from opentelemetry.sdk.trace import SpanProcessor

        store = self

        class _Keep(SpanProcessor):
            def on_end(self, span: Any) -> None:
                store.add(span)

        return _Keep()

    def _snapshot(self) -> list[Any]:
        with self._lock:
            return list(self._spans)

    def session_spans(self, session_id: str) -> list[dict[str, Any]]:
        """Every span of the runs on ``session_id``, by start time."""
        spans = self._snapshot()
        traces = {
            span.context.trace_id
            for span in spans
            if (span.attributes or {}).get("gen_ai.conversation.id") == session_id
        }
        return [_as_json(span) for span in _by_start(spans) if span.context.trace_id in traces]

    def invocation_spans(self, invocation_id: str) -> list[dict[str, Any]]:
        """Every span of the trace whose agent span carries ``rxllm.invocation_id`` = ``invocation_id``."""
        spans = self._snapshot()
        traces = {
            span.context.trace_id
            for span in spans
            if (span.attributes or {}).get("rxllm.invocation_id") == invocation_id
        }
        return [_as_json(span) for span in _by_start(spans) if span.context.trace_id in traces]


def _by_start(spans: list[Any]) -> list[Any]:
    return sorted(spans, key=lambda span: span.start_time or 0)


def _as_json(span: Any) -> dict[str, Any]:
    attributes = {key: list(value) if isinstance(value, tuple) else value
                  for key, value in (span.attributes or {}).items()}
    return {
        "name": span.name,
        "span_id": span.context.span_id,
        "trace_id": span.context.trace_id,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "attributes": attributes,
        "parent_span_id": span.parent.span_id if span.parent is not None else None,
    }
