"""The LLM flow: ask the model, run the tools it calls, ask again, until a final response.

One *step* is one model call and what follows from it:

1. Fetch the session as stored now and build the ``LlmRequest`` from it: the agent's
   instruction (``system_instruction``), every stored event's content in order, and the tools'
   declarations.
2. Run the before-model callbacks, then ``model.generate_content(request, stream=mode == SSE)``
   (the call is counted against ``RunConfig.max_llm_calls``).
3. Map every ``LlmResponse`` (after the after-model callbacks) to an :class:`Event`. A partial
   event is emitted at once and never stored. A non-partial event is stored first and the stored
   event is emitted; if it has function calls (and no ``error_code``), its calls run -- each
   exactly once, with its whole arguments, one after the other in call order -- and one
   function-response event with all their responses is stored and emitted.

The flow stops after a step whose last event is a final response (``is_final_response()``), has
an ``error_code``, or is partial (a model that broke the stream contract by never sending a final:
logged at WARNING, nothing of that turn is stored). Otherwise -- the last event is a
function-response event -- it starts the next step.

Persist-before-next-step is ordering, not a barrier: the steps are a lazily pulled sequence
concatenated with ``concat_with_iterable``, so step *n + 1* is created and subscribed only when
step *n* completed, and step *n* completes only after its last store completed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import reactivex
from reactivex import operators as ops

from .._aggregation import generate_function_call_id
from .._errors import ConfigurationError, RxLlmError, UnsupportedOperationError
from .._telemetry import TracedScope, traced, within
from .._tools import ToolCallOutcome, call_tool, request_config, tool_declarations
from .._types import Content, FunctionCall, LlmRequest, LlmResponse, Part
from ._context import CallbackContext, InvocationContext, ReadonlyContext, ToolContext
from ._event import Event, EventActions
from ._instructions import artifact_loader, inject_session_state
from ._run_config import StreamingMode
from ._rx import emit_now, fail_now, nothing_now, then_now
from ._sessions import Session
from ._state import State

if TYPE_CHECKING:
    from ._agent import LlmAgent

__all__ = ["AfterModelCallback", "BeforeModelCallback", "build_request", "run_llm_flow"]

logger = logging.getLogger("rxllm.agents")

T = TypeVar("T")

BeforeModelCallback = Callable[[CallbackContext, LlmRequest], "LlmResponse | LlmRequest | None"]
"""Called before each model call. Return None to go on, an ``LlmRequest`` to replace the request
(requests are immutable: ``request.model_copy(update=...)``), or an ``LlmResponse`` to skip the
model call and use it as the model's answer (not counted as a model call)."""

AfterModelCallback = Callable[[CallbackContext, LlmResponse], "LlmResponse | None"]
"""Called for every response of the model, partials included. Return None to keep it or an
``LlmResponse`` to replace it; the replacement keeps the ``partial`` flag of what it replaces."""


class _Step:
    """What one step has seen so far (touched only in the step's serialized Rx callbacks)."""

    __slots__ = ("call_ids", "last_event", "state", "telemetry")

    def __init__(self, telemetry: object = None) -> None:
        self.last_event: Event | None = None
        self.state = State()
        self.call_ids: dict[tuple[int, str], str] = {}
        self.telemetry = telemetry  # the agent span's OpenTelemetry context (None: telemetry off)


def run_llm_flow(agent: LlmAgent, ctx: InvocationContext) -> reactivex.Observable[Event]:
    """The events of one run of ``agent``: cold; disposing stops the model call and all later work."""
    if ctx.run_config.streaming_mode is StreamingMode.BIDI:
        return _run_live(agent, ctx)

    def steps(telemetry: object) -> Iterator[reactivex.Observable[Event]]:
        while not ctx.is_cancelled:
            step = _Step(telemetry)
            yield _one_step(agent, ctx, step)
            if not _should_continue(agent, ctx, step):
                return
        yield reactivex.never()  # disposed: start nothing more

    def start(scope: TracedScope | None) -> reactivex.Observable[Event]:
        return reactivex.concat_with_iterable(steps(scope.context if scope is not None else None))

    def on_end(scope: TracedScope) -> None:
        usage = ctx.total_usage_metadata
        if usage is not None and usage.prompt_token_count is not None:
            scope.span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_token_count)
        if usage is not None and usage.candidates_token_count is not None:
            scope.span.set_attribute("gen_ai.usage.output_tokens", usage.candidates_token_count)

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "gen_ai.conversation.id": ctx.session.id,
        "gen_ai.request.model": agent.model.model,
        "rxllm.invocation_id": ctx.invocation_id,
    }
    if agent.description:
        attributes["gen_ai.agent.description"] = agent.description
    return traced(start, f"invoke_agent {agent.name}", attributes, on_end=on_end)


def _should_continue(agent: LlmAgent, ctx: InvocationContext, step: _Step) -> bool:
    last = step.last_event
    if last is None:
        logger.warning(
            "agent %r, invocation %s: the model call produced no response; ending the run",
            agent.name,
            ctx.invocation_id,
        )
        return False
    if last.partial:
        logger.warning(
            "agent %r, invocation %s: the model's stream ended with a partial response and no final one "
            "(a generate_content contract violation); nothing of this turn was stored and its tool calls, if "
            "any, were not run; ending the run",
            agent.name,
            ctx.invocation_id,
        )
        return False
    if last.error_code is not None:
        return False
    return not last.is_final_response()


def _session_now(ctx: InvocationContext) -> reactivex.Observable[Session]:
    def pick(sessions: list[Session]) -> reactivex.Observable[Session]:
        if sessions:
            return emit_now(sessions[-1])
        return fail_now(
            ConfigurationError(
                f"session {ctx.session.id!r} (app {ctx.session.app_name!r}, user {ctx.session.user_id!r}) "
                "no longer exists"
            )
        )

    return ctx.current_session().pipe(ops.to_list(), ops.flat_map(pick))


def _one_step(agent: LlmAgent, ctx: InvocationContext, step: _Step) -> reactivex.Observable[Event]:
    def model_step(session: Session) -> reactivex.Observable[Event]:
        step.state = State(session.state)
        callback_ctx = CallbackContext(ctx, step.state)
        request = build_request(agent, ctx, session, ReadonlyContext(ctx, step.state))
        responses = within(step.telemetry, _call_model(agent, ctx, callback_ctx, request))

        def to_event(response: LlmResponse) -> Event:
            return _to_event(agent, ctx, step, response)

        def handle(event: Event) -> reactivex.Observable[Event]:
            return _handle_event(agent, ctx, step, event)

        return responses.pipe(ops.map(to_event), ops.concat_map(handle))

    return _session_now(ctx).pipe(ops.flat_map(model_step))


def _invoke(kind: str, agent: LlmAgent, callback: Callable[..., T], *args: Any) -> T:
    try:
        return callback(*args)
    except RxLlmError:
        raise
    except Exception as exc:
        name = getattr(callback, "__name__", repr(callback))
        raise RxLlmError(f"{kind} {name!r} of agent {agent.name!r} raised {type(exc).__name__}: {exc}") from exc


def _call_model(
    agent: LlmAgent, ctx: InvocationContext, callback_ctx: CallbackContext, request: LlmRequest
) -> reactivex.Observable[LlmResponse]:
    for callback in agent.before_model_callbacks:
        result = _invoke("before_model_callback", agent, callback, callback_ctx, request)
        if result is None:
            continue
        if isinstance(result, LlmRequest):
            request = result
            continue
        if isinstance(result, LlmResponse):
            return emit_now(result)
        raise ConfigurationError(
            f"before_model_callback of agent {agent.name!r} returned {type(result).__name__}; "
            "expected None, an LlmRequest or an LlmResponse"
        )
    if ctx.is_cancelled:
        return reactivex.never()
    ctx.increment_llm_call_count()
    stream = ctx.run_config.streaming_mode is StreamingMode.SSE
    responses = agent.model.generate_content(request, stream)
    after = agent.after_model_callbacks
    if not after:
        return responses

    def apply_after(response: LlmResponse) -> LlmResponse:
        for callback in after:
            result = _invoke("after_model_callback", agent, callback, callback_ctx, response)
            if result is None:
                continue
            if not isinstance(result, LlmResponse):
                raise ConfigurationError(
                    f"after_model_callback of agent {agent.name!r} returned {type(result).__name__}; "
                    "expected None or an LlmResponse"
                )
            return result.model_copy(update={"partial": response.partial})
        return response

    return responses.pipe(ops.map(apply_after))


def build_request(agent: LlmAgent, ctx: InvocationContext, session: Session, readonly: ReadonlyContext) -> LlmRequest:
    """The request of one step: instruction, the stored history, the tools' declarations."""
    instruction = agent.instruction
    if callable(instruction):
        text = _invoke("instruction provider", agent, instruction, readonly)
    else:
        text = inject_session_state(
            instruction, readonly.state, agent_name=agent.name, artifacts=artifact_loader(ctx.artifact_service, session)
        )
    contents: list[Content] = []
    for event in session.events:
        content = event.content
        if content is None or not content.parts or event.partial:
            continue
        if content.role is None:
            content = content.model_copy(update={"role": "user" if event.author == "user" else "model"})
        contents.append(content)
    config = request_config(agent.generate_content_config, text or None, tool_declarations(agent.tools))
    return LlmRequest(contents=tuple(contents), config=config)


def _with_call_ids(step: _Step, content: Content | None) -> Content | None:
    """Give function calls without an id one, the same for the same call of a partial and its final."""
    if content is None or all(p.function_call is None or p.function_call.id for p in content.parts):
        return content
    parts: list[Part] = []
    position = 0
    for part in content.parts:
        call = part.function_call
        if call is not None:
            if not call.id:
                key = (position, call.name)
                call_id = step.call_ids.get(key)
                if call_id is None:
                    call_id = step.call_ids[key] = generate_function_call_id()
                part = part.model_copy(update={"function_call": call.model_copy(update={"id": call_id})})
            position += 1
        parts.append(part)
    return content.model_copy(update={"parts": tuple(parts)})


def _to_event(agent: LlmAgent, ctx: InvocationContext, step: _Step, response: LlmResponse) -> Event:
    total = None
    if not response.partial:
        ctx.add_usage(response.usage_metadata)
        if response.error_code is not None or not response.function_calls():  # this response ends the run
            total = ctx.total_usage_metadata
    return Event(
        invocation_id=ctx.invocation_id,
        author=agent.name,
        branch=ctx.branch,
        content=_with_call_ids(step, response.content),
        partial=response.partial,
        turn_complete=response.turn_complete,
        error_code=response.error_code,
        error_message=response.error_message,
        finish_reason=response.finish_reason,
        usage_metadata=response.usage_metadata,
        total_usage_metadata=total,
        interrupted=response.interrupted,
        model_version=response.model_version,
        custom_metadata=response.custom_metadata,
    )


def _handle_event(agent: LlmAgent, ctx: InvocationContext, step: _Step, event: Event) -> reactivex.Observable[Event]:
    if ctx.is_cancelled:
        return reactivex.never()
    if event.partial:
        step.last_event = event
        return emit_now(event)
    if step.state.has_delta():
        delta = {**event.actions.state_delta, **step.state.take_delta()}
        event = event.model_copy(update={"actions": event.actions.model_copy(update={"state_delta": delta})})

    def stored(event: Event) -> None:
        step.last_event = event

    def then_tools() -> reactivex.Observable[Event]:
        if ctx.is_cancelled:
            return reactivex.never()
        model_event = step.last_event
        if model_event is None or model_event.error_code is not None or not model_event.function_calls():
            return nothing_now()
        return _run_tools(agent, ctx, step, model_event)

    return then_now(ctx.append_event(event).pipe(ops.do_action(on_next=stored)), then_tools)


def _run_tools(agent: LlmAgent, ctx: InvocationContext, step: _Step, model_event: Event) -> reactivex.Observable[Event]:
    calls = model_event.function_calls()
    contexts: list[ToolContext] = []

    def responses() -> Iterator[reactivex.Observable[Part]]:
        for call in calls:  # pulled lazily: call n + 1 starts after call n completed
            yield _run_call(agent, ctx, step, call, contexts)

    def store(parts: list[Part]) -> reactivex.Observable[Event]:
        actions = EventActions(
            state_delta=step.state.take_delta(),
            skip_summarization=True if any(c.actions.skip_summarization for c in contexts) else None,
            escalate=True if any(c.actions.escalate for c in contexts) else None,
            artifact_delta={name: v for c in contexts for name, v in c.actions.artifact_delta.items()},
            transfer_to_agent=next(
                (c.actions.transfer_to_agent for c in reversed(contexts) if c.actions.transfer_to_agent), None
            ),
        )
        event = Event(
            invocation_id=ctx.invocation_id,
            author=agent.name,
            branch=ctx.branch,
            content=Content(role="user", parts=tuple(parts)),
            actions=actions,
            total_usage_metadata=ctx.total_usage_metadata if actions.skip_summarization else None,  # ends the run
        )

        def stored(event: Event) -> None:
            step.last_event = event

        if ctx.is_cancelled:
            return reactivex.never()
        return ctx.append_event(event).pipe(ops.do_action(on_next=stored))

    return reactivex.concat_with_iterable(responses()).pipe(ops.to_list(), ops.flat_map(store))


def _run_call(
    agent: LlmAgent, ctx: InvocationContext, step: _Step, call: FunctionCall, contexts: list[ToolContext]
) -> reactivex.Observable[Part]:
    if ctx.is_cancelled:
        return reactivex.never()
    tool_ctx = ToolContext(ctx, step.state, call.id)
    contexts.append(tool_ctx)

    def to_part(outcome: ToolCallOutcome) -> Part:
        outcome.log_failure(logger, f"agent {agent.name!r}, invocation {ctx.invocation_id}: ")
        return Part(function_response=outcome.response)

    return within(step.telemetry, call_tool(agent.tools_by_name, call, tool_ctx)).pipe(ops.map(to_part))


def _run_live(agent: LlmAgent, ctx: InvocationContext) -> reactivex.Observable[Event]:
    """BIDI: open ``model.connect``; a refusal fails the run at once. Live flows are not implemented."""

    def live(session: Session) -> reactivex.Observable[Event]:
        state = State(session.state)
        request = build_request(agent, ctx, session, ReadonlyContext(ctx, state))
        ctx.increment_llm_call_count()
        connection = agent.model.connect(request)  # the default BaseLlm.connect raises UnsupportedOperationError
        connection.close()
        return fail_now(
            UnsupportedOperationError(
                f"rxllm.agents does not run live (BIDI) flows yet; model {agent.model.model!r} accepted the "
                "connection, which was closed. Use StreamingMode.SSE or NONE."
            )
        )

    return _session_now(ctx).pipe(ops.flat_map(live))


def as_callbacks(value: Callable[..., Any] | Sequence[Callable[..., Any]] | None, kind: str) -> tuple[Any, ...]:
    """Normalize a callback argument (one callable, several, or None) to a tuple."""
    if value is None:
        return ()
    if callable(value):
        return (value,)
    callbacks = tuple(value)
    for callback in callbacks:
        if not callable(callback):
            raise ConfigurationError(f"{kind} must be callables, got {type(callback).__name__}")
    return callbacks
