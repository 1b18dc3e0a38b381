"""One subscription to :meth:`AiService.stream`: the rounds of a tool-using turn, as a state machine.

Threads. Model events arrive on the model's thread (an I/O thread or the event loop for
:class:`~rxllm.SseChatModel`, the subscribing thread for a synchronous model); user code -- tools,
the retriever, output guardrails -- runs on the tool scheduler, never there (``async def`` tools
on the loop the stream was subscribed from, see ``rxllm._tools._execution``). Everything reaches
the subscriber through one :class:`~rxllm.service._relay.BoundedRelay`, which serializes the threads
and bounds what waits.
Shared state changes under ``_lock``; no callback, emission or subscription happens under it.

A round is over when its model stream completed *and* every tool it started finished (whichever
comes last, on its thread, runs :meth:`_Interaction._end_round`). Then:

* the response has ``error_code`` (length, safety, malformed call, in-band provider error):
  results of tools that ran are not sent anywhere; the response becomes the final (an error
  :class:`FinalResponseEvent`, then ``on_completed``);
* it has function calls: their results go to the next round, in the response's call order
  (``LimitExceededError`` instead when that round would pass ``max_rounds``);
* otherwise it is the final answer, through the output guardrails.

Disposal sets ``_stopped``, cancels the relay (nothing more is delivered, not even a terminal
signal) and disposes the model call (its connection is closed). A tool already running finishes;
its result is dropped. A retriever or tool scheduled but not started never runs.

Plumbing. Per round the interaction subscribes the model's event stream once, with one observer
of its own (no operator chained per round or per event); each event is dispatched on its type.
A model whose ``stream_events`` is ``BaseLlm``'s (derived from ``generate_content``'s responses)
has those responses subscribed instead and turned into the same service events here, as the
derivation would have made them; a model whose ``stream_events`` is ``SseChatModel``'s builds the
service's own events itself, where it would have built its model events (the private
``EventMakers`` seam of ``rxllm._models.model_stream``): either way no model event is built only
to be thrown away. (Which one: the class that defines ``stream_events``, found in the model's
MRO, and no instance attribute of that name.) Work for the tool scheduler goes to a plain
``ThreadPoolScheduler``'s executor directly (``rxllm._core.threads.schedule_cancellable``). What it holds
to dispose (the model call, scheduled work, running tools) is one list under the lock. The
request's config is the service's, built once (the models are immutable); the requests and the
tool results' contents are built from values valid already (``rxllm._core.prevalidated``), and
work on an ``ImmediateScheduler`` runs inline, as its ``schedule`` would run it.

The interaction reads the service it runs for only through :class:`ServiceView` (``AiService`` is
one), so ``._service`` imports this module and never the reverse.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from reactivex import Observable
from reactivex import abc as rx_abc
from reactivex.scheduler import ImmediateScheduler

from .._core import prevalidated
from .._core.errors import GuardrailError, LimitExceededError, ProtocolError, RxLlmError
from .._core.json_codec import without_lone_surrogates
from .._core.schema import ResponseSchema
from .._core.threads import schedule_cancellable
from .._core.types import (
    Content,
    FunctionCall,
    FunctionResponse,
    GenerateContentConfig,
    LlmRequest,
    LlmResponse,
    Part,
    Tool,
    UsageMetadata,
)
from .._models import model_stream
from .._models.base_llm import BaseLlm
from .._models.model_stream import EventMakers
from .._models.sse_chat_model import SseChatModel
from .._models.structured_stream import StructuredStream
from .._rx.direct import Direct
from .._telemetry.otel import TracedScope, add_usage, otel, traced, usage_attributes, within
from .._tools import BaseTool, request_config
from .._tools._loops import wait_for_awaitable
from . import _events as events
from ._guardrails import OutputGuardrail, apply_output_guardrails
from ._relay import BoundedRelay
from ._tool_execution import ToolEnvironment, execute_tool

__all__ = ["Retriever", "ServiceView", "interaction_config", "start_interaction"]

Retriever = Callable[[str], Iterable[str] | Awaitable[Iterable[str]]]
"""Finds content for the user message's text (retrieval-augmented generation): returns snippets.

It runs on the tool scheduler when the stream is subscribed; it may be ``async def`` (awaited on
the loop the stream was subscribed from, else rxllm's tool loop; cancelled when the stream is
disposed). Its snippets are emitted in a :class:`RetrievedContentsEvent` and appended to the user
message.
"""


class ServiceView(Protocol):
    """What one interaction reads of its service (``rxllm.service.AiService`` is one)."""

    @property
    def model(self) -> BaseLlm: ...

    @property
    def tools_by_name(self) -> Mapping[str, BaseTool]: ...

    @property
    def tool_declarations(self) -> tuple[Tool, ...]: ...

    @property
    def tool_timeout(self) -> float | None: ...

    @property
    def tool_scheduler(self) -> rx_abc.SchedulerBase: ...

    @property
    def system_message(self) -> str | None: ...

    @property
    def retriever(self) -> Retriever | None: ...

    @property
    def output_guardrails(self) -> tuple[OutputGuardrail, ...]: ...

    @property
    def output_type(self) -> ResponseSchema | None: ...

    @property
    def streaming_buffer_size(self) -> int: ...

    @property
    def max_rounds(self) -> int: ...

_log = logging.getLogger("rxllm.service")

RETRIEVED_CONTENT_PREAMBLE = "\n\nAnswer using the following information:\n"
"""Put between the user message and the retrieved snippets (LangChain4j's default content injector)."""


class _ToolRun:
    __slots__ = ("call", "failed", "result")

    def __init__(self, call: FunctionCall) -> None:
        self.call = call
        self.result: FunctionResponse | None = None
        self.failed = False


class _Round:
    """One model call and the tools it started (mutable fields guarded by the interaction's lock)."""

    __slots__ = ("calls", "ended", "number", "pending", "reported", "response", "runs", "stream_done")

    def __init__(self, number: int) -> None:
        self.number = number
        self.reported = 0  # complete calls the stream reported (model thread only)
        self.response: LlmResponse | None = None
        self.calls: list[FunctionCall] = []  # the response's function calls, once the stream completed
        self.runs: dict[str, _ToolRun] = {}  # by call id, in start order
        self.pending = 0
        self.stream_done = False
        self.ended = False


def _key(call: FunctionCall, position: int) -> str:
    return call.id if call.id else f"#{position}:{call.name}"


def interaction_config(service: ServiceView) -> GenerateContentConfig:
    """The config of every model call of ``service``'s interactions: its system message, its tools'
    declarations and its structured output (immutable: built once, shared by every request)."""
    config = request_config(GenerateContentConfig(), service.system_message, service.tool_declarations)
    if service.output_type is not None:
        config = config.model_copy(update={"response_schema": service.output_type})
    return config


class _Interaction(rx_abc.DisposableBase):
    """One subscription's state machine; disposing it cancels the interaction (see :meth:`dispose`)."""

    def __init__(
        self,
        service: ServiceView,
        user_content: Content,
        observer: rx_abc.ObserverBase[Any],
        config: GenerateContentConfig,
        telemetry: TracedScope | None = None,
        clean: bool = False,
    ) -> None:
        self._service = service
        self._model = service.model
        self._config = config
        self._output_type = service.output_type
        self._max_rounds = service.max_rounds
        self._scheduler: rx_abc.SchedulerBase | None = None  # the tool scheduler, read when first needed
        self._telemetry = telemetry
        self._telemetry_context = telemetry.context if telemetry is not None else None
        self._usage: UsageMetadata | None = None
        # the one rule (see rxllm._core.json_codec); ``clean``: the caller checked the content's one string
        self._user_content = user_content if clean else without_lone_surrogates(user_content)
        self._relay: BoundedRelay[events.AiServiceStreamingEvent] = BoundedRelay(
            observer, service.streaming_buffer_size, self._stop
        )
        self._lock = threading.Lock()
        self._stopped = False
        self._disposables: list[rx_abc.DisposableBase] = []  # disposed by _stop (guarded by _lock)
        self._contents: list[Content] = []
        self._rounds = 0
        self._tools = ToolEnvironment(service.tools_by_name, user_content, timeout=service.tool_timeout)
        self._guarded = bool(service.output_guardrails)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> rx_abc.DisposableBase:
        if self._service.retriever is not None:
            self._schedule(self._retrieve)
        else:
            self._contents.append(self._user_content)
            self._start_round()
        return self

    def dispose(self) -> None:
        """Cancel: nothing more is emitted (no terminal signal either); the model call is closed."""
        self._relay.cancel()
        self._stop()

    def _stop(self) -> None:
        """Stop every producer: no further round, tool or event; the model call is disposed."""
        with self._lock:
            self._stopped = True
            disposables, self._disposables = self._disposables, []
        self._relay.drop_on_failure()  # (stopping again would do nothing; and the relay holding it is a cycle)
        for disposable in disposables:
            disposable.dispose()

    def _hold(self, disposable: rx_abc.DisposableBase) -> None:
        """Dispose ``disposable`` when the interaction stops (at once when it already has)."""
        with self._lock:
            if not self._stopped:
                self._disposables.append(disposable)
                return
        disposable.dispose()

    def _fail(self, error: Exception) -> None:
        self._stop()
        self._relay.on_error(error)

    def _schedule(self, work: Callable[[], None]) -> None:
        """Run ``work`` on the tool scheduler (not at all when the interaction stops before it starts)."""

        def action(_scheduler: rx_abc.SchedulerBase, _state: Any = None) -> None:
            if self._stopped:
                return
            try:
                work()
            except BaseException as exc:  # a bug below must still reach the subscriber, never vanish on a pool thread
                _log.exception("unexpected error on the tool scheduler")
                self._fail(_mapped(exc, "work on the tool scheduler"))

        scheduler = self._scheduler
        if scheduler is None:
            scheduler = self._scheduler = self._service.tool_scheduler
        if type(scheduler) is ImmediateScheduler:  # what its schedule does (the action returns no disposable)
            action(scheduler)
            return
        # (the action does not use the scheduler it is given: a plain pool's goes to its executor)
        self._hold(_Cancel(schedule_cancellable(scheduler, action)))

    def _resolve(self, value: Any) -> Any:
        """``value``, or the result of an ``async def`` retriever's or guardrail's coroutine.

        Called on the tool scheduler; the coroutine runs on the loop the stream was subscribed
        from (else rxllm's tool loop) and is cancelled when the interaction is disposed.
        """

        def on_start(cancel: Callable[[], None]) -> None:
            self._hold(_Cancel(cancel))

        return wait_for_awaitable(value, self._tools.runtime.loop, on_start)

    # -- retrieval ------------------------------------------------------------------------------

    def _retrieve(self) -> None:
        retriever = self._service.retriever
        assert retriever is not None
        query = self._user_content.text()
        try:
            found = [str(item) for item in self._resolve(retriever(query))]
        except Exception as exc:
            self._fail(_mapped(exc, "the retriever"))
            return
        if self._stopped:  # disposed while the retriever ran: its result is dropped
            return
        content = self._user_content
        if found:
            self._relay.on_next(events.RetrievedContentsEvent(tuple(found)))
            content = _with_retrieved(content, found)
        self._contents.append(content)
        self._start_round()

    # -- rounds ---------------------------------------------------------------------------------

    def _start_round(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._rounds += 1
            round_ = _Round(self._rounds)
        model = self._model
        # The model's own events; or (its stream_events is BaseLlm's: derived from generate_content's
        # responses) those responses, turned into the same service events here (see
        # _on_model_response); or (its stream_events is SseChatModel's) the service's own events,
        # built by the model (see _on_service_event): no model event and no operator in between.
        route = _route(model)
        try:
            request = _request(tuple(self._contents), self._config)
            model_events: Observable[Any]
            if route is _MADE:
                model_events = model._made_events(request, _GUARDED_MAKERS if self._guarded else _MAKERS)  # type: ignore[attr-defined]
            elif route is _DERIVED:
                model_events = model.generate_content(request, stream=True)
            else:
                model_events = model.stream_events(request)
            if self._telemetry_context is not None:
                model_events = within(self._telemetry_context, model_events)
        except Exception as exc:
            self._fail(_mapped(exc, "the model call"))
            return
        on_item = partial(
            self._on_service_event if route is _MADE else
            self._on_model_response if route is _DERIVED else self._on_model_event,
            round_,
        )
        # disposed at once when the interaction stopped meanwhile (or during subscribe)
        self._hold(model_events.subscribe(on_item, self._on_model_error, partial(self._on_model_completed, round_)))

    def _on_model_error(self, error: Exception) -> None:
        if not self._stopped:
            self._fail(_mapped(error, "the model call"))

    def _on_model_event(self, round_: _Round, event: model_stream.ModelStreamEvent) -> None:
        if self._stopped:
            return
        if isinstance(event, model_stream.TextDeltaEvent):
            if not self._guarded and event.text:
                self._relay.on_next(events.PartialResponseEvent(event.text))
        elif isinstance(event, model_stream.ToolCallDeltaEvent):
            self._relay.on_next(
                events.PartialToolCallEvent(event.index, event.id, event.name, event.arguments_delta)
            )
        elif isinstance(event, model_stream.ThoughtDeltaEvent):
            if event.text:
                self._relay.on_next(events.PartialThinkingEvent(event.text))
        elif isinstance(event, model_stream.ToolCallCompleteEvent):
            self._on_complete_call(round_, event.index, event.call)
        elif isinstance(event, model_stream.ResponseCompleteEvent):
            self._on_final(round_, event.response)

    def _on_service_event(self, round_: _Round, event: Any) -> None:
        """What :meth:`_on_model_event` does with each event ``stream_events`` would have emitted,
        given the service event the model built in its place (``_MAKERS``)."""
        if self._stopped:
            return
        kind = type(event)
        if kind is _PARTIAL_RESPONSE:
            self._relay.on_next(event)
        elif kind is _COMPLETE_CALL:
            self._relay.on_next(event)
            position = round_.reported
            round_.reported += 1
            call = event.call
            self._start_tool(round_, call, _key(call, position))
        elif kind is _Final:
            self._on_final(round_, event.response)
        elif kind is not _Dropped:  # (a text delta of a guarded service: not shown)
            self._relay.on_next(event)

    def _on_model_response(self, round_: _Round, response: LlmResponse) -> None:
        """What :meth:`_on_model_event` does with the events ``derive_stream_events`` makes of ``response``
        (a partial's text and thought parts as deltas; a final's calls, then the final), without them."""
        if self._stopped:
            return
        if response.partial:
            content = response.content
            if content is None:
                return
            for part in content.parts:
                text = part.text
                if not text:
                    continue
                if part.thought:
                    self._relay.on_next(events.PartialThinkingEvent(text))
                elif not self._guarded:
                    self._relay.on_next(events.PartialResponseEvent(text))
                if self._stopped:
                    return
            return
        for index, call in enumerate(response.function_calls()):
            self._on_complete_call(round_, index, call)
            if self._stopped:
                return
        self._on_final(round_, response)

    def _on_complete_call(self, round_: _Round, index: int, call: FunctionCall) -> None:
        self._relay.on_next(events.CompleteToolCallEvent(index, call))
        position = round_.reported
        round_.reported += 1
        self._start_tool(round_, call, _key(call, position))

    def _on_final(self, round_: _Round, response: LlmResponse) -> None:
        output_type = self._output_type
        round_.response = response if output_type is None else StructuredStream(output_type).finish(response)

    def _on_model_completed(self, round_: _Round) -> None:
        if self._stopped:
            return
        response = round_.response
        if response is None:
            self._fail(ProtocolError("the model's stream completed without its final response"))
            return
        self._usage = add_usage(self._usage, response.usage_metadata)  # rounds are sequential
        calls = round_.calls = response.function_calls()
        if response.error_code is None and calls:
            self._relay.on_next(events.IntermediateResponseEvent(response))
            for position, call in enumerate(calls):  # a call the stream never reported complete runs now
                self._start_tool(round_, call, _key(call, position))
        with self._lock:
            round_.stream_done = True
            ready = self._take_end(round_)
        if ready:
            self._end_round(round_)

    def _take_end(self, round_: _Round) -> bool:
        """Under the lock: whether the round just became over (and mark it so: it ends once)."""
        if self._stopped or round_.ended or not round_.stream_done or round_.pending:
            return False
        round_.ended = True
        return True

    # -- tools ----------------------------------------------------------------------------------

    def _start_tool(self, round_: _Round, call: FunctionCall, key: str) -> None:
        with self._lock:
            if self._stopped or key in round_.runs:
                return
            run = round_.runs[key] = _ToolRun(call)
            round_.pending += 1

        def done(result: FunctionResponse, failed: bool) -> None:
            self._tool_done(round_, run, result, failed)

        def work() -> None:
            self._relay.on_next(events.BeforeToolExecutionEvent(call))
            if self._stopped:  # stopped while the subscriber took the event: the tool never starts
                return
            # disposed at once when the interaction already stopped
            running = execute_tool(self._tools, call, done, telemetry_context=self._telemetry_context, fail=self._fail)
            self._hold(running)

        self._schedule(work)

    def _tool_done(self, round_: _Round, run: _ToolRun, result: FunctionResponse, failed: bool) -> None:
        if self._stopped:  # disposed while the tool ran: its result is dropped
            return
        run.result = result
        run.failed = failed
        self._relay.on_next(events.AfterToolExecutionEvent(run.call, result, failed))
        with self._lock:
            round_.pending -= 1
            ready = self._take_end(round_)
        if ready:
            self._end_round(round_)

    # -- the end of a round ---------------------------------------------------------------------

    def _end_round(self, round_: _Round) -> None:
        response = round_.response
        assert response is not None
        calls = round_.calls
        if response.error_code is not None or not calls:
            self._finish(response)
            return
        if round_.number >= self._max_rounds:
            self._fail(
                LimitExceededError(
                    f"the model still requested tools after {round_.number} round(s) (max_rounds="
                    f"{self._max_rounds}); raise max_rounds if this is expected"
                )
            )
            return
        results: list[Part] = []
        for position, call in enumerate(calls):
            run = round_.runs.get(_key(call, position))
            result = run.result if run is not None else None
            if result is None:  # cannot happen: every call of the response was started
                result = FunctionResponse(id=call.id, name=call.name, response={"error": "the tool did not run"})
            results.append(_response_part(result))
        model_content = response.content or Content(role="model")
        if model_content.role is None:
            model_content = model_content.model_copy(update={"role": "model"})
        self._contents.append(model_content)
        self._contents.append(_user_content(tuple(results)))
        self._start_round()

    def _finish(self, response: LlmResponse) -> None:
        if self._guarded:  # guardrails are user code: on the tool scheduler, never the model's thread or loop
            self._schedule(lambda: self._finish_guarded(response))
            return
        self._emit_final(response)

    def _finish_guarded(self, response: LlmResponse) -> None:
        if self._guarded:
            try:
                response = apply_output_guardrails(self._service.output_guardrails, response, self._resolve)
            except GuardrailError as exc:
                self._fail(exc)
                return
        self._emit_final(response)

    def _emit_final(self, response: LlmResponse) -> None:
        if self._stopped:
            return
        if self._telemetry is not None:
            usage_attributes(self._telemetry.span, self._usage)
        self._relay.on_next(events.FinalResponseEvent(response, total_usage_metadata=self._usage))
        self._relay.on_completed()
        self._stop()


class _Cancel(rx_abc.DisposableBase):
    """Calls ``cancel`` on the first ``dispose``."""

    __slots__ = ("_cancel",)

    def __init__(self, cancel: Callable[[], object]) -> None:
        self._cancel: Callable[[], object] | None = cancel

    def dispose(self) -> None:
        cancel, self._cancel = self._cancel, None
        if cancel is not None:
            cancel()


class _Final:
    """The round's final response, as the model's maker built it (in place of its ``ResponseCompleteEvent``)."""

    __slots__ = ("response",)

    def __init__(self, response: LlmResponse) -> None:
        self.response = response


class _Dropped:
    """An answer-text delta of a guarded service, which is never shown (an item all the same: the
    model's retry rule counts it, as it counted the model event it stands for)."""

    __slots__ = ()


_DROPPED = _Dropped()


def _dropped(text: str) -> _Dropped:
    return _DROPPED


_PARTIAL_RESPONSE = events.PartialResponseEvent
_COMPLETE_CALL = events.CompleteToolCallEvent
# What a model whose stream_events is SseChatModel's builds in place of each model event (see
# EventMakers): the service events _on_model_event would have made of them, one for one (the
# model emits a text or thought delta only when it is not empty, so no check is lost).
_MAKERS = EventMakers(
    text=events.PartialResponseEvent,
    thought=events.PartialThinkingEvent,
    tool_call_delta=events.PartialToolCallEvent,
    tool_call_complete=events.CompleteToolCallEvent,
    response_complete=_Final,
)
_GUARDED_MAKERS = _MAKERS._replace(text=_dropped)

_DERIVED = BaseLlm.stream_events  # (the routes: the function each model class's stream_events resolves to)
_MADE = SseChatModel.stream_events
_OWN = None


def _route(model: BaseLlm) -> Any:
    """How the interaction subscribes ``model``: ``_DERIVED`` (its ``stream_events`` is
    ``BaseLlm``'s), ``_MADE`` (``SseChatModel``'s) or ``_OWN`` (any other, or an instance's own)."""
    found = type(model).stream_events  # (a lookup in the class's MRO: a subclass's override is found first)
    if (found is _DERIVED or found is _MADE) and "stream_events" not in model.__dict__:
        return found
    return _OWN
_REQUEST = prevalidated.template(LlmRequest, frozenset({"contents", "config"}))
_CONTENT = prevalidated.template(Content, frozenset({"role", "parts"}))
_RESPONSE_PART = prevalidated.template(Part, frozenset({"function_response"}))


def _request(contents: tuple[Content, ...], config: GenerateContentConfig) -> LlmRequest:
    """``LlmRequest(contents=contents, config=config)``: every content and the config are valid already."""
    if type(config) is GenerateContentConfig:  # (the contents: the user's Content, the models' and ours)
        return prevalidated.from_template(LlmRequest, _REQUEST, {"contents": contents, "config": config})
    return LlmRequest(contents=contents, config=config)


def _response_part(result: FunctionResponse) -> Part:
    """``Part(function_response=result)`` (``result`` is a valid ``FunctionResponse``)."""
    if type(result) is FunctionResponse:
        return prevalidated.from_template(Part, _RESPONSE_PART, {"function_response": result})
    return Part(function_response=result)


def _user_content(parts: tuple[Part, ...]) -> Content:
    """``Content(role="user", parts=parts)``: the parts are :func:`_response_part` s (``Part`` instances)."""
    return prevalidated.from_template(Content, _CONTENT, {"role": "user", "parts": parts})


def _mapped(error: BaseException, what: str) -> RxLlmError:
    """``error`` itself when it is rxllm's, else an :class:`~rxllm.RxLlmError` chaining it."""
    if isinstance(error, RxLlmError):
        return error
    mapped = RxLlmError(f"{what} failed with {type(error).__name__}: {error}")
    mapped.__cause__ = error
    return mapped


def _with_retrieved(content: Content, found: Sequence[str]) -> Content:
    """The user message with the retrieved snippets appended (into its text when it is text only)."""
    addition = RETRIEVED_CONTENT_PREAMBLE + "\n\n".join(found)
    if content.parts and all(p.text is not None and not p.thought for p in content.parts):
        merged = "".join(p.text or "" for p in content.parts) + addition
        return content.model_copy(update={"parts": (Part(text=merged),)})
    return content.model_copy(update={"parts": (*content.parts, Part(text=addition.lstrip()))})


def start_interaction(
    service: ServiceView, user_content: Content, config: GenerateContentConfig | None = None, *, clean: bool = False
) -> Observable[events.AiServiceStreamingEvent]:
    """The cold Observable of one interaction: each subscription runs its own, in its own span
    (``invoke_agent AiService``: its model calls and tools nest inside, on whichever thread).

    ``config`` is :func:`interaction_config` of ``service`` (built here when not given); ``clean``:
    the caller knows ``user_content`` holds no lone surrogate (it is not scrubbed again). With
    telemetry off the Observable is a direct one (nothing scheduled, no operator in between).
    """
    config = interaction_config(service) if config is None else config

    def interaction(telemetry: TracedScope | None) -> Observable[events.AiServiceStreamingEvent]:
        def subscribe(
            observer: rx_abc.ObserverBase[events.AiServiceStreamingEvent],
            scheduler: rx_abc.SchedulerBase | None = None,
        ) -> rx_abc.DisposableBase:
            return _Interaction(service, user_content, observer, config, telemetry, clean).start()

        return Direct(subscribe)

    if otel() is None:
        return interaction(None)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "AiService",
        "gen_ai.request.model": service.model.model,
    }
    return traced(interaction, "invoke_agent AiService", attributes)
