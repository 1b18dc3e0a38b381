"""``SseChatModel``: the seed's streaming adapter, for any provider that speaks Server-Sent Events.

The shape of one attempt is the seed's, in reactivex::

    using(open the HTTP response,                      # resource: closed on complete, error, dispose
          lambda response: defer(lambda: concat(       # defer: a fresh parser + aggregator per attempt
              partials(response, parser, aggregator),  # zero or one partial per chunk, as bytes arrive
              from_callable(aggregator.finish))))      # exactly one final

wrapped in two shells: :func:`_blocking` runs the attempt on the I/O scheduler inside a
:class:`~rxllm._transports.threaded.CancelScope` (dispose shuts the socket down from the disposing thread, which
stock ``subscribe_on`` cannot do), and :func:`~rxllm._models.retry.retry_before_first_item` retries an
attempt that failed before its first item.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import itertools
import logging
from collections.abc import Callable, Collection, Iterator
from typing import Any, cast

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ThreadPoolScheduler

from .._core.errors import ConfigurationError, StreamInterruptedError
from .._core.redact import Redactor, redact_error, secure_destination
from .._core.types import LlmRequest, LlmResponse
from .._rx.aio import AwaitableObservable, awaitable
from .._telemetry.otel import AttemptTelemetry, ModelCallTelemetry, model_call
from .._transports.asynchronous import AsyncHttpTransport, total_timeout_error, transport_for_client
from .._transports.base import HttpRequest
from .._transports.threaded import CancelScope, HttpResponse, HttpTransport, current_scope
from .aggregation import StreamAggregator
from .base_llm import BaseLlm
from .chunk import Chunk
from .drive import SseReader, drive_sse
from .model_stream import (
    ModelStreamEvent,
    ResponseCompleteEvent,
    TextDeltaEvent,
    ThoughtDeltaEvent,
    ToolCallCompleteEvent,
    ToolCallDeltaEvent,
)
from .provider import ChunkParser, RequestMapper
from .retry import RetryPolicy, retry_before_first_item
from .sse import DEFAULT_MAX_LINE_BYTES
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
            for thousands of concurrent streams; subscribers are then called on its loop).
        http_client: an ``httpx.Client`` or ``httpx.AsyncClient`` you built (proxy, ``verify``,
            limits, headers, event hooks, mounts, HTTP/2...) to send this model's requests with,
            instead of ``transport``: wrapped in an :class:`HttpTransport` or an
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
        transport: HttpTransport | AsyncHttpTransport | None = None,
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
        self._transport = transport or default_transport()
        if isinstance(self._transport, AsyncHttpTransport):
            if scheduler is not None:
                raise ConfigurationError("scheduler= applies to HttpTransport; AsyncHttpTransport runs on its loop")
            self._scheduler: rx_abc.SchedulerBase | None = None
        else:
            self._scheduler = scheduler or self._transport.scheduler
        self._retry_policy = retry_policy or RetryPolicy()
        self._timer_scheduler = timer_scheduler
        self._max_line_bytes = max_line_bytes
        self._secret_names = tuple(secret_names)
        self._allow_insecure_key = allow_insecure_key
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

    def _request_checked(self, request: HttpRequest) -> Redactor:
        """The request's :class:`Redactor`, after checking that its credentials go over TLS or loopback.

        Raises:
            ConfigurationError: a credential would go to a remote host over plain HTTP.
        """
        redactor = Redactor.of_request(request.url, request.headers, self._secret_names)
        if not self._allow_insecure_key and redactor.has_secrets and not secure_destination(request.url):
            raise ConfigurationError(
                f"refusing to send a credential over plain HTTP to {redactor.url(request.url)!r}: use https "
                "(or a loopback address), or pass allow_insecure_key=True",
                provider=self._mapper.provider,
            )
        return redactor

    @property
    def provider(self) -> str:
        """The provider's short name (from the mapper)."""
        return self._mapper.provider

    def generate_content(self, llm_request: LlmRequest, stream: bool = False) -> AwaitableObservable[LlmResponse]:
        """Call the model.

        Returns a cold Observable. Subscribing sends the request on the I/O scheduler. With
        ``stream=True`` it emits each partial as its bytes arrive, then exactly one final;
        with ``stream=False`` exactly one response. Disposing closes the connection at once
        (also while waiting for headers) and nothing is emitted after it. Failures before the
        first item are retried as the :class:`~rxllm.RetryPolicy` says; after it, a
        provider-reported failure ends in an error final and a dead transport in ``on_error``.
        With ``config.response_schema`` set, every response carries ``parsed`` (the object so
        far on partials, the validated object on the final; see ``docs/structured-output.md``).
        """
        responses = self._call(llm_request, stream, _Emit.PARTIALS if stream else _Emit.SINGLE)
        if llm_request.config.response_schema is not None:  # the schema path is opt-in: no cost without it
            responses = structured_responses(responses, llm_request.config.response_schema)
        return awaitable(responses)

    def stream_events(self, llm_request: LlmRequest) -> AwaitableObservable[ModelStreamEvent]:
        """The fine-grained stream, straight from the provider's chunks.

        Like ``generate_content(stream=True)`` (same request, cancellation and retry rules), but
        emits text/thought deltas, every tool-call fragment, each tool call as soon as it is
        complete (see the aggregator's merge rule 7), and last the final aggregate.
        """
        return awaitable(self._call(llm_request, True, _Emit.EVENTS))

    def _call(self, llm_request: LlmRequest, stream: bool, emit: _Emit) -> reactivex.Observable[Any]:
        def calls(_: Any) -> reactivex.Observable[Any]:  # on the subscribing thread: its span is the parent
            model = llm_request.model or self.model
            telemetry = model_call(provider=self._mapper.provider, model=model, request=llm_request, stream=stream)
            return self._attempts(llm_request, stream, emit, telemetry)

        return reactivex.defer(calls)

    def _attempts(
        self, llm_request: LlmRequest, stream: bool, emit: _Emit, telemetry: ModelCallTelemetry | None
    ) -> reactivex.Observable[Any]:
        transport = self._transport
        attempts = itertools.count(1)  # numbers this subscription's attempts (the transports' DEBUG line)
        if isinstance(transport, AsyncHttpTransport):
            attempt = self._async_attempt(transport, llm_request, stream, emit, telemetry, attempts)
            timers = self._timer_scheduler or transport.timer_scheduler
            return retry_before_first_item(attempt, self._retry_policy, timers)
        assert self._scheduler is not None

        def work(observer: rx_abc.ObserverBase[Any]) -> None:
            self._attempt(llm_request, stream, emit, observer, telemetry, attempts)

        return retry_before_first_item(_blocking(work, self._scheduler), self._retry_policy, self._timer_scheduler)

    def _attempt(
        self,
        llm_request: LlmRequest,
        stream: bool,
        emit: _Emit,
        observer: rx_abc.ObserverBase[Any],
        telemetry: ModelCallTelemetry | None,
        attempts: Iterator[int] | None = None,
    ) -> None:
        """One attempt, on the I/O thread: ``using`` / ``defer`` / ``concat``."""
        provider = self._mapper.provider
        traced = telemetry.attempt() if telemetry is not None else None

        def open_response() -> HttpResponse:
            model = llm_request.model or self.model
            request = self._mapper.to_http_request(llm_request, model=model, stream=stream)
            redactor = self._request_checked(request)
            if isinstance(observer, _ScopedObserver):
                observer.redactor = redactor
            assert isinstance(self._transport, HttpTransport)
            number = next(attempts) if attempts is not None else 1
            if traced is None:
                return self._transport.open(request, provider=provider, stream=stream, redactor=redactor,
                                            attempt=number)
            traced.start(redactor.url(request.url))
            with traced.current():
                return self._transport.open(request, provider=provider, stream=stream, redactor=redactor,
                                            attempt=number)

        def turn(resource: rx_abc.DisposableBase | None) -> reactivex.Observable[Any]:
            response = cast(HttpResponse, resource)

            def fresh(_: Any) -> reactivex.Observable[Any]:
                aggregator = StreamAggregator(provider=provider)
                parser = self._parser_factory()
                if emit is _Emit.SINGLE:
                    if traced is not None:
                        return reactivex.from_callable(lambda: traced.response(_single(response, parser, aggregator)))
                    return reactivex.from_callable(lambda: _single(response, parser, aggregator))
                on_chunk = _EMITTERS[emit]
                # Items reach the attempt's scoped observer straight from the body: between them sit
                # only concat/defer/using, which forward items unchanged (one frame each per partial).
                sink = observer.on_next if isinstance(observer, _ScopedObserver) else None
                body = _body(response, parser, aggregator, on_chunk, self._max_line_bytes, provider, traced, sink)

                def final_items(_: Any) -> reactivex.Observable[Any]:
                    items = _final_items(emit, aggregator)
                    if traced is not None:
                        traced.response(_response_of(items[-1]))
                    return reactivex.from_iterable(items)

                def release(_: Any) -> reactivex.Observable[Any]:
                    # After the final, before completion: the subscriber has its answer at once, and
                    # a next call made on completion finds the connection back in the pool.
                    response.release()
                    return reactivex.empty()

                return reactivex.concat(body, reactivex.defer(final_items), reactivex.defer(release))

            return reactivex.defer(fresh)

        attempt = reactivex.using(open_response, turn)
        if traced is None:
            attempt.subscribe(observer)
            return
        scope = current_scope()

        def on_error(error: Exception) -> None:
            traced.end(error, cancelled=scope is not None and scope.cancelled)
            observer.on_error(error)

        def on_completed() -> None:
            traced.end()
            observer.on_completed()

        attempt.subscribe(observer.on_next, on_error, on_completed)

    def _async_attempt(
        self,
        transport: AsyncHttpTransport,
        llm_request: LlmRequest,
        stream: bool,
        emit: _Emit,
        telemetry: ModelCallTelemetry | None,
        attempts: Iterator[int] | None = None,
    ) -> reactivex.Observable[Any]:
        """One attempt on the asyncio transport: the same ``using`` / ``defer`` / ``concat`` shape,
        written as a task: ``async with``-style release of the response in ``finally`` (using), a
        fresh parser and aggregator per attempt (defer), the final after the body (concat).
        Disposing cancels the task, which closes the connection."""
        provider = self._mapper.provider

        def subscribe(
            observer: rx_abc.ObserverBase[Any], _: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            scope = CancelScope()  # dispose shuts the attempt's sockets down at once, then cancels the task
            guarded = _ScopedObserver(observer, scope)
            traced = telemetry.attempt() if telemetry is not None else None

            async def run() -> None:
                response = None
                total = transport.limits.total_timeout
                deadline = asyncio.timeout(total)
                try:
                    async with deadline:
                        model = llm_request.model or self.model
                        request = self._mapper.to_http_request(llm_request, model=model, stream=stream)
                        guarded.redactor = redactor = self._request_checked(request)
                        number = next(attempts) if attempts is not None else 1
                        if traced is None:
                            response = await transport.open(request, provider=provider, stream=stream,
                                                            redactor=redactor, scope=scope,
                                                            attempt=number)
                        else:
                            traced.start(redactor.url(request.url))
                            with traced.current():
                                response = await transport.open(request, provider=provider, stream=stream,
                                                                redactor=redactor, scope=scope,
                                                                attempt=number)
                        aggregator = StreamAggregator(provider=provider)
                        parser = self._parser_factory()
                        if emit is _Emit.SINGLE:
                            final = _single_of(await response.aread(), parser, aggregator)
                            if traced is not None:
                                traced.response(final)
                            guarded.on_next(final)
                        else:
                            on_chunk = _on_chunk(_EMITTERS[emit], aggregator, guarded.on_next, traced)
                            reader = SseReader(parser, on_chunk, max_line_bytes=self._max_line_bytes)
                            ended = False
                            async for data in response.aiter_bytes():
                                if reader.feed(data):
                                    ended = True
                                    response.mark_ended()
                                    break
                            if not ended:
                                reader.end()
                            _check_complete(aggregator, provider)
                            items = _final_items(emit, aggregator)
                            if traced is not None:
                                traced.response(_response_of(items[-1]))
                            for item in items:
                                guarded.on_next(item)
                            await response.adrain()
                        if traced is not None:
                            traced.end()
                    guarded.on_completed()
                except Exception as exc:
                    # Whatever the deadline's cancellation surfaced as (TimeoutError, or an httpx error
                    # from the interrupted exchange), it is the total timeout: not retried.
                    error: Exception = total_timeout_error(transport.limits, provider) if deadline.expired() else exc
                    if traced is not None:
                        traced.end(error, cancelled=scope.cancelled)
                    guarded.on_error(error)
                finally:
                    if traced is not None:
                        traced.end(cancelled=True)  # a no-op unless the task was cancelled (disposed)
                    if response is not None:
                        await response.aclose()

            future = transport.submit(run(), scope)

            def dispose() -> None:
                if not scope.active:  # already ended (reactivex disposes on the terminal event): let the
                    return  # task release its connection; a cancel would interrupt that aclose() and leak it
                transport.cancel(future)

            return Disposable(dispose)

        return reactivex.create(subscribe)


class _Cancelled(Exception):
    """Ends a cancelled attempt's pipeline; never delivered (the subscriber has disposed)."""


class _Emit(enum.Enum):
    """What one call emits: one response, partials then the final, or the fine-grained events."""

    SINGLE = "single"
    PARTIALS = "partials"
    EVENTS = "events"


def _emit_partials(chunk: Chunk, aggregator: StreamAggregator, on_next: Callable[[Any], None]) -> None:
    partial = aggregator.accept_one(chunk)
    if partial is not None:
        on_next(partial)


def _emit_events(chunk: Chunk, aggregator: StreamAggregator, on_next: Callable[[Any], None]) -> None:
    aggregator.accept(chunk)
    if chunk.thought_delta:
        on_next(ThoughtDeltaEvent(chunk.thought_delta))
    if chunk.text_delta:
        on_next(TextDeltaEvent(chunk.text_delta))
    for fragment in chunk.tool_call_fragments:
        on_next(ToolCallDeltaEvent(fragment.index, fragment.id, fragment.name, fragment.arguments_delta))
    for index, call in aggregator.take_completed_calls():
        on_next(ToolCallCompleteEvent(index, call))


_EMITTERS = {_Emit.PARTIALS: _emit_partials, _Emit.EVENTS: _emit_events}


def _final_items(emit: _Emit, aggregator: StreamAggregator) -> list[Any]:
    """What follows the body: the final response, or (events) the remaining tool calls and the final."""
    return _final_events(aggregator) if emit is _Emit.EVENTS else [aggregator.finish()]


def _response_of(item: Any) -> LlmResponse:
    """The final response among the last of the final items (a response, or the events' last)."""
    return item.response if isinstance(item, ResponseCompleteEvent) else cast(LlmResponse, item)


def _final_events(aggregator: StreamAggregator) -> list[ModelStreamEvent]:
    final = aggregator.finish()
    events: list[ModelStreamEvent] = [
        ToolCallCompleteEvent(index, call) for index, call in aggregator.take_completed_calls(all_remaining=True)
    ]
    events.append(ResponseCompleteEvent(final))
    return events


def _body(
    response: HttpResponse,
    parser: ChunkParser,
    aggregator: StreamAggregator,
    emit: Callable[[Chunk, StreamAggregator, Callable[[Any], None]], None],
    max_line_bytes: int,
    provider: str,
    traced: AttemptTelemetry | None = None,
    sink: Callable[[Any], None] | None = None,
) -> reactivex.Observable[Any]:
    """What one response body yields (``emit`` decides: partials or events), synchronously as bytes arrive.

    A synchronous loop, not ``concat_map`` over inner observables (which on a blocking source
    held every partial until the body ended), and no queue: a slow subscriber slows the reads.
    Items go to ``sink`` when given (the attempt's :class:`_ScopedObserver`, past the operators
    that only forward them), else to the subscribing observer; the terminal event always goes
    to the subscribing observer, after every item.
    """

    def subscribe(
        observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        scope = current_scope()
        on_next = sink or observer.on_next
        on_chunk = _on_chunk(emit, aggregator, on_next, traced)
        try:
            ended = drive_sse(
                response.iter_bytes(),
                parser,
                on_chunk,
                max_line_bytes=max_line_bytes,
                is_cancelled=(lambda: scope.cancelled) if scope is not None else None,
            )
            if scope is not None and scope.cancelled:
                # Terminate (the scoped observer drops it) so ``using`` closes the response here and
                # now; an abandoned body would be finalized by the garbage collector on any thread,
                # possibly one holding httpcore's (non-reentrant) pool lock.
                raise _Cancelled
            if ended:  # the bytes that end the body are read after the final (``HttpResponse.release``)
                response.mark_ended()
            else:  # the body ran out: the connection goes back now (``using`` closes it again: no-op)
                response.close()
            _check_complete(aggregator, provider)
        except Exception as exc:
            observer.on_error(exc)
            return Disposable()
        observer.on_completed()
        return Disposable()

    return reactivex.create(subscribe)


def _on_chunk(
    emit: Callable[[Chunk, StreamAggregator, Callable[[Any], None]], None],
    aggregator: StreamAggregator,
    on_next: Callable[[Any], None],
    traced: AttemptTelemetry | None,
) -> Callable[[Chunk], None]:
    """What each chunk goes through; traced, it also marks the first chunk (one slot read per chunk)."""
    if traced is None:
        if emit is _emit_partials:  # the hot path: one call less per chunk
            accept = aggregator.accept_one

            def emit_partials(chunk: Chunk) -> None:
                partial = accept(chunk)
                if partial is not None:
                    on_next(partial)

            return emit_partials
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


def _single(response: HttpResponse, parser: ChunkParser, aggregator: StreamAggregator) -> LlmResponse:
    return _single_of(response.read(), parser, aggregator)


def _single_of(body: bytes, parser: ChunkParser, aggregator: StreamAggregator) -> LlmResponse:
    for chunk in parser.parse_response(body):
        aggregator.accept(chunk)
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

    __slots__ = ("_observer", "_scope", "redactor")

    def __init__(self, observer: rx_abc.ObserverBase[Any], scope: CancelScope) -> None:
        self._observer = observer
        self._scope = scope
        self.redactor: Redactor | None = None

    def on_next(self, value: Any) -> None:
        if self._scope.active:
            try:
                self._observer.on_next(value)
            except Exception as raised:  # reactivex disposes the subscription: nobody else will see this
                _root_log.error("a subscriber's on_next raised; the stream was stopped: %s", raised, exc_info=raised)
                raise

    def on_error(self, error: Exception) -> None:
        if self._scope.finish():
            if self.redactor is not None:
                redact_error(error, self.redactor)
            observer, self._observer = self._observer, _RELEASED
            try:
                observer.on_error(error)
            except Exception as unhandled:  # no on_error handler (reactivex re-raises), or a failing one
                _log_unhandled(unhandled, error)

    def on_completed(self) -> None:
        if self._scope.finish():
            observer, self._observer = self._observer, _RELEASED
            try:
                observer.on_completed()
            except Exception as unhandled:
                _log_unhandled(unhandled, None)


def _log_unhandled(unhandled: Exception, error: Exception | None) -> None:
    """An error nobody handles would vanish on an I/O thread or the loop: log it at ERROR."""
    if unhandled is error:
        _root_log.error("an error reached a subscriber without an on_error handler: %s", error, exc_info=error)
    else:
        _root_log.error("a subscriber's callback raised while handling the stream's end: %s", unhandled,
                        exc_info=unhandled)


def _blocking(
    work: Callable[[rx_abc.ObserverBase[Any]], None], scheduler: rx_abc.SchedulerBase
) -> reactivex.Observable[Any]:
    """Run blocking ``work`` on ``scheduler``; disposing cancels it from the disposing thread.

    Stock ``subscribe_on`` schedules ``dispose`` onto the worker that is blocked reading, so the
    socket stayed open ~20 s after dispose. Here dispose cancels the work's
    :class:`~rxllm._transports.threaded.CancelScope` on the calling thread: its sockets are shut down at once,
    the blocked read wakes, and nothing more reaches the observer.
    """

    def subscribe(observer: rx_abc.ObserverBase[Any], _: rx_abc.SchedulerBase | None = None) -> rx_abc.DisposableBase:
        scope = CancelScope()
        scoped = _ScopedObserver(observer, scope)
        # The subscriber's contextvars (an OpenTelemetry span, ...) go with the work onto the I/O
        # thread, so httpx instrumentation parents the request's span under the user's.
        context = contextvars.copy_context()

        def action(_scheduler: rx_abc.SchedulerBase, _state: Any = None) -> None:
            if scope.cancelled:
                return
            context.run(run)

        def run() -> None:
            with scope.entered():
                try:
                    work(scoped)
                except Exception as exc:  # a bug below must still reach the subscriber
                    scoped.on_error(exc)

        if executor is not None:  # the transport's own pool: straight to its executor
            submitted = executor.submit(action, scheduler)
            cancel_scheduled: Callable[[], Any] = submitted.cancel
        else:
            cancel_scheduled = scheduler.schedule(action).dispose

        def dispose() -> None:
            scope.cancel()
            cancel_scheduled()

        return Disposable(dispose)

    # reactivex's ThreadPoolScheduler.schedule builds an EventLoopScheduler (a Condition, a queue,
    # a scheduled item, datetime arithmetic) around every action it hands to its executor; a plain
    # ThreadPoolScheduler's work goes to the executor directly (the same thread, the same
    # cancellation of work not yet started).
    executor = scheduler.executor if type(scheduler) is ThreadPoolScheduler else None
    return reactivex.create(subscribe)
