"""``SseChatModel``: the streaming adapter for any provider that speaks Server-Sent Events.

One attempt has the shape of ADK Java's ``Gemini`` streaming call, in reactivex terms::

    using(open the HTTP response,                      # resource: closed on complete, error, dispose
          lambda response: defer(lambda: concat(       # defer: a fresh parser + aggregator per attempt
              partials(response, parser, aggregator),  # zero or one partial per chunk, as bytes arrive
              from_callable(aggregator.finish))))      # exactly one final

It is written once, as :class:`_SseAttempt`, the model's side of the transport seam
(:class:`~rxllm._transports.base.AttemptSink`): the transport opens the response, feeds the body to
it on the transport's own thread or loop, and closes the response whatever happens. Around it,
:func:`~rxllm._models.retry.retry_before_first_item` retries an attempt that failed before its first
item, and disposing cancels the attempt on the disposing thread (its sockets shut down at once).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
from collections.abc import Callable, Collection
from typing import Any

import reactivex
from reactivex import abc as rx_abc

from .._core.errors import ConfigurationError, StreamInterruptedError
from .._core.redact import Redactor, redact_error, secure_destination
from .._core.types import LlmRequest, LlmResponse
from .._rx.aio import AwaitableObservable, awaitable
from .._rx.direct import Direct
from .._telemetry.otel import AttemptTelemetry, ModelCallTelemetry, model_call
from .._transports.base import Attempt, CancelScope, Exchange, HttpRequest, Transport
from .._transports.clients import transport_for_client
from .._transports.threaded import HttpTransport
from .aggregation import StreamAggregator
from .base_llm import BaseLlm
from .chunk import Chunk
from .drive import SseReader
from .model_stream import MODEL_EVENTS, EventMakers, ModelStreamEvent
from .prompt import Prompt, as_request
from .provider import ChunkParser, RequestMapper
from .retry import RetryPolicy, never_retries, subscribe_with_retries
from .sse import DEFAULT_MAX_LINE_BYTES, SseDecoder
from .structured_stream import structured_responses

__all__ = ["SseChatModel", "default_transport"]

_log = logging.getLogger("rxllm.model")
_root_log = logging.getLogger("rxllm")
_default_transport: HttpTransport | None = None


def default_transport() -> HttpTransport:
    """The process-wide :class:`HttpTransport` models use when given none (created on first use)."""
    global _default_transport
    if _default_transport is None:
        _default_transport = HttpTransport()
    return _default_transport


class SseChatModel(BaseLlm):
    """A :class:`~rxllm.BaseLlm` over an HTTP provider that streams Server-Sent Events.

    Args:
        model: the model name (a request's own ``model`` wins when set).
        mapper: builds the provider's HTTP request from an :class:`~rxllm.LlmRequest`.
        parser: a zero-argument factory of :class:`~rxllm.ChunkParser` (the parser class
            itself will do); called once per attempt so per-stream state never leaks.
        transport: the HTTP client and I/O pool (default: a shared :class:`HttpTransport`, a
            thread per open stream), or an :class:`AsyncHttpTransport` (a task per open stream,
            for thousands of concurrent streams; subscribers are then called on its loop), or any
            object with the members of :class:`~rxllm.Transport`.
        http_client: an ``httpx2.Client`` or ``httpx2.AsyncClient`` (or a legacy ``httpx`` one) you
            built (proxy, ``verify``, limits, headers, event hooks, mounts, HTTP/2...) to send this
            model's requests with, instead of ``transport``: wrapped in an :class:`HttpTransport` or an
            :class:`AsyncHttpTransport` (bound to the running loop when the model is built inside
            one). rxllm never closes it. See ``docs/asyncio.md``.
        scheduler: where the blocking request and reads run (default: the transport's
            I/O pool); only for :class:`HttpTransport`.
        retry_policy: retries before the first item (default: :class:`~rxllm.RetryPolicy`).
        timer_scheduler: runs the retry backoff timers (default: reactivex's
            ``TimeoutScheduler``, or the asyncio transport's loop; pass a ``TestScheduler`` for
            virtual time).
        max_line_bytes: the SSE decoder's cap on one line.
        secret_names: more header and query-parameter names whose values are credentials (names
            like ``authorization``, ``*key*``, ``*token*``, ``*secret*`` already are): their values
            are cut out of every error message and log line, and shown as ``***`` in reprs.
        allow_insecure_key: send credentials over plain ``http://`` to a host that is not
            loopback. Off by default: such a model fails with a :class:`~rxllm.ConfigurationError`
            when built (and any such request, before it is sent).

    >>> from rxllm.providers.openai import OpenAiChatModel  # a ready-made SseChatModel
    >>> OpenAiChatModel("gpt-4o-mini", api_key="sk-secret")
    OpenAiChatModel(model='gpt-4o-mini')
    """

    def __init__(
        self,
        model: str,
        *,
        mapper: RequestMapper,
        parser: Callable[[], ChunkParser],
        transport: Transport | None = None,
        http_client: Any = None,
        scheduler: rx_abc.SchedulerBase | None = None,
        retry_policy: RetryPolicy | None = None,
        timer_scheduler: rx_abc.SchedulerBase | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        secret_names: Collection[str] = (),
        allow_insecure_key: bool = False,
    ) -> None:
        super().__init__(model=model)
        self._mapper = mapper
        self._parser_factory = parser
        if http_client is not None:
            if transport is not None:
                raise ConfigurationError("pass transport= or http_client=, not both")
            transport = transport_for_client(http_client)
        self._transport: Transport = transport or default_transport()
        self._scheduler = self._transport.scheduler_of(scheduler)
        self._retry_policy = retry_policy or RetryPolicy()
        self._timer_scheduler = timer_scheduler
        self._max_line_bytes = max_line_bytes
        self._secret_names = tuple(secret_names)
        self._allow_insecure_key = allow_insecure_key
        # The last request URL and headers that passed the credential check, with their verdict
        # (see _request_checked); never shown (no repr reads it).
        self._checked: tuple[tuple[str, tuple[tuple[str, str], ...]], Redactor, bool] | None = None
        if not allow_insecure_key:
            self._check_probe(model)

    def _check_probe(self, model: str) -> None:
        """Refuse at once a mapper that would send a credential in clear text (an empty request
        shows its URL and headers; a mapper that cannot build one is checked per request)."""
        try:
            probe = self._mapper.to_http_request(LlmRequest(), model=model, stream=True)
        except Exception:
            return
        self._request_checked(probe)

    def _request_checked(self, request: HttpRequest) -> tuple[Redactor, bool]:
        """The request's :class:`Redactor`, after checking that its credentials go over TLS or
        loopback, and whether the transport must check that the peer it connects to is loopback
        (a credential over plain http to a loopback ``base_url``).

        Both depend only on the request's URL and headers (and this model's fixed settings): the
        last passing verdict is kept with exactly those as its key, so consecutive calls with the
        same URL and headers (every call of a model, usually) skip the parsing and the pattern
        building; any other URL or header value is checked afresh.

        Raises:
            ConfigurationError: a credential would go to a remote host over plain HTTP.
        """
        key = (request.url, tuple(request.headers.items()))
        checked = self._checked
        if checked is not None and checked[0] == key:
            return checked[1], checked[2]
        redactor = Redactor.of_request(request.url, request.headers, self._secret_names)
        if not self._allow_insecure_key and redactor.has_secrets and not secure_destination(request.url):
            raise ConfigurationError(
                f"refusing to send a credential over plain HTTP to {redactor.url(request.url)!r}: use https "
                "(or a loopback address), or pass allow_insecure_key=True",
                provider=self._mapper.provider,
            )
        # A credential over plain http (to a loopback base_url: refused above for the others) may go
        # to a loopback peer only: the transport checks the address it actually connects to.
        loopback_only = (redactor.has_secrets and not self._allow_insecure_key
                         and not request.url[:6].lower().startswith("https:"))
        self._checked = (key, redactor, loopback_only)  # one tuple, replaced whole: safe across threads
        return redactor, loopback_only

    @property
    def provider(self) -> str:
        """The provider's short name (from the mapper)."""
        return self._mapper.provider

    def generate_content(self, llm_request: Prompt, stream: bool = False) -> AwaitableObservable[LlmResponse]:
        """Call the model with ``llm_request``: an :class:`~rxllm.LlmRequest`, the user's text or the
        conversation so far (a sequence of ``Content``).

        Returns a cold Observable. Subscribing sends the request on the I/O scheduler. With
        ``stream=True`` it emits each partial as its bytes arrive, then exactly one final;
        with ``stream=False`` exactly one response. Disposing closes the connection at once
        (also while waiting for headers) and nothing is emitted after it. Failures before the
        first item are retried as the :class:`~rxllm.RetryPolicy` says; after it, a
        provider-reported failure ends in an error final and a dead transport in ``on_error``.
        With ``config.response_schema`` set, every response carries ``parsed`` (the object so
        far on partials, the validated object on the final; see ``docs/structured-output.md``).
        """
        request = as_request(llm_request)  # the BaseLlm wrapper converted it already: an identity check
        responses = self._call(request, stream, _Emit.PARTIALS if stream else _Emit.SINGLE)
        if request.config.response_schema is not None:  # the schema path is opt-in: no cost without it
            responses = structured_responses(responses, request.config.response_schema)
        return awaitable(responses)

    def stream_events(self, llm_request: Prompt) -> AwaitableObservable[ModelStreamEvent]:
        """The fine-grained stream, straight from the provider's chunks (``llm_request`` as in
        :meth:`generate_content`).

        Like ``generate_content(stream=True)`` (same request, cancellation and retry rules), but
        emits text/thought deltas, every tool-call fragment, each tool call as soon as it is
        complete (see the aggregator's merge rule 7), and last the final aggregate.
        """
        return awaitable(self._call(as_request(llm_request), True, _Emit.EVENTS))

    def _made_events(self, llm_request: LlmRequest, makers: EventMakers) -> reactivex.Observable[Any]:
        """:meth:`stream_events` of ``llm_request`` (an :class:`~rxllm.LlmRequest`), each event built
        by ``makers`` instead (private: the service's seam; see :class:`EventMakers`). The same
        call, chunks, order, errors, retries and cancellation; only what is emitted differs."""
        return _ModelCall(self, llm_request, True, _Emit.EVENTS, makers)

    def _call(self, llm_request: LlmRequest, stream: bool, emit: _Emit) -> reactivex.Observable[Any]:
        return _ModelCall(self, llm_request, stream, emit)

    def _attempt(
        self,
        observer: rx_abc.ObserverBase[Any],
        llm_request: LlmRequest,
        stream: bool,
        emit: _Emit,
        telemetry: ModelCallTelemetry | None,
        number: int,
        makers: EventMakers = MODEL_EVENTS,
    ) -> rx_abc.DisposableBase:
        """Start attempt ``number`` of one call, its items to ``observer``; what cancels it."""
        scope = CancelScope()  # dispose shuts the attempt's sockets down at once
        scoped = _ScopedObserver(observer, scope)
        traced = telemetry.attempt() if telemetry is not None else None
        sink = _SseAttempt(self, llm_request, stream, emit, scoped, scope, traced, number, makers)
        started = self._transport.start(sink, scope, scheduler=self._scheduler)
        # an attempt that is a Disposable (the asyncio transport's) is its own subscription
        return started if isinstance(started, rx_abc.DisposableBase) else _Cancel(started)


class _Cancel(rx_abc.DisposableBase):
    """An attempt's subscription: disposing cancels the transport's attempt (from any thread, at once;
    ``Attempt.cancel`` is idempotent and thread-safe, so no lock here), then lets go of it."""

    __slots__ = ("_attempt",)

    def __init__(self, attempt: Attempt) -> None:
        self._attempt: Attempt | None = attempt

    def dispose(self) -> None:
        attempt = self._attempt
        if attempt is not None:
            attempt.cancel()
            self._attempt = None


class _ModelCall(Direct[Any]):
    """One call of :meth:`SseChatModel._call`, cold: each subscription is a model call.

    Subscribing (on the subscribing thread, so its span is the parent) makes the call's telemetry,
    then runs its attempts: through :func:`~rxllm._models.retry.subscribe_with_retries` (a failure
    before the first item is retried as the policy says, each retry a fresh attempt), or, with a
    policy that makes one attempt, the attempt itself on this subscription's observer. A
    :class:`~rxllm._rx.direct.Direct` Observable: subscribing allocates one small observer and
    the attempt's subscription, no lock, no trampoline (an open stream keeps them for its
    lifetime); nothing is delivered after dispose or a terminal event, as with
    ``Observable.subscribe``.
    """

    def __init__(self, model: SseChatModel, llm_request: LlmRequest, stream: bool, emit: _Emit,
                 makers: EventMakers = MODEL_EVENTS) -> None:
        # Not Direct.__init__: the subscribe function is the _fn method (a bound method kept on
        # the instance would make every call a reference cycle, freed only by the collector).
        self._subscribe = None
        self._model = model
        self._request = llm_request
        self._stream = stream
        self._emit = emit
        self._makers = makers

    def _fn(  # Direct's subscribe function, as a method
        self, observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        model, llm_request, stream = self._model, self._request, self._stream
        telemetry = model_call(provider=model._mapper.provider, model=llm_request.model or model.model,
                               request=llm_request, stream=stream)
        policy = model._retry_policy
        if never_retries(policy):
            return model._attempt(observer, llm_request, stream, self._emit, telemetry, 1, self._makers)
        timers = model._timer_scheduler or model._transport.timer_scheduler
        attempts = _AttemptSource(model, llm_request, stream, self._emit, telemetry, self._makers)
        return subscribe_with_retries(attempts, policy, timers, observer, scheduler)


class _AttemptSource(Direct[Any]):
    """The attempts of one subscription of a :class:`_ModelCall` under a retrying policy: each
    subscription is the next attempt, numbered from 1 (the transports' DEBUG line shows it)."""

    def __init__(
        self, model: SseChatModel, llm_request: LlmRequest, stream: bool, emit: _Emit,
        telemetry: ModelCallTelemetry | None, makers: EventMakers,
    ) -> None:
        self._subscribe = None  # not Direct.__init__: as _ModelCall's
        self._model = model
        self._request = llm_request
        self._stream = stream
        self._emit = emit
        self._makers = makers
        self._telemetry = telemetry
        self._number = 0  # attempts are subscribed one at a time (the retry operator's rule)

    def _fn(  # Direct's subscribe function, as a method
        self, observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        self._number += 1
        return self._model._attempt(observer, self._request, self._stream, self._emit, self._telemetry,
                                    self._number, self._makers)


class _SseAttempt:
    """One attempt, the model's side of the transport seam (an
    :class:`~rxllm._transports.base.AttemptSink`): builds the request, turns the body into partials
    or events and the final, and ends the attempt's telemetry span.

    A fresh parser and aggregator per attempt (a retry starts from scratch); items go to the
    attempt's :class:`_ScopedObserver`, which delivers nothing once the attempt was cancelled.
    They are built when the response's headers have arrived (the transport asks for
    :attr:`on_body`), not while the request waits for its connection and headers: thousands of
    streams opening at once hold none of them meanwhile.
    """

    __slots__ = ("_aggregator", "_emit", "_feed", "_makers", "_model", "_number", "_observer", "_reader",
                 "_request", "_scope", "_sent", "_stream", "_traced")

    def __init__(
        self,
        model: SseChatModel,
        llm_request: LlmRequest,
        stream: bool,
        emit: _Emit,
        observer: _ScopedObserver,
        scope: CancelScope,
        traced: AttemptTelemetry | None,
        number: int,
        makers: EventMakers = MODEL_EVENTS,
    ) -> None:
        self._model = model
        self._request = llm_request
        self._stream = stream
        self._emit = emit
        self._observer = observer
        self._scope = scope
        self._traced = traced
        self._number = number
        self._makers = makers  # (what the events are built with)
        self._aggregator: StreamAggregator | None = None  # built with the reader (or for the whole body)
        self._reader: SseReader | _PartialsReader | _EventsReader | None = None
        self._feed: Callable[[bytes], bool] | None = None
        self._sent = False  # exchange() built the request

    def exchange(self) -> Exchange:
        model = self._model
        request = model._mapper.to_http_request(self._request, model=self._request.model or model.model,
                                                stream=self._stream)
        redactor, loopback_only = model._request_checked(request)
        self._observer.redactor = redactor
        traced = self._traced
        context = None
        if traced is not None:  # telemetry on: the attempt's span, and its trace context on the wire
            traced.start(redactor.url(request.url))
            request = dataclasses.replace(request, headers=traced.trace_headers(request.headers))
            context = traced.current
        self._sent = True
        return Exchange(request, redactor, self._stream, model.provider, self._number, context, loopback_only)

    @property
    def on_body(self) -> Callable[[bytes], bool]:
        """The SSE reader's own ``feed`` (built on first use, once the request is built): the
        transport calls it once per network read, with no frame of this class in between."""
        feed = self._feed
        if feed is None:
            if not self._sent:
                return _no_body
            feed = self._feed = self._reader_feed()
        return feed

    def _reader_feed(self) -> Callable[[bytes], bool]:
        model = self._model
        aggregator = self._aggregator_now()
        if self._emit is _Emit.PARTIALS and self._traced is None:  # the hot path: no frame per chunk between the reads
            partials = self._reader = _PartialsReader(model._parser_factory(), aggregator, self._observer,
                                                      model._max_line_bytes)
            return partials.feed
        if self._emit is _Emit.EVENTS and self._traced is None:  # the fine-grained stream's: as fused
            events = self._reader = _EventsReader(model._parser_factory(), aggregator, self._observer,
                                                  model._max_line_bytes, self._makers)
            return events.feed
        if self._emit is not _Emit.SINGLE:
            emit = _EMITTERS[self._emit]
            if emit is _emit_events:
                emit = functools.partial(_emit_events, makers=self._makers)
            on_chunk = _on_chunk(emit, aggregator, self._observer, self._traced)
            reader = self._reader = SseReader(model._parser_factory(), on_chunk,
                                              max_line_bytes=model._max_line_bytes)
            return reader.feed
        return _no_body

    def _aggregator_now(self) -> StreamAggregator:
        aggregator = self._aggregator
        if aggregator is None:
            aggregator = self._aggregator = StreamAggregator(provider=self._model.provider)
        return aggregator

    def settled(self) -> bool:
        aggregator = self._aggregator
        return aggregator is not None and aggregator.settled

    def on_body_end(self, ended: bool) -> None:
        # an event the body ended in the middle of is never dispatched (the SSE standard discards it)
        aggregator = self._aggregator_now()
        _check_complete(aggregator, self._model.provider)
        final = aggregator.finish()
        if self._emit is not _Emit.EVENTS:
            if self._traced is not None:
                self._traced.response(final)
            self._observer.on_next(final)
            return
        # the calls not reported yet, then the final (finish first: it may fail, before any of them)
        makers = self._makers
        make_call = makers.tool_call_complete
        items = [make_call(index, call) for index, call in aggregator.take_completed_calls(all_remaining=True)]
        items.append(makers.response_complete(final))
        if self._traced is not None:
            self._traced.response(final)
        on_next = self._observer.on_next
        for item in items:
            on_next(item)

    def on_whole(self, body: bytes) -> None:
        final = _single_of(body, self._model._parser_factory(), self._aggregator_now())
        if self._traced is not None:
            self._traced.response(final)
        self._observer.on_next(final)

    def on_error(self, error: Exception) -> None:
        if self._traced is not None:
            self._traced.end(error, cancelled=self._scope.cancelled)
        self._observer.on_error(error)

    def on_completed(self) -> None:
        if self._traced is not None:
            self._traced.end()
        self._observer.on_completed()


class _PartialsReader:
    """:class:`~rxllm._models.drive.SseReader` fused with the untraced partials path of
    :func:`_on_chunk` and :meth:`_ScopedObserver.on_next`: per event, the parser, the aggregator
    and the subscriber, in one loop (three Python frames less per chunk; the same calls in the same
    order, the same end: ``True`` once a chunk said ``end_of_stream``)."""

    __slots__ = ("_accept", "_decoder", "_observer", "_parse", "_scope")

    def __init__(self, parser: ChunkParser, aggregator: StreamAggregator, observer: _ScopedObserver,
                 max_line_bytes: int) -> None:
        self._decoder = SseDecoder(max_line_bytes=max_line_bytes)
        self._parse = parser.parse
        self._accept = aggregator.accept_one
        self._observer = observer
        self._scope = observer.scope

    def feed(self, data: bytes) -> bool:
        """Take one read; ``True`` once a chunk said ``end_of_stream`` (read nothing more after it)."""
        parse, accept, scope = self._parse, self._accept, self._scope
        for event in self._decoder.feed(data):
            chunk = parse(event)
            if chunk is None:
                continue
            partial = accept(chunk)
            if partial is not None:
                if scope.active:
                    try:
                        self._observer.observer.on_next(partial)
                    except Exception as raised:
                        _log_on_next_raised(raised)
                        raise
                # Not held while the next chunk's accept looks whether the subscriber kept this one
                # (the aggregator's probe): a subscriber that drops partials must be seen to drop them.
                del partial
            if chunk[_END_OF_STREAM]:  # by position, as SseReader reads it
                return True
        return False


class _EventsReader:
    """:class:`~rxllm._models.drive.SseReader` fused with the untraced events path of
    :func:`_on_chunk`, :func:`_emit_events` and :meth:`_ScopedObserver.on_next`: per event, the
    parser, the aggregator's absorber and the subscriber, in one loop; the same calls and events in
    the same order (each event built by the attempt's :class:`EventMakers`), the same end."""

    __slots__ = ("_absorb", "_aggregator", "_decoder", "_makers", "_observer", "_parse", "_scope")

    def __init__(self, parser: ChunkParser, aggregator: StreamAggregator, observer: _ScopedObserver,
                 max_line_bytes: int, makers: EventMakers) -> None:
        self._decoder = SseDecoder(max_line_bytes=max_line_bytes)
        self._parse = parser.parse
        self._aggregator = aggregator
        self._absorb = aggregator.absorber()
        self._observer = observer
        self._scope = observer.scope
        self._makers = makers

    def feed(self, data: bytes) -> bool:
        """Take one read; ``True`` once a chunk said ``end_of_stream`` (read nothing more after it)."""
        parse, absorb, scope, aggregator = self._parse, self._absorb, self._scope, self._aggregator
        for event in self._decoder.feed(data):
            chunk = parse(event)
            if chunk is None:
                continue
            absorb(chunk)  # no partial: the events carry the chunk's own delta strings
            text = chunk.text_delta
            if text and not chunk.thought_delta and not chunk.tool_call_fragments:  # the usual chunk: one text event
                if scope.active:
                    try:
                        self._observer.observer.on_next(self._makers.text(text))
                    except Exception as raised:
                        _log_on_next_raised(raised)
                        raise
            else:
                self._emit_deltas(chunk)
            if aggregator.has_completed_calls:
                on_next = self._observer.on_next
                make_call = self._makers.tool_call_complete
                for index, call in aggregator.take_completed_calls():
                    on_next(make_call(index, call))
            if chunk[_END_OF_STREAM]:  # by position, as SseReader reads it
                return True
        return False

    def _emit_deltas(self, chunk: Chunk) -> None:
        """What :func:`_emit_events` emits of ``chunk`` before its completed calls."""
        on_next = self._observer.on_next
        makers = self._makers
        if chunk.thought_delta:
            on_next(makers.thought(chunk.thought_delta))
        if chunk.text_delta:
            on_next(makers.text(chunk.text_delta))
        if chunk.tool_call_fragments:
            make_delta = makers.tool_call_delta
            for fragment in chunk.tool_call_fragments:
                on_next(make_delta(fragment.index, fragment.id, fragment.name, fragment.arguments_delta))


_END_OF_STREAM = Chunk._fields.index("end_of_stream")


def _no_body(data: bytes) -> bool:
    """:attr:`_SseAttempt.on_body` before the request is built: no body is expected yet."""
    raise StreamInterruptedError("a body arrived before the request was built")


class _Emit(enum.Enum):
    """What one call emits: one response, partials then the final, or the fine-grained events."""

    SINGLE = "single"
    PARTIALS = "partials"
    EVENTS = "events"


def _emit_partials(chunk: Chunk, aggregator: StreamAggregator, on_next: Callable[[Any], None]) -> None:
    partial = aggregator.accept_one(chunk)
    if partial is not None:
        on_next(partial)


def _emit_events(chunk: Chunk, aggregator: StreamAggregator, on_next: Callable[[Any], None],
                 makers: EventMakers = MODEL_EVENTS) -> None:
    aggregator.absorb(chunk)  # no partial: the events carry the chunk's own delta strings
    if chunk.thought_delta:
        on_next(makers.thought(chunk.thought_delta))
    if chunk.text_delta:
        on_next(makers.text(chunk.text_delta))
    for fragment in chunk.tool_call_fragments:
        on_next(makers.tool_call_delta(fragment.index, fragment.id, fragment.name, fragment.arguments_delta))
    if aggregator.has_completed_calls:
        for index, call in aggregator.take_completed_calls():
            on_next(makers.tool_call_complete(index, call))


_EMITTERS = {_Emit.PARTIALS: _emit_partials, _Emit.EVENTS: _emit_events}


def _on_chunk(
    emit: Callable[[Chunk, StreamAggregator, Callable[[Any], None]], None],
    aggregator: StreamAggregator,
    observer: _ScopedObserver,
    traced: AttemptTelemetry | None,
) -> Callable[[Chunk], None]:
    """What each chunk goes through; traced, it also marks the first chunk (one slot read per chunk)."""
    on_next = observer.on_next
    if traced is None:  # the untraced partials take _PartialsReader instead
        return lambda chunk: emit(chunk, aggregator, on_next)

    if emit is _emit_partials:
        accept = aggregator.accept_one

        def traced_partials(chunk: Chunk) -> None:
            if traced.waiting:
                traced.first_chunk()
            partial = accept(chunk)
            if partial is not None:
                on_next(partial)

        return traced_partials

    def on_chunk(chunk: Chunk) -> None:
        if traced.waiting:
            traced.first_chunk()
        emit(chunk, aggregator, on_next)

    return on_chunk


def _single_of(body: bytes, parser: ChunkParser, aggregator: StreamAggregator) -> LlmResponse:
    for chunk in parser.parse_response(body):
        aggregator.absorb(chunk)
    return aggregator.finish()


def _check_complete(aggregator: StreamAggregator, provider: str) -> None:
    if not aggregator.is_complete:
        raise StreamInterruptedError(
            "the response body ended before the provider said the turn was complete", provider=provider
        )


class _Released(rx_abc.ObserverBase[Any]):
    """What a :class:`_ScopedObserver` forwards to once its stream is over: nothing."""

    __slots__ = ()

    def on_next(self, value: Any) -> None:
        pass

    def on_error(self, error: Exception) -> None:
        pass

    def on_completed(self) -> None:
        pass


_RELEASED = _Released()


class _ScopedObserver(rx_abc.ObserverBase[Any]):
    """Forwards to ``observer`` while the scope is active: nothing after dispose, one terminal event.

    An error leaves with the request's secrets cut out of its message (``redactor``, set once the
    request is built), before the retry policy logs it or the subscriber sees it.

    Once its terminal event is delivered it lets go of ``observer``:
    reactivex's ``concat`` keeps its subscribers in a reference cycle (a closure that schedules
    itself), which only the garbage collector's full pass frees; without the release, whatever the
    subscriber's callbacks reach (every partial a subscriber kept: 600,000 objects for a
    100,000-chunk stream) stayed alive until that pass, long after the subscriber let go of it.
    """

    __slots__ = ("observer", "redactor", "scope")

    def __init__(self, observer: rx_abc.ObserverBase[Any], scope: CancelScope) -> None:
        self.observer = observer  # read per item by the hot path of _on_chunk (which inlines on_next)
        self.scope = scope
        self.redactor: Redactor | None = None

    def on_next(self, value: Any) -> None:
        if self.scope.active:
            try:
                self.observer.on_next(value)
            except Exception as raised:
                _log_on_next_raised(raised)
                raise

    def on_error(self, error: Exception) -> None:
        if self.scope.finish():
            if self.redactor is not None:
                redact_error(error, self.redactor)
            observer, self.observer = self.observer, _RELEASED
            try:
                observer.on_error(error)
            except Exception as unhandled:  # no on_error handler (reactivex re-raises), or a failing one
                _log_unhandled(unhandled, error)

    def on_completed(self) -> None:
        if self.scope.finish():
            observer, self.observer = self.observer, _RELEASED
            try:
                observer.on_completed()
            except Exception as unhandled:
                _log_unhandled(unhandled, None)


def _log_on_next_raised(raised: Exception) -> None:
    """A subscriber's ``on_next`` raised: reactivex disposes the subscription, so nobody else would see it."""
    _root_log.error("a subscriber's on_next raised; the stream was stopped: %s", raised, exc_info=raised)


def _log_unhandled(unhandled: Exception, error: Exception | None) -> None:
    """An error nobody handles would vanish on an I/O thread or the loop: log it at ERROR."""
    if unhandled is error:
        _root_log.error("an error reached a subscriber without an on_error handler: %s", error, exc_info=error)
    else:
        _root_log.error("a subscriber's callback raised while handling the stream's end: %s", unhandled,
                        exc_info=unhandled)
