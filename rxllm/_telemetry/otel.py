"""OpenTelemetry GenAI spans and metrics: model calls, agent runs, tool executions, service turns.

``opentelemetry-api`` is an optional extra (``pip install rxllm[otel]``). Nothing here imports it
until the first model call, agent run, tool execution or service turn, and then only once; when
it is not installed (or telemetry is switched off) every hook below is ``None`` and callers take
exactly their uninstrumented path: no import, no cost.

With the API installed, spans and metrics go to the application's global tracer and meter
providers (``trace.set_tracer_provider`` ...) with no further call; without a configured SDK the
API's no-op providers make them free. :func:`configure_telemetry` switches it all off, passes
providers explicitly, or opts in to recording message contents.

What is made (the OpenTelemetry GenAI semantic conventions):

* ``chat {model}`` (``generate_content {model}`` for Gemini), kind CLIENT: one span per model
  call attempt that reached the wire. A retried call is sibling spans, each with
  ``rxllm.attempt``. Parented under the span that was current when the call was *subscribed*
  (captured on the subscribing thread, whatever thread or loop does the I/O).
* ``invoke_agent {agent}`` around an agent's run, ``execute_tool {tool}`` around each tool
  execution, ``invoke_agent AiService`` around a service turn; model calls and tools nest inside.
* Every span ends with ``rxllm.outcome`` = ``ok`` / ``error`` / ``cancelled``. Status ``UNSET``
  on success, ``ERROR`` (with ``error.type``) on failure, ``UNSET`` when the subscriber disposed.
* Metrics ``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration`` and
  ``gen_ai.client.operation.time_to_first_chunk`` (streamed calls), per attempt.
* The trace context on the wire: each attempt's request carries a W3C ``traceparent`` naming the
  attempt's span (and whatever else the application's propagators carry: ``tracestate``,
  ``baggage``; ``OTEL_PROPAGATORS``), so the server's spans join the caller's trace on either HTTP
  stack, with or without an HTTP client instrumentation. The model layer adds these headers when
  it builds the request (:meth:`AttemptTelemetry.trace_headers`); the transports know nothing of
  OpenTelemetry.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable, SingleAssignmentDisposable

from .._core import prevalidated
from .._core.errors import HttpStatusError, ToolError
from .._core.redact import redact_secrets, redact_value
from .._core.types import Content, FunctionCall, FunctionResponse, LlmRequest, LlmResponse, UsageMetadata
from .._rx.direct import Direct, defer_now
from ._environ import ENVIRON_TYPE, EnvVar

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "TELEMETRY_ENV",
    "AttemptTelemetry",
    "ModelCallTelemetry",
    "Otel",
    "TracedScope",
    "add_usage",
    "configure_telemetry",
    "current_context",
    "model_call",
    "otel",
    "record_tool_result",
    "tool_attributes",
    "traced",
    "usage_attributes",
    "within",
]

TELEMETRY_ENV = "RXLLM_TELEMETRY"
"""Set to ``off`` (or ``0``, ``false``, ``no``) to make no span and no metric at all."""

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The conventions' opt-in for recording message contents (``true``); off by default."""

_OFF = frozenset({"off", "0", "false", "no", "disabled"})
_ON = frozenset({"on", "1", "true", "yes", "span_only", "span_and_event"})
_SCOPE = "rxllm"
_UNSET_METER_PROVIDERS = frozenset({"_ProxyMeterProvider", "NoOpMeterProvider"})
_TRACER_PROVIDER_ENV = EnvVar("OTEL_PYTHON_TRACER_PROVIDER")  # (opentelemetry.environment_variables' names)
_METER_PROVIDER_ENV = EnvVar("OTEL_PYTHON_METER_PROVIDER")
_T = TypeVar("_T")

_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_PROVIDER_NAMES = {"gemini": "gcp.gemini"}
_OPERATION_NAMES = {"gemini": "generate_content"}


@dataclass(frozen=True, slots=True)
class _Settings:
    enabled: bool | None = None
    tracer_provider: Any = None
    meter_provider: Any = None
    capture_message_content: bool | None = None


class Otel:
    """The imported API, this process's tracer and instruments (built once per configuration)."""

    def __init__(self, settings: _Settings) -> None:
        from opentelemetry import context, metrics, trace
        from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, Status, StatusCode

        self.context = context
        self.trace = trace
        self._metrics = metrics
        self._inject: Callable[..., None] | None = None  # opentelemetry.propagate.inject, on first use
        self._explicit = settings.tracer_provider is not None or settings.meter_provider is not None
        self._unset_tracer_providers = (ProxyTracerProvider, NoOpTracerProvider)
        self._globals = _provider_globals(trace)
        self.client_kind = SpanKind.CLIENT
        self.internal_kind = SpanKind.INTERNAL
        self.status_class = Status
        self.status_error = StatusCode.ERROR
        tracer_provider = settings.tracer_provider or trace.get_tracer_provider()
        meter_provider = settings.meter_provider or metrics.get_meter_provider()
        self.tracer = tracer_provider.get_tracer(_SCOPE)
        meter = meter_provider.get_meter(_SCOPE)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self.time_to_first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk of a streamed response",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        capture = settings.capture_message_content
        if capture is None:
            capture = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _ON
        self.capture_content = capture

    def recording(self) -> bool:
        """Whether a span or a metric could be recorded now: a provider was given to
        :func:`configure_telemetry`, or the application set a global tracer or meter provider
        (checked on each call, so one set later is picked up). With the API installed and no
        provider set, everything would be a no-op: rxllm then builds no telemetry object at all
        (about 1.2 KiB per open stream).

        This runs for every model call, tool call and run: it reads the providers the API holds
        (the globals ``set_tracer_provider`` / ``set_meter_provider`` set) and asks
        ``get_tracer_provider()`` / ``get_meter_provider()`` only when one is unset and the
        environment names one to load (``OTEL_PYTHON_TRACER_PROVIDER``, ...), which is exactly
        when they would load it; otherwise they return the API's unset proxy."""
        if self._explicit:
            return True
        holder = self._globals
        if holder is None:  # an API without the globals read here: ask it
            tracer_provider = self.trace.get_tracer_provider()
            meter_provider = self._metrics.get_meter_provider()
        else:
            trace_globals, metrics_globals = holder
            tracer_provider = trace_globals._TRACER_PROVIDER
            meter_provider = metrics_globals._METER_PROVIDER
            if tracer_provider is None or meter_provider is None:  # (EnvVar.is_set, inlined: no call)
                environ = os.environ
                if type(environ) is ENVIRON_TYPE:
                    data = environ._data  # type: ignore[attr-defined]
                    tracer_named, meter_named = _TRACER_PROVIDER_ENV.key in data, _METER_PROVIDER_ENV.key in data
                else:
                    tracer_named = _TRACER_PROVIDER_ENV.name in environ
                    meter_named = _METER_PROVIDER_ENV.name in environ
                if tracer_provider is None and tracer_named:
                    tracer_provider = self.trace.get_tracer_provider()
            if tracer_provider is not None and not isinstance(tracer_provider, self._unset_tracer_providers):
                return True
            if meter_provider is None:
                if not meter_named:
                    return False  # the API's unset proxy
                meter_provider = self._metrics.get_meter_provider()
            return type(meter_provider).__name__ not in _UNSET_METER_PROVIDERS
        if not isinstance(tracer_provider, self._unset_tracer_providers):
            return True
        # The API's unset meter provider is a private proxy class; the no-op one is public.
        return type(meter_provider).__name__ not in _UNSET_METER_PROVIDERS

    def current(self) -> Any:
        """The OpenTelemetry context current on this thread (or task)."""
        return self.context.get_current()

    def inject(self, carrier: dict[str, str], context: Any) -> None:
        """Write ``context``'s propagation fields into ``carrier`` with the application's global
        propagators. ``opentelemetry.propagate`` (which reads ``OTEL_PROPAGATORS`` and loads the
        propagators' entry points, ~8 ms) is imported on the first request sent under a span."""
        inject = self._inject
        if inject is None:
            from opentelemetry import propagate

            inject = self._inject = propagate.inject
        inject(carrier, context=context)

    def end(self, span: Any, error: BaseException | None, cancelled: bool) -> str | None:
        """End ``span`` with rxllm's outcome; returns the ``error.type`` it recorded (None on success)."""
        error_type: str | None = None
        if cancelled:
            span.set_attribute("rxllm.outcome", "cancelled")
            error_type = "cancelled"
        elif error is not None:
            error_type = error_type_of(error)
            span.set_attribute("rxllm.outcome", "error")
            span.set_attribute("error.type", error_type)
            # Redacted here, whoever redacts the error later: the span is written now.
            span.set_status(self.status_class(self.status_error, redact_secrets(f"{type(error).__name__}: {error}")))
        else:
            span.set_attribute("rxllm.outcome", "ok")
        span.end()
        return error_type


def _provider_globals(trace: Any) -> tuple[Any, Any] | None:
    """The API's modules holding the global providers (``_TRACER_PROVIDER``, ``_METER_PROVIDER``),
    or None when this API keeps them elsewhere (then :meth:`Otel.recording` asks its getters)."""
    try:
        from opentelemetry.metrics import _internal as metrics_globals
    except ImportError:
        return None
    if not hasattr(trace, "_TRACER_PROVIDER") or not hasattr(metrics_globals, "_METER_PROVIDER"):
        return None
    return trace, metrics_globals


_lock = threading.Lock()
_settings = _Settings()
_UNRESOLVED: Any = object()
_resolved: Otel | None = _UNRESOLVED


def configure_telemetry(
    *,
    enabled: bool | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_message_content: bool | None = None,
) -> None:
    """Configure rxllm's OpenTelemetry spans and metrics (each call replaces the whole configuration).

    Nothing needs calling when ``opentelemetry-api`` is installed and the application set its
    global providers: spans and metrics then appear on their own. Calling with no argument
    restores that default.

    Args:
        enabled: ``False`` turns every span and metric off (as ``RXLLM_TELEMETRY=off`` does);
            ``None`` follows the environment variable (on unless it says ``off``).
        tracer_provider: the ``TracerProvider`` to use instead of the global one.
        meter_provider: the ``MeterProvider`` to use instead of the global one.
        capture_message_content: ``True`` records the messages, the answer and tool arguments
            and results on the spans; ``None`` follows
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (off unless ``true``). API
            keys are never recorded.

    >>> import rxllm
    >>> rxllm.configure_telemetry(enabled=False)  # no span, no metric, OpenTelemetry never imported
    >>> rxllm.configure_telemetry()  # back to the default: the global providers, if any
    """
    global _settings, _resolved
    with _lock:
        _settings = _Settings(enabled, tracer_provider, meter_provider, capture_message_content)
        _resolved = _UNRESOLVED


def otel() -> Otel | None:
    """The telemetry hooks, or ``None`` when OpenTelemetry is absent, switched off, or has no
    provider to record into (then: do nothing)."""
    resolved = _resolved
    if resolved is _UNRESOLVED:
        resolved = _resolve()
    if resolved is None or not resolved.recording():
        return None
    return resolved


def _resolve() -> Otel | None:
    global _resolved
    with _lock:
        if _resolved is not _UNRESOLVED:
            return _resolved
        settings = _settings
        enabled = settings.enabled
        if enabled is None:
            enabled = os.environ.get(TELEMETRY_ENV, "").strip().lower() not in _OFF
        resolved: Otel | None = None
        if enabled:
            try:
                resolved = Otel(settings)
            except ImportError:
                resolved = None
        _resolved = resolved
        return resolved


def error_type_of(error: BaseException) -> str:
    """``error.type``: the HTTP status for status errors, else the exception's class name."""
    if isinstance(error, HttpStatusError) and error.status_code is not None:
        return str(error.status_code)
    return type(error).__qualname__


# -- model calls -------------------------------------------------------------------------------


class ModelCallTelemetry:
    """One subscription of one model call: the parent context and the request's attributes.

    Made on the subscribing thread (so the parent is the span current there); each attempt that
    reaches the wire gets an :class:`AttemptTelemetry` and its own span.
    """

    __slots__ = ("_attempts", "_attributes", "_metric_attributes", "_name", "_otel", "_parent", "_request", "_stream")

    def __init__(self, otel: Otel, *, provider: str, model: str, request: LlmRequest, stream: bool) -> None:
        self._otel = otel
        self._parent = otel.current()
        self._attempts = 0
        self._stream = stream
        self._request = request
        operation = _OPERATION_NAMES.get(provider, "chat")
        self._name = f"{operation} {model}"
        self._metric_attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": _PROVIDER_NAMES.get(provider, provider),
            "gen_ai.request.model": model,
        }
        attributes = dict(self._metric_attributes)
        config = request.config
        for key, value in (
            ("gen_ai.request.temperature", config.temperature),
            ("gen_ai.request.top_p", config.top_p),
            ("gen_ai.request.top_k", config.top_k),
            ("gen_ai.request.max_tokens", config.max_output_tokens),
            ("gen_ai.request.seed", config.seed),
            ("gen_ai.request.choice.count", config.candidate_count),
        ):
            if value is not None:
                attributes[key] = value
        if config.stop_sequences:
            attributes["gen_ai.request.stop_sequences"] = list(config.stop_sequences)
        attributes["rxllm.stream"] = stream
        self._attributes = attributes

    def attempt(self) -> AttemptTelemetry:
        """A new attempt (its span starts with :meth:`AttemptTelemetry.start`)."""
        self._attempts += 1
        return AttemptTelemetry(self, self._attempts)


class AttemptTelemetry:
    """One attempt's span and measurements. Touched only by the thread (or task) doing the attempt."""

    __slots__ = ("_call", "_first_chunk", "_metric_attributes", "_number", "_response", "_span", "_started", "waiting")

    def __init__(self, call: ModelCallTelemetry, number: int) -> None:
        self._call = call
        self._number = number
        self._span: Any = None
        self._started = 0.0
        self._first_chunk: float | None = None
        self._response: LlmResponse | None = None
        self._metric_attributes: dict[str, Any] = call._metric_attributes
        self.waiting = False  # True while the first chunk is awaited (read per chunk: keep it a plain slot)

    def start(self, url: str) -> None:
        """The request is about to go on the wire: start the span (a child of the subscriber's span)."""
        call = self._call
        otel = call._otel
        attributes = dict(call._attributes)
        attributes["rxllm.attempt"] = self._number
        metric_attributes = dict(call._metric_attributes)
        try:
            parts = urlsplit(url)
            if parts.hostname:
                attributes["server.address"] = metric_attributes["server.address"] = parts.hostname
                port = parts.port or (443 if parts.scheme == "https" else 80)
                attributes["server.port"] = metric_attributes["server.port"] = port
        except ValueError:
            pass
        self._metric_attributes = metric_attributes
        span = otel.tracer.start_span(
            redact_secrets(call._name), context=call._parent, kind=otel.client_kind, attributes=_redacted(attributes)
        )
        if otel.capture_content and span.is_recording():
            request = call._request
            if request.config.system_instruction is not None:
                span.set_attribute(
                    "gen_ai.system_instructions", _json(_parts_of(request.config.system_instruction))
                )
            span.set_attribute("gen_ai.input.messages", _json([_message_of(c) for c in request.contents]))
        self._span = span
        self._started = time.perf_counter()
        self.waiting = call._stream

    def trace_headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """``headers`` plus the attempt's trace context for the server (called after :meth:`start`).

        The application's propagators write their fields (W3C ``traceparent`` naming this
        attempt's span, ``tracestate`` and ``baggage`` when there are any), replacing a header of
        the same name in any case. An HTTP client instrumentation below rxllm (OpenTelemetry's
        httpx or httpx2 instrumentation) replaces them in turn with its own client span's, a child
        of this one: the wire carries one ``traceparent`` either way. A failing propagator leaves
        the headers as they were (telemetry never fails a call).
        """
        span = self._span
        if span is None:
            return headers
        otel = self._call._otel
        carrier: dict[str, str] = {}
        try:
            otel.inject(carrier, otel.trace.set_span_in_context(span, self._call._parent))
        except Exception:
            return headers
        if not carrier:
            return headers
        names = {name.lower() for name in carrier}
        merged = {name: value for name, value in headers.items() if name.lower() not in names}
        merged.update(carrier)
        return merged

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """Make the attempt's span current while the request is sent (an HTTP client instrumentation
        then nests its span under it). Never around the subscriber's callbacks."""
        span = self._span
        if span is None:
            yield
            return
        otel = self._call._otel
        token = otel.context.attach(otel.trace.set_span_in_context(span, self._call._parent))
        try:
            yield
        finally:
            otel.context.detach(token)

    def first_chunk(self) -> None:
        """The first chunk of a streamed response arrived."""
        self.waiting = False
        if self._span is not None and self._first_chunk is None:
            self._first_chunk = time.perf_counter() - self._started

    def response(self, response: LlmResponse) -> LlmResponse:
        """Keep the final response (its model, finish reason and usage go on the span)."""
        self._response = response
        return response

    def end(self, error: BaseException | None = None, *, cancelled: bool = False) -> None:
        """End the span (idempotent): success, failure, or the subscriber disposed; record the metrics."""
        span = self._span
        if span is None:
            return
        self._span = None
        otel = self._call._otel
        duration = time.perf_counter() - self._started
        metric_attributes = self._metric_attributes
        response = self._response if error is None and not cancelled else None
        if self._first_chunk is not None:
            span.set_attribute("gen_ai.response.time_to_first_chunk", self._first_chunk)
        if response is not None:
            metric_attributes = dict(metric_attributes)
            if response.model_version:
                span.set_attribute("gen_ai.response.model", response.model_version)
                metric_attributes["gen_ai.response.model"] = response.model_version
            if response.response_id:
                span.set_attribute("gen_ai.response.id", response.response_id)
            finish_reason = _finish_reason(response)
            if finish_reason is not None:
                span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
            if response.error_code is not None:
                span.set_attribute("rxllm.response.error_code", response.error_code)
            usage = response.usage_metadata
            if usage is not None:
                usage_attributes(span, usage)
                for token_type, count in (
                    ("input", usage.prompt_token_count),
                    ("output", usage.candidates_token_count),
                ):
                    if count is not None:
                        otel.token_usage.record(count, {**metric_attributes, "gen_ai.token.type": token_type})
            if otel.capture_content and span.is_recording() and response.content is not None:
                message = _message_of(response.content)
                if finish_reason is not None:
                    message["finish_reason"] = finish_reason
                span.set_attribute("gen_ai.output.messages", _json([message]))
        error_type = otel.end(span, error, cancelled)
        if error_type is not None:
            metric_attributes = {**metric_attributes, "error.type": error_type}
        otel.duration.record(duration, metric_attributes)
        if self._first_chunk is not None:
            otel.time_to_first_chunk.record(self._first_chunk, metric_attributes)


def model_call(*, provider: str, model: str, request: LlmRequest, stream: bool) -> ModelCallTelemetry | None:
    """The telemetry of one subscription of a model call, or ``None`` (telemetry off or absent)."""
    hooks = otel()
    if hooks is None:
        return None
    return ModelCallTelemetry(hooks, provider=provider, model=model, request=request, stream=stream)


def _finish_reason(response: LlmResponse) -> str | None:
    """The provider's own finish reason (kept by the aggregator), else genai's, in lower case."""
    raw = (response.custom_metadata or {}).get("finish_reason")
    if isinstance(raw, str):
        return raw
    return response.finish_reason.value.lower() if response.finish_reason is not None else None


def usage_attributes(span: Any, usage: UsageMetadata | None) -> None:
    """Put ``usage``'s token counts on ``span`` (a model call's, or a run's total): the GenAI
    conventions' ``gen_ai.usage.*`` attributes, plus ``rxllm.usage.thoughts_tokens``; unset counts
    are left off.

    >>> class Span:
    ...     def __init__(self): self.attributes = {}
    ...     def set_attribute(self, key, value): self.attributes[key] = value
    >>> span = Span()
    >>> usage_attributes(span, UsageMetadata(prompt_token_count=5, candidates_token_count=3))
    >>> span.attributes
    {'gen_ai.usage.input_tokens': 5, 'gen_ai.usage.output_tokens': 3}
    """
    if usage is None:
        return
    if usage.prompt_token_count is not None:
        span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_token_count)
    if usage.candidates_token_count is not None:
        span.set_attribute("gen_ai.usage.output_tokens", usage.candidates_token_count)
    if usage.cached_content_token_count is not None:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_content_token_count)
    if usage.thoughts_token_count is not None:
        span.set_attribute("rxllm.usage.thoughts_tokens", usage.thoughts_token_count)


# -- usage totals ------------------------------------------------------------------------------


def add_usage(total: UsageMetadata | None, usage: UsageMetadata | None) -> UsageMetadata | None:
    """``total`` plus ``usage``, field by field (a field unset on both stays unset).

    >>> add_usage(UsageMetadata(prompt_token_count=5), UsageMetadata(prompt_token_count=7, total_token_count=9))
    UsageMetadata(prompt_token_count=12, total_token_count=9)
    """
    if usage is None:
        return total
    if total is None:
        return usage
    if _USAGE_TEMPLATE is not None and type(total) is UsageMetadata and type(usage) is UsageMetadata:
        # (every run sums its calls' usage) the counts from the two instances' __dict__, the sum
        # built as validating it would (every field given: every field set), when each count is
        # an int or None: what UsageMetadata(**summed) would keep as it is
        left, right = total.__dict__, usage.__dict__
        built: dict[str, Any] = {}
        for name in _USAGE_FIELDS:
            a, b = left[name], right[name]
            if a is None:
                if b is None:
                    built[name] = None
                    continue
                if type(b) is not int:
                    break
                built[name] = b
            elif type(a) is not int or (b is not None and type(b) is not int):
                break
            else:
                built[name] = a if b is None else a + b
        else:
            return prevalidated.instance(UsageMetadata, built, set(_USAGE_FIELDS))
    summed: dict[str, int | None] = {}
    for name in UsageMetadata.model_fields:
        a, b = getattr(total, name), getattr(usage, name)
        summed[name] = None if a is None and b is None else (a or 0) + (b or 0)
    return UsageMetadata(**summed)


_USAGE_FIELDS = tuple(UsageMetadata.model_fields)
_USAGE_TEMPLATE = prevalidated.template(UsageMetadata, frozenset(_USAGE_FIELDS))  # None: build by validating


# -- spans around agent runs, tools and service turns ------------------------------------------


class TracedScope:
    """An INTERNAL span whose context the caller hands to what runs inside it (see :func:`within`)."""

    __slots__ = ("_otel", "context", "failed", "span")

    def __init__(self, otel: Otel, name: str, attributes: dict[str, Any], parent: Any) -> None:
        self._otel = otel
        self.span = otel.tracer.start_span(
            redact_secrets(name), context=parent, kind=otel.internal_kind, attributes=_redacted(attributes)
        )
        self.context = otel.trace.set_span_in_context(self.span, parent)
        self.failed = False  # the work completed but reported a failure (a tool's error answer)

    def end(self, error: BaseException | None = None, *, cancelled: bool = False) -> None:
        """End the span (call once)."""
        if self.failed and error is None and not cancelled:
            self.span.set_attribute("rxllm.outcome", "error")
            self.span.end()
            return
        self._otel.end(self.span, error, cancelled)


def traced(
    source_of: Callable[[TracedScope | None], reactivex.Observable[_T]],
    name: str,
    attributes: dict[str, Any] | Callable[[], dict[str, Any]],
    *,
    parent: Callable[[], Any] | None = None,
    on_end: Callable[[TracedScope], None] | None = None,
) -> reactivex.Observable[_T]:
    """A cold Observable whose every subscription runs in its own INTERNAL span.

    On subscribe a span ``name`` starts under the OpenTelemetry context ``parent()`` returns then
    (when it is None or not given: the one current on the subscribing thread) and
    ``source_of(scope)`` builds what runs in it (subscribed with the span current); hand
    ``scope.context`` to inner work that another thread subscribes, with :func:`within`.
    ``scope`` is ``None`` when telemetry is off (then this is ``defer(source_of(None))``).
    ``attributes`` may be a function returning them, called only when a span is made. The
    span ends on completion (``on_end`` runs first), on error (status ERROR) or when disposed
    (``rxllm.outcome=cancelled``). Items pass straight through.
    """
    hooks = otel()
    if hooks is None:
        return defer_now(partial(source_of, None))
    if callable(attributes):
        attributes = attributes()

    def subscribe(
        observer: rx_abc.ObserverBase[_T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        explicit = parent() if parent is not None else None
        scope = TracedScope(hooks, name, attributes, hooks.current() if explicit is None else explicit)
        lock = threading.Lock()
        ended = [False]

        def end(error: BaseException | None, cancelled: bool) -> None:
            with lock:
                if ended[0]:
                    return
                ended[0] = True
            if on_end is not None and not cancelled:
                on_end(scope)
            scope.end(error, cancelled=cancelled)

        def on_error(error: Exception) -> None:
            end(error, False)
            observer.on_error(error)

        def on_completed() -> None:
            end(None, False)
            observer.on_completed()

        inner = SingleAssignmentDisposable()
        try:
            source = within(scope.context, source_of(scope))
            inner.disposable = source.subscribe(observer.on_next, on_error, on_completed, scheduler=scheduler)
        except Exception as exc:
            on_error(exc)

        def dispose() -> None:
            inner.dispose()
            end(None, True)

        return Disposable(dispose)

    return Direct(subscribe)


def current_context() -> Any:
    """The OpenTelemetry context current here (to hand to work another thread subscribes), or ``None``."""
    hooks = otel()
    return hooks.current() if hooks is not None else None


def within(context: Any, source: reactivex.Observable[_T]) -> reactivex.Observable[_T]:
    """``source``, subscribed with ``context`` as the current OpenTelemetry context (``None``: as is).

    What ``source`` captures at subscribe time (a model call's parent span) is then ``context``'s
    span, whichever thread subscribes.
    """
    if context is None:  # telemetry was off when the context was captured: nothing to check
        return source
    hooks = otel()
    if hooks is None:
        return source

    def subscribe(
        observer: rx_abc.ObserverBase[_T], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        token = hooks.context.attach(context)
        try:
            return source.subscribe(observer, scheduler=scheduler)
        finally:
            hooks.context.detach(token)

    return Direct(subscribe)


def tool_attributes(call: FunctionCall, description: str | None) -> dict[str, Any]:
    """The ``execute_tool`` span's attributes (arguments only when contents are captured)."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name}
    if call.id:
        attributes["gen_ai.tool.call.id"] = call.id
    if description:
        attributes["gen_ai.tool.description"] = description
    hooks = otel()
    if hooks is not None and hooks.capture_content:
        attributes["gen_ai.tool.call.arguments"] = _json(call.args)
    return attributes


def record_tool_result(
    scope: TracedScope, response: FunctionResponse, error_message: str | None, error: BaseException | None
) -> None:
    """What a tool answered. A tool that failed (its answer to the model is an error) makes the span an
    ERROR with ``error.type``; the result is recorded only when contents are captured."""
    span = scope.span
    if error_message is not None:
        scope.failed = True
        if isinstance(error, ToolError) and error.__cause__ is not None:
            error = error.__cause__  # what the tool raised, not rxllm's wrapper of it
        error_type = type(error).__qualname__ if error is not None else "tool_error"
        span.set_attribute("error.type", error_type)
        span.set_status(scope._otel.status_class(scope._otel.status_error, redact_secrets(error_message)))
    if scope._otel.capture_content:
        span.set_attribute("gen_ai.tool.call.result", _json(response.response))


# -- message contents (only when the user opted in) --------------------------------------------


def _json(value: Any) -> str:
    return redact_secrets(json.dumps(value, ensure_ascii=False, default=str))


def _redacted(attributes: dict[str, Any]) -> dict[str, Any]:
    """Span attributes with every known secret cut out of their values (``rxllm._core.redact``)."""
    return {name: redact_value(value) for name, value in attributes.items()}


def _parts_of(content: Content) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in content.parts:
        if part.text is not None:
            parts.append({"type": "reasoning" if part.thought else "text", "content": part.text})
        elif part.function_call is not None:
            call = part.function_call
            parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.args})
        elif part.function_response is not None:
            result = part.function_response
            parts.append({"type": "tool_call_response", "id": result.id, "response": result.response})
    return parts


def _message_of(content: Content) -> dict[str, Any]:
    role = content.role or "user"
    return {"role": "assistant" if role == "model" else role, "parts": _parts_of(content)}
