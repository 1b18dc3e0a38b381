"""The spans a server keeps for its ``/debug/trace`` routes: rxllm's own OpenTelemetry spans.

:class:`SpanStore` is an OpenTelemetry span processor that keeps the last ``max_spans`` finished
spans in memory (ADK Python's dev server keeps its spans the same way, in an in-memory exporter).
A session's trace is every span of the traces whose ``invoke_agent`` span names the session
(``gen_ai.conversation.id``); an event's trace is the span that produced it: the model call
(``chat ...``) for a model response, the tool execution (``execute_tool ...``) for a tool result.

The JSON is ADK Python's:

* ``/debug/trace/session/{session_id}``: a list of spans, each ``name``, ``span_id``,
  ``trace_id``, ``start_time``, ``end_time`` (nanoseconds), ``attributes``, ``parent_span_id`` and
  ``logs`` (always empty: rxllm records no log events).
* ``/debug/trace/{event_id}``: the producing span's attributes, plus ``trace_id`` and ``span_id``.

ADK tags its spans with ``gcp.vertex.agent.event_id`` and ``gcp.vertex.agent.invocation_id``
(its dev UI links spans to events by them); rxllm's spans carry ``rxllm.invocation_id`` on the
agent span, so the server adds both attributes to the spans it serves from what it saw stream
(:class:`EventLinks`).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["EventLink", "EventLinks", "SpanStore"]

EVENT_ID = "gcp.vertex.agent.event_id"
INVOCATION_ID = "gcp.vertex.agent.invocation_id"
_MODEL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})


@dataclass(frozen=True)
class EventLink:
    """Which span produced an event: the ``ordinal``-th model call of the invocation, or the tool
    execution of call ``call_id``."""

    event_id: str
    invocation_id: str
    ordinal: int | None = None
    call_id: str | None = None


class EventLinks:
    """The events a server streamed, by id and by invocation (bounded, thread-safe)."""

    def __init__(self, max_events: int = 50_000) -> None:
        self._max = max_events
        self._by_event: collections.OrderedDict[str, EventLink] = collections.OrderedDict()
        self._by_invocation: dict[str, list[EventLink]] = {}
        self._model_calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, event_id: str, invocation_id: str, *, is_user: bool, partial: bool,
            response_ids: Iterable[str | None]) -> None:
        """Record a streamed event: a tool result links to its call's span, a model event to the
        invocation's next (partial: current) model call."""
        if not invocation_id or is_user:
            return
        with self._lock:
            if event_id in self._by_event:
                return
            calls = [call for call in response_ids if call]
            if calls:
                link = EventLink(event_id, invocation_id, call_id=calls[0])
            else:
                ordinal = self._model_calls.get(invocation_id, 0)
                link = EventLink(event_id, invocation_id, ordinal=ordinal)
                if not partial:
                    self._model_calls[invocation_id] = ordinal + 1
            self._by_event[event_id] = link
            self._by_invocation.setdefault(invocation_id, []).append(link)
            while len(self._by_event) > self._max:
                _, old = self._by_event.popitem(last=False)
                kept = self._by_invocation.get(old.invocation_id)
                if kept is not None:
                    kept.remove(old)
                    if not kept:
                        del self._by_invocation[old.invocation_id]
                        self._model_calls.pop(old.invocation_id, None)

    def get(self, event_id: str) -> EventLink | None:
        with self._lock:
            return self._by_event.get(event_id)

    def of_invocation(self, invocation_id: str) -> list[EventLink]:
        with self._lock:
            return list(self._by_invocation.get(invocation_id, ()))


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

    def session_spans(self, session_id: str, links: EventLinks | None = None) -> list[dict[str, Any]]:
        """Every span of the runs on ``session_id``, by start time, in ADK's JSON (see the module doc)."""
        spans = self._snapshot()
        traces = {
            span.context.trace_id
            for span in spans
            if (span.attributes or {}).get("gen_ai.conversation.id") == session_id
        }
        chosen = [span for span in _by_start(spans) if span.context.trace_id in traces]
        tags = _event_tags(chosen, links) if links is not None else {}
        return [_as_json(span, tags.get(span.context.span_id)) for span in chosen]

    def invocation_spans(self, invocation_id: str) -> list[Any]:
        """Every span of the trace whose agent span carries ``rxllm.invocation_id`` = ``invocation_id``."""
        spans = self._snapshot()
        traces = {
            span.context.trace_id
            for span in spans
            if (span.attributes or {}).get("rxllm.invocation_id") == invocation_id
        }
        return [span for span in _by_start(spans) if span.context.trace_id in traces]

    def event_trace(self, link: EventLink) -> dict[str, Any] | None:
        """ADK's ``/debug/trace/{event_id}`` answer: the producing span's attributes, ``trace_id``, ``span_id``."""
        span = _producer(self.invocation_spans(link.invocation_id), link)
        if span is None:
            return None
        attributes = _attributes(span)
        attributes[EVENT_ID] = link.event_id
        attributes[INVOCATION_ID] = link.invocation_id
        attributes["trace_id"] = span.context.trace_id
        attributes["span_id"] = span.context.span_id
        return attributes


def _model_spans(spans: list[Any]) -> list[Any]:
    """The invocation's model calls, in order: one span each (of a retried call, its last attempt)."""
    calls = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") in _MODEL_OPERATIONS]
    kept: list[Any] = []
    for span in calls:
        retried = (span.attributes or {}).get("rxllm.outcome") == "error" and any(
            later.parent is not None and span.parent is not None and later.parent.span_id == span.parent.span_id
            and later.start_time > span.start_time for later in calls)
        if not retried:
            kept.append(span)
    return kept


def _producer(spans: list[Any], link: EventLink) -> Any:
    if link.call_id is not None:
        return next((s for s in spans if (s.attributes or {}).get("gen_ai.tool.call.id") == link.call_id), None)
    calls = _model_spans(spans)
    if link.ordinal is None or not calls:
        return None
    return calls[min(link.ordinal, len(calls) - 1)]


def _event_tags(spans: list[Any], links: EventLinks) -> dict[int, tuple[str | None, str]]:
    """span id -> (event id or None, invocation id), for the spans of the given traces."""
    tags: dict[int, tuple[str | None, str]] = {}
    by_trace: dict[int, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    for trace in by_trace.values():
        invocations = {(s.attributes or {}).get("rxllm.invocation_id") for s in trace} - {None}
        for invocation in invocations:
            for span in trace:
                tags.setdefault(span.context.span_id, (None, str(invocation)))
            for link in links.of_invocation(str(invocation)):
                producer = _producer(trace, link)
                if producer is not None:  # a model call's final event comes after its partials: it wins
                    tags[producer.context.span_id] = (link.event_id, link.invocation_id)
    return tags


def _by_start(spans: list[Any]) -> list[Any]:
    return sorted(spans, key=lambda span: span.start_time or 0)


def _attributes(span: Any) -> dict[str, Any]:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in (span.attributes or {}).items()}


def _as_json(span: Any, tag: tuple[str | None, str] | None = None) -> dict[str, Any]:
    attributes = _attributes(span)
    if tag is not None:
        event_id, invocation_id = tag
        attributes.setdefault(INVOCATION_ID, invocation_id)
        if event_id is not None:
            attributes[EVENT_ID] = event_id
    return {
        "name": span.name,
        "span_id": span.context.span_id,
        "trace_id": span.context.trace_id,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "attributes": attributes,
        "parent_span_id": span.parent.span_id if span.parent is not None else None,
        "logs": [],
    }
