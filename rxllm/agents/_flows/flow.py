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
concatenated with ``rxllm._rx.direct.concat_now`` (no scheduler hop), so step *n + 1* is created and
subscribed only when step *n* completed, and step *n* completes only after its last store completed.

The flow reads the agent it runs through :class:`~.flow_agent.FlowAgent` (``LlmAgent`` is one),
so the agent module imports the flow and never the reverse (ADK Java's ``LlmAgent`` holds its
``BaseLlmFlow`` the same way).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import Any, TypeVar, cast

import reactivex
from pydantic import BaseModel, JsonValue
from pydantic_core import PydanticSerializationError, to_jsonable_python
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.disposable import Disposable, SerialDisposable

from ..._core import prevalidated
from ..._core.errors import ConfigurationError, RxLlmError, ToolError
from ..._core.types import (
    Content,
    FunctionCall,
    FunctionResponse,
    GenerateContentConfig,
    LlmRequest,
    LlmResponse,
    Part,
    Tool,
)
from ..._models.aggregation import generate_function_call_id
from ..._rx.direct import (
    Direct,
    TwoStages,
    collect_then,
    concat_map_items,
    concat_map_now,
    concat_now,
    defer_now,
    emit_now,
    emitted,
    fail_now,
    ignore_items,
    nothing_now,
    tap_next,
    then_now,
)
from ..._telemetry.otel import TracedScope, otel, traced, usage_attributes, within
from ..._tools import (
    BaseTool,
    BuiltInTool,
    CallbackContext,
    FunctionTool,
    ReadonlyContext,
    ToolCallOutcome,
    ToolConfirmation,
    ToolContext,
    ToolRuntime,
    call_tool,
    call_tool_then,
    request_config,
    tool_declarations,
)
from ..._tools._toolset import ToolGroup, group_tools
from .._invocation.base import BaseAgent, InvocationContext
from .._invocation.callbacks import Call, callback_chain
from .._invocation.live_request_queue import LiveRequest, LiveRequestQueue
from .._invocation.run_config import StreamingMode
from .._sessions.base import Session
from .._sessions.event import Event, EventActions, new_actions, prevalidated_event
from .._sessions.state import State
from .confirmation import calls_to_resume, request_confirmation_event
from .contents_cache import session_request_contents
from .flow_agent import FlowAgent, is_tree_llm_agent
from .instructions import ArtifactLoader, artifact_loader, identity_instruction, inject_session_state
from .output_schema import (
    SET_MODEL_RESPONSE,
    SET_MODEL_RESPONSE_INSTRUCTION,
    SetModelResponseTool,
    output_schema_config,
    structured_response_text,
    validate_output,
)
from .tool_requests import edits_requests, process_request_by_tools
from .transfer import TRANSFER_TOOL, transfer_instruction, transfer_targets

__all__ = ["build_request", "run_llm_flow"]

logger = logging.getLogger("rxllm.agents")

_NOTHING: reactivex.Observable[Any] = nothing_now()  # (one Observable for every step: no call to make it)
# (the flow reads ``ctx._shared.cancelled``, what ``ctx.is_cancelled`` returns, without the property's call)

T = TypeVar("T")


class _Step:
    """What one step has seen so far (touched only in the step's serialized Rx callbacks)."""

    __slots__ = ("call_ids", "last_event", "state", "static_tools", "structured", "tools")

    state: State  # the session's state as the step fetched it: set when it does (nothing reads it before)

    def __init__(self) -> None:
        self.last_event: Event | None = None
        self.call_ids: dict[tuple[int, str], str] = {}
        self.tools: Mapping[str, BaseTool] = {}
        self.structured: dict[str, Any] | None = None  # the arguments of a successful set_model_response call
        self.static_tools = False  # the step's tool groups were known without a subscription (no toolset)


@functools.lru_cache(maxsize=64)
def _set_model_response_tool(schema: type[BaseModel]) -> SetModelResponseTool:
    return SetModelResponseTool(schema)


class _StepTools:
    """What a step derives from its tool groups (the tools, who edits the request, the request's
    tools by name): kept per agent for the last groups it had, reused while the agent's
    ``canonical_tool_groups`` emits the very same groups (static tools) and its transfer targets
    are the same agents."""

    __slots__ = (
        "by_name",
        "config",
        "declarations",
        "edits",
        "groups",
        "request_tools",
        "targets",
        "tools",
    )

    def __init__(self, agent: FlowAgent, groups: tuple[ToolGroup, ...], targets: list[BaseAgent]) -> None:
        self.groups = groups
        self.targets = targets
        self.tools = group_tools(groups)
        self.edits = edits_requests(groups)
        self.request_tools = _request_tools(agent, targets, self.tools)
        self.by_name: Mapping[str, BaseTool] = {tool.name: tool for tool in self.request_tools}
        # the declarations, when every tool declares what its construction fixed (FunctionTool's own,
        # from its own name and description: a subclass may compute those each time they are read)
        self.declarations: tuple[Tool, ...] | None = None
        if all(
            not isinstance(tool, BuiltInTool)
            and type(tool).declaration is FunctionTool.declaration
            and type(tool).name is FunctionTool.name
            and type(tool).description is FunctionTool.description
            for tool in self.request_tools
        ):
            self.declarations = tool_declarations(self.request_tools)
        # the last request config built from them, as (base config, system instruction, config): one
        # tuple, read and replaced whole (runs of the agent on other threads share it)
        self.config: tuple[GenerateContentConfig, str | None, GenerateContentConfig] | None = None

    def request_config(self, base: GenerateContentConfig, text: str | None) -> GenerateContentConfig:
        """``request_config(base, text, tool_declarations(self.request_tools))``, reused while nothing changed."""
        if self.declarations is None:
            return request_config(base, text, tool_declarations(self.request_tools))
        last = self.config
        if last is not None and last[0] is base and last[1] == text:
            return last[2]
        config = request_config(base, text, self.declarations)
        self.config = (base, text, config)
        return config


def _step_tools(agent: FlowAgent, groups: tuple[ToolGroup, ...], *, static: bool) -> _StepTools:
    targets = transfer_targets(agent)
    if not static:
        return _StepTools(agent, groups, targets)
    found: _StepTools | None = getattr(agent, "_kept_step_tools", None)
    if (
        found is None
        or found.groups is not groups
        or len(found.targets) != len(targets)
        or (targets and any(a is not b for a, b in zip(found.targets, targets, strict=True)))
    ):
        found = _StepTools(agent, groups, targets)
        # kept on the agent, not in a weak map keyed by it: its targets (the parent, the peers) and
        # tools may refer back to the agent, and a map's value that does keeps its key alive for good
        with contextlib.suppress(AttributeError):  # (an agent that takes no attribute: built each step)
            agent._kept_step_tools = found  # type: ignore[attr-defined]
    return found


def _answers_through_tool(agent: FlowAgent, tools: tuple[BaseTool, ...]) -> bool:
    """Whether the agent gives its structured answer with ``set_model_response``: it has an
    ``output_schema`` and tools (ADK Java's ``OutputSchema`` asks ``toolsUnion()``, so a toolset
    that lists nothing counts)."""
    return agent.output_schema is not None and (bool(tools) or bool(agent.tools_union))


def _request_tools(agent: FlowAgent, targets: list[BaseAgent], tools: tuple[BaseTool, ...]) -> tuple[BaseTool, ...]:
    """The tools of a request, in ADK Java's order: ``set_model_response`` (its ``OutputSchema``
    request processor adds it first), ``transfer_to_agent`` when the agent has transfer targets
    (``AgentTransfer``, the last request processor), then the step's own (``tools``, whose
    ``processLlmRequest`` runs after every request processor).

    Raises:
        ConfigurationError: one of the step's tools has the name of a tool the flow adds.
    """
    added: list[BaseTool] = []
    if _answers_through_tool(agent, tools):
        added.append(_set_model_response_tool(agent.output_schema))
    if targets:
        added.append(TRANSFER_TOOL)
    if not added:
        return tools
    names = {tool.name for tool in tools}
    for tool in added:
        if tool.name in names:
            why = "it has an output_schema and tools" if tool.name == SET_MODEL_RESPONSE else "it can transfer"
            raise ConfigurationError(
                f"LlmAgent {agent.name!r} has a tool named {tool.name!r}, the name of the tool ADK adds because "
                f"{why}: rename the tool"
            )
    return (*added, *tools)


def run_llm_flow(agent: FlowAgent, ctx: InvocationContext) -> reactivex.Observable[Event]:
    """The events of one run of ``agent``: cold; disposing stops the model call and all later work."""
    if ctx.run_config.streaming_mode is StreamingMode.BIDI:
        return _run_live(agent, ctx)

    steps = _Steps(agent, ctx)
    if otel() is None:  # no span to run in: what traced() would subscribe, without its defer
        return concat_now(steps)

    def start(scope: TracedScope | None) -> reactivex.Observable[Event]:
        if scope is not None:  # what this run's model calls, tools and transfers nest under
            ctx.telemetry_context = scope.context
        return concat_now(steps)

    def on_end(scope: TracedScope) -> None:
        usage_attributes(scope.span, ctx.total_usage_metadata)

    def attributes() -> dict[str, Any]:  # made only when a span is
        found: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent.name,
            "gen_ai.conversation.id": ctx.session.id,
            "gen_ai.request.model": agent.model.model,
            "rxllm.invocation_id": ctx.invocation_id,
        }
        if agent.description:
            found["gen_ai.agent.description"] = agent.description
        return found

    def parent() -> object:  # the runner's (the subscriber's span) or, for a sub-agent, its parent agent's
        return ctx.telemetry_context

    return traced(start, f"invoke_agent {agent.name}", attributes, parent=parent, on_end=on_end)


class _Steps:
    """The steps of one run, for ``concat_now``: each subscription iterates them anew (a run
    subscribed twice runs twice, as ``traced``'s defer made it)."""

    __slots__ = ("agent", "ctx")

    def __init__(self, agent: FlowAgent, ctx: InvocationContext) -> None:
        self.agent = agent
        self.ctx = ctx

    def __iter__(self) -> Iterator[reactivex.Observable[Event]]:
        agent, ctx = self.agent, self.ctx
        while not ctx._shared.cancelled:
            step = _Step()
            yield _one_step(agent, ctx, step)
            target = step.last_event.actions.transfer_to_agent if step.last_event is not None else None
            if target and not step.last_event.partial:  # type: ignore[union-attr]
                yield _transfer(agent, ctx, target)
                return
            if not _should_continue(agent, ctx, step):
                return
        yield reactivex.never()  # disposed: start nothing more


def _transfer(agent: FlowAgent, ctx: InvocationContext, target: str) -> reactivex.Observable[Event]:
    """Continue the invocation with the agent the model transferred to (ADK's ``BaseLlmFlow``)."""
    if ctx.is_cancelled:
        return reactivex.never()
    next_agent = agent.root_agent.find_agent(target)
    if next_agent is None:
        return fail_now(
            ConfigurationError(
                f"agent {agent.name!r} transferred to {target!r}, which is not an agent of the tree rooted at "
                f"{agent.root_agent.name!r}"
            )
        )
    return next_agent.run_async(ctx)


def _should_continue(agent: FlowAgent, ctx: InvocationContext, step: _Step) -> bool:
    last = step.last_event
    if last is None:
        logger.warning(
            "agent %r, invocation %s: the model call produced no response; ending the run",
            agent.name,
            ctx.invocation_id,
        )
        return False
    fields = last.__dict__  # (read once: each attribute read of a pydantic model is a slow lookup)
    if fields["partial"]:
        logger.warning(
            "agent %r, invocation %s: the model's stream ended with a partial response and no final one "
            "(a generate_content contract violation); nothing of this turn was stored and its tool calls, if "
            "any, were not run; ending the run",
            agent.name,
            ctx.invocation_id,
        )
        return False
    if fields["error_code"] is not None or fields["actions"].end_invocation:  # ADK Java's BaseLlmFlow: endInvocation
        return False
    return not last.is_final_response()


def _one_step(agent: FlowAgent, ctx: InvocationContext, step: _Step) -> reactivex.Observable[Event]:
    def model_step(
        session: Session, groups: tuple[ToolGroup, ...], readonly: ReadonlyContext
    ) -> reactivex.Observable[Event]:
        found = _step_tools(agent, groups, static=step.static_tools)
        # what the step's model callbacks get; None when there is no callback (none is made for nothing)
        has_callbacks = (
            ctx.plugins or agent.before_model_callbacks or agent.after_model_callbacks or agent.on_model_error_callbacks
        )
        callback_ctx = CallbackContext(ctx, step.state) if has_callbacks else None
        step.tools = found.by_name
        request = _build_request(agent, ctx, session, readonly, found.tools, found.targets, found.request_tools, found)

        invocation_id, author, branch, shared = ctx.invocation_id, agent.name, ctx.branch, ctx._shared

        def handle_response(response: LlmResponse) -> reactivex.Observable[Event] | Event:
            if _FAST_EVENT and type(response) is LlmResponse:
                fields = response.__dict__  # (its fields, read once: each attribute read is a slow lookup)
                if (
                    fields["partial"] and fields["custom_metadata"] is None and not shared.cancelled
                ):  # the usual one: what _to_event and _handle_event do for a partial, passed on as an item
                    content = _with_call_ids(step, fields["content"])
                    event = _event_of(invocation_id, author, branch, content, None, None, fields)
                    step.last_event = event
                    return event
            event = _to_event(agent, ctx, step, response)
            if event.partial and not ctx._shared.cancelled:  # what _handle_event does for it, passed on as an item
                step.last_event = event
                return event
            return _handle_event(agent, ctx, step, event)

        if not found.edits and callback_ctx is None:
            # the usual step: no request edits, no plugin, no model callback: the model call itself, now
            # (what call and _model_call below do for it, without their calls)
            if shared.cancelled:
                responses: reactivex.Observable[LlmResponse] = reactivex.never()
            else:
                ctx.increment_llm_call_count()
                responses = agent.model.generate_content(request, ctx.run_config.streaming_mode is StreamingMode.SSE)
            telemetry = ctx.telemetry_context
            if telemetry is not None:
                responses = within(telemetry, responses)
            return concat_map_items(responses, handle_response, Event)

        def call(processed: LlmRequest) -> reactivex.Observable[Event]:
            if callback_ctx is None:  # no plugin, no model callback: the model call itself
                responses = _model_call(agent, ctx, None, processed)
            else:
                responses = _call_model(agent, ctx, callback_ctx, processed)
            return concat_map_items(within(ctx.telemetry_context, responses), handle_response, Event)

        if not found.edits:
            return call(request)
        tool_ctx = ToolContext(ctx, step.state, None)  # the tools edit the request (ADK's processLlmRequest)
        owner, loop = _owner(agent), ctx.tool_runtime.loop
        processed = process_request_by_tools(groups, request, tool_ctx, owner, loop)
        return collect_then(processed, lambda requests: call(requests[-1]))

    def compact_then_model_step(
        session: Session, groups: tuple[ToolGroup, ...], readonly: ReadonlyContext
    ) -> reactivex.Observable[Event]:
        # ADK Java's Compaction request processor, before the contents are built: the summary it
        # stores is part of this request's history
        compactor = ctx.request_compactor
        if compactor is None:
            return model_step(session, groups, readonly)

        def with_summary(stored: list[Event]) -> reactivex.Observable[Event]:
            if not stored:
                return model_step(session, groups, readonly)
            return model_step(session.model_copy(update={"events": (*session.events, *stored)}), groups, readonly)

        return collect_then(compactor.compact(session, ctx.session_service), with_summary)

    def resume_then_model_step(
        session: Session, groups: tuple[ToolGroup, ...], readonly: ReadonlyContext
    ) -> reactivex.Observable[Event]:
        # ADK's RequestConfirmationLlmRequestProcessor: calls the client confirmed (or refused) run
        # again first, their responses stored before the request is built
        pending = calls_to_resume(session.events, agent.name)
        if pending is None:
            if ctx.request_compactor is None:  # (the usual step: nothing to resume or compact)
                return model_step(session, groups, readonly)
            return compact_then_model_step(session, groups, readonly)
        tools = group_tools(groups)
        step.tools = {tool.name: tool for tool in _request_tools(agent, transfer_targets(agent), tools)}
        calls = Event(
            invocation_id=ctx.invocation_id,
            author=agent.name,
            content=Content(role="model", parts=tuple(Part(function_call=c) for c in pending.calls)),
        )
        resumed = _run_tools(agent, ctx, step, calls, pending.confirmations)

        def fetched() -> reactivex.Observable[Event]:
            return ctx._with_session_now(lambda now: compact_then_model_step(now, groups, readonly))

        return then_now(resumed, fetched)

    def with_session(session: Session) -> reactivex.Observable[Event]:
        step.state = State(session.state)  # toolsets are expanded before every model call (ADK's canonicalTools)
        readonly = ReadonlyContext(ctx, step.state)  # the step's view: its toolsets' and its instructions'
        groups = agent.canonical_tool_groups(readonly)
        known = emitted(groups)
        if known is not None:  # known now (no toolset): nothing to subscribe to for them
            step.static_tools = True
            return resume_then_model_step(session, known[0], readonly)
        return collect_then(groups, lambda found: resume_then_model_step(session, found[-1], readonly))

    # made when run_llm_flow's concat_now pulls it, and subscribed then: what an in-memory store
    # answers is read now (what an exception raises is its on_error all the same)
    return ctx._with_session_made_now(with_session)


def _invoke(kind: str, agent: FlowAgent, callback: Callable[..., T], *args: Any) -> T:
    try:
        return callback(*args)
    except RxLlmError:
        raise
    except Exception as exc:
        name = getattr(callback, "__name__", repr(callback))
        raise RxLlmError(f"{kind} {name!r} of agent {agent.name!r} raised {type(exc).__name__}: {exc}") from exc


def _owner(agent: FlowAgent) -> str:
    return f"agent {agent.name!r}"


def _model_answer(kind: str) -> Callable[[object], LlmResponse]:
    def accept(answer: object) -> LlmResponse:
        if isinstance(answer, LlmResponse):
            return answer
        raise ConfigurationError(f"{kind} returned {type(answer).__name__}; expected None or an LlmResponse")

    return accept


def _call_model(
    agent: FlowAgent, ctx: InvocationContext, callback_ctx: CallbackContext | None, request: LlmRequest
) -> reactivex.Observable[LlmResponse]:
    """Before-model callbacks (plugins first), the model call, on-error and after-model callbacks."""
    current = [request]
    calls: list[tuple[object, Call]] = []
    for plugin in ctx.plugins:
        calls.append(
            (plugin.before_model_callback, partial(_before_model, plugin.before_model_callback, callback_ctx, current))
        )
    for callback in agent.before_model_callbacks:
        calls.append((callback, partial(_before_model, callback, callback_ctx, current)))

    def accept(answer: object) -> LlmResponse | None:
        if isinstance(answer, LlmRequest):
            current[0] = answer
            return None
        if isinstance(answer, LlmResponse):
            return answer
        raise ConfigurationError(
            f"before_model_callback returned {type(answer).__name__}; expected None, an LlmRequest or an LlmResponse"
        )

    def call_or_answer(answers: list[LlmResponse]) -> reactivex.Observable[LlmResponse]:
        if answers:
            return emit_now(answers[0])
        return _model_call(agent, ctx, callback_ctx, current[0])

    if not calls:
        return _model_call(agent, ctx, callback_ctx, request)
    return collect_then(
        callback_chain("before_model_callback", _owner(agent), calls, accept, loop=ctx.tool_runtime.loop),
        call_or_answer,
    )


def _before_model(
    callback: Callable[..., object], callback_ctx: CallbackContext | None, current: list[LlmRequest]
) -> object:
    return callback(callback_ctx, current[0])


def _model_call(
    agent: FlowAgent, ctx: InvocationContext, callback_ctx: CallbackContext | None, request: LlmRequest
) -> reactivex.Observable[LlmResponse]:
    if ctx._shared.cancelled:
        return reactivex.never()
    ctx.increment_llm_call_count()
    stream = ctx.run_config.streaming_mode is StreamingMode.SSE
    if callback_ctx is None:  # no callback at all (the model step's callback_ctx): nothing to wrap the responses in
        return agent.model.generate_content(request, stream)
    return _with_model_callbacks(agent, ctx, callback_ctx, request, agent.model.generate_content(request, stream))


def _with_model_callbacks(
    agent: FlowAgent,
    ctx: InvocationContext,
    callback_ctx: CallbackContext | None,
    request: LlmRequest,
    responses: reactivex.Observable[LlmResponse],
) -> reactivex.Observable[LlmResponse]:
    """The model's responses through the on-model-error and after-model callbacks (plugins first)."""
    on_error = [p.on_model_error_callback for p in ctx.plugins] + list(agent.on_model_error_callbacks)
    if on_error:
        assert callback_ctx is not None  # made whenever there is a callback (the model step's callback_ctx)

        def recover(error: Exception, _: reactivex.Observable[LlmResponse]) -> reactivex.Observable[LlmResponse]:
            calls: list[tuple[object, Call]] = [
                (callback, partial(callback, callback_ctx, request, error)) for callback in on_error
            ]

            def answer_or_fail(answers: list[LlmResponse]) -> reactivex.Observable[LlmResponse]:
                return emit_now(answers[0]) if answers else fail_now(error)

            kind = "on_model_error_callback"
            return callback_chain(kind, _owner(agent), calls, _model_answer(kind), loop=ctx.tool_runtime.loop).pipe(
                ops.to_list(), ops.flat_map(answer_or_fail)
            )

        responses = responses.pipe(ops.catch(recover))
    after = [p.after_model_callback for p in ctx.plugins] + list(agent.after_model_callbacks)
    if not after:
        return responses
    assert callback_ctx is not None  # made whenever there is a callback (the model step's callback_ctx)

    def apply_after(response: LlmResponse) -> reactivex.Observable[LlmResponse]:
        calls: list[tuple[object, Call]] = [(callback, partial(callback, callback_ctx, response)) for callback in after]
        kind = "after_model_callback"

        def keep_partial_flag(answer: object) -> LlmResponse:
            return _model_answer(kind)(answer).model_copy(update={"partial": response.partial})

        return callback_chain(kind, _owner(agent), calls, keep_partial_flag, loop=ctx.tool_runtime.loop).pipe(
            ops.default_if_empty(response)
        )

    return responses.pipe(ops.concat_map(apply_after))


def _instruction_text(
    agent: FlowAgent, instruction: str | Callable[..., str], readonly: ReadonlyContext, artifacts: ArtifactLoader | None
) -> str:
    if callable(instruction):
        return _invoke("instruction provider", agent, instruction, readonly)
    return inject_session_state(instruction, readonly.state, agent_name=agent.name, artifacts=artifacts)


def build_request(
    agent: FlowAgent,
    ctx: InvocationContext,
    session: Session,
    readonly: ReadonlyContext,
    tools: tuple[BaseTool, ...] | None = None,
) -> LlmRequest:
    """The request of one step: the instructions, the history as ``_contents`` builds it, the tools.

    The system instruction is, joined by blank lines as ADK Java's ``LlmRequest.appendInstructions``
    and in the order of its request processors: for an agent with ``output_schema`` and tools,
    the ``set_model_response`` instruction (``OutputSchema``); the root agent's
    ``global_instruction``, the agent's ``instruction``, the identity instruction (the agent's
    name and description, ADK Java's ``Identity``), then (when the agent can transfer) ADK's
    transfer instruction. With ``output_schema`` and no tools the request asks for JSON of the
    schema; with tools it declares ``set_model_response`` instead (``.output_schema``).
    ``tools`` are the step's tools (``agent.canonical_tools()``); the agent's own tools when None.
    """
    own_tools = agent.tools if tools is None else tools
    targets = transfer_targets(agent)
    request_tools = _request_tools(agent, targets, own_tools)
    return _build_request(agent, ctx, session, readonly, own_tools, targets, request_tools, None)


def _build_request(
    agent: FlowAgent,
    ctx: InvocationContext,
    session: Session,
    readonly: ReadonlyContext,
    own_tools: tuple[BaseTool, ...],
    targets: list[BaseAgent],
    request_tools: tuple[BaseTool, ...],
    kept: _StepTools | None,
) -> LlmRequest:
    """:func:`build_request` with the step's tools, transfer targets and request tools (``_request_tools``);
    ``kept`` (their :class:`_StepTools`, when the step has one) builds the config."""
    root = agent.root_agent
    artifacts = artifact_loader(ctx.artifact_service, session)
    texts = []
    schema = agent.output_schema
    # _answers_through_tool, once, in place (read twice before, a call and a property read each)
    through_tool = schema is not None and (bool(own_tools) or bool(agent.tools_union))
    if through_tool:
        texts.append(SET_MODEL_RESPONSE_INSTRUCTION)
    if is_tree_llm_agent(root) and root.global_instruction:
        texts.append(_instruction_text(agent, root.global_instruction, readonly, artifacts))
    texts.append(_instruction_text(agent, agent.instruction, readonly, artifacts))
    texts.append(identity_instruction(agent.name, agent.description))
    if targets:
        texts.append(transfer_instruction(agent, targets))
    text = "\n\n".join(filter(None, texts))  # (the texts that are not empty)
    # request_contents with safe_content on each (a stored value JSON cannot carry must not break the
    # session), built incrementally from what the previous call of this session saw
    contents = session_request_contents(
        session, agent_name=agent.name, branch=ctx.branch, include_contents=agent.include_contents
    )
    if kept is not None:
        config = kept.request_config(agent.generate_content_config, text or None)
    else:
        config = request_config(agent.generate_content_config, text or None, tool_declarations(request_tools))
    if schema is not None and not through_tool:
        config = config.model_copy(update=output_schema_config(schema))
    if type(contents) is tuple and type(config) is GenerateContentConfig:  # (always: what validation keeps)
        return prevalidated.from_template(LlmRequest, _REQUEST_TEMPLATE, {"contents": contents, "config": config})
    return LlmRequest(contents=contents, config=config)


_CONTENT_TEMPLATE = prevalidated.template(Content, frozenset({"role", "parts"}))


def _response_content(parts: list[Part]) -> Content:
    """``Content(role="user", parts=tuple(parts))``: the parts are the calls' ``Part`` instances."""
    if all(type(part) is Part for part in parts):
        return prevalidated.from_template(Content, _CONTENT_TEMPLATE, {"role": "user", "parts": tuple(parts)})
    return Content(role="user", parts=tuple(parts))


_REQUEST_TEMPLATE = prevalidated.template(LlmRequest, frozenset({"contents", "config"}))
_PART_TEMPLATE = prevalidated.template(Part, frozenset({"function_response"}))


def _with_call_ids(step: _Step, content: Content | None) -> Content | None:
    """Give function calls without an id one, the same for the same call of a partial and its final."""
    if content is None:
        return content
    for part in content.parts:  # (a loop, not all(...): this runs for every response)
        if part.function_call is not None and not part.function_call.id:
            break
    else:
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


_EVENT_FIELDS = (
    "id",
    "invocation_id",
    "author",
    "content",
    "actions",
    "long_running_tool_ids",
    "partial",
    "turn_complete",
    "error_code",
    "error_message",
    "finish_reason",
    "usage_metadata",
    "total_usage_metadata",
    "interrupted",
    "branch",
    "timestamp",
    "custom_metadata",
    "model_version",
    "input_transcription",
    "output_transcription",
    "go_away",
    "live_session_resumption_update",
    "tool_call_cancellation",
)
# what Event(...) in _to_event sets: every field but the three with a default factory
_RESPONSE_EVENT_SET = frozenset(_EVENT_FIELDS) - {"id", "actions", "timestamp"}
_EVENT_DEFAULTS = cast(
    "tuple[Callable[[], Any], ...]",
    tuple(Event.model_fields[name].default_factory for name in ("id", "actions", "timestamp")),
)
# the fast path builds exactly what validation would, as long as Event is what it was written for
_FAST_EVENT = (
    tuple(Event.model_fields) == _EVENT_FIELDS
    and prevalidated.buildable(Event)
    and all(callable(factory) for factory in _EVENT_DEFAULTS)
)

if _FAST_EVENT and _EVENT_DEFAULTS[1] is EventActions:  # a fresh EventActions() without validating its defaults
    _EVENT_DEFAULTS = (_EVENT_DEFAULTS[0], new_actions, _EVENT_DEFAULTS[2])


def _response_event(
    invocation_id: str,
    author: str,
    branch: str | None,
    content: Content | None,
    long_running: tuple[str, ...] | None,
    total: Any,
    response: LlmResponse,
) -> Event:
    """``Event(...)`` of :func:`_to_event` without validating again what is validated already: every
    value is the response's own (a validated ``LlmResponse``, the same field types as ``Event``'s;
    its one mutable field, ``custom_metadata``, is left None: the caller validates it, or gives the
    copy :func:`_metadata_copy` makes to :func:`_event_of`) or the context's. The same ``__dict__``
    (in field order), fields set, and no extra or private values."""
    return _event_of(invocation_id, author, branch, content, long_running, total, response.__dict__)


def _event_of(
    invocation_id: str,
    author: str,
    branch: str | None,
    content: Content | None,
    long_running: tuple[str, ...] | None,
    total: Any,
    fields: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> Event:
    """:func:`_response_event` of the response whose ``__dict__`` is ``fields`` (read once by the
    caller: each attribute read of a pydantic model is a slow lookup, a ``__dict__`` key is not),
    with ``metadata`` (the response's ``custom_metadata`` as :func:`_metadata_copy` copied it) as
    its ``custom_metadata``."""
    new_id, new_actions, now = _EVENT_DEFAULTS
    return prevalidated.instance(
        Event,
        {
            "id": new_id(),
            "invocation_id": invocation_id,
            "author": author,
            "content": content,
            "actions": new_actions(),
            "long_running_tool_ids": long_running,
            "partial": fields["partial"],
            "turn_complete": fields["turn_complete"],
            "error_code": fields["error_code"],
            "error_message": fields["error_message"],
            "finish_reason": fields["finish_reason"],
            "usage_metadata": fields["usage_metadata"],
            "total_usage_metadata": total,
            "interrupted": fields["interrupted"],
            "branch": branch,
            "timestamp": now(),
            "custom_metadata": metadata,
            "model_version": fields["model_version"],
            "input_transcription": fields["input_transcription"],
            "output_transcription": fields["output_transcription"],
            "go_away": fields["go_away"],
            "live_session_resumption_update": fields["live_session_resumption_update"],
            "tool_call_cancellation": fields["tool_call_cancellation"],
        },
        set(_RESPONSE_EVENT_SET),
    )


def _to_event(agent: FlowAgent, ctx: InvocationContext, step: _Step, response: LlmResponse) -> Event:
    fields = response.__dict__  # (the response's fields, read once: each attribute read is a slow lookup)
    exact = _FAST_EVENT and type(response) is LlmResponse
    partial = fields["partial"]
    original = fields["content"]
    total = None
    calls = True  # (whether the content may hold function calls)
    if not partial:
        ctx.add_usage(fields["usage_metadata"])
        # this response ends the run (LlmResponse's own function_calls(), read off the parts)
        calls = _has_function_call(original) if exact else bool(response.function_calls())
        if fields["error_code"] is not None or not calls:
            total = ctx.total_usage_metadata
        if not calls and not (exact and type(original) is Content):  # (a subclass answered: look at the parts)
            calls = True
    long_running: tuple[str, ...] | None = None
    if not calls:  # a final of the very Content type without a call: no id to give, no long-running call
        content = original
    else:
        content = _with_call_ids(step, original)
        if content is not None and not partial:
            long_running = _long_running_ids(step, content)
    if exact:
        metadata = fields["custom_metadata"]
        if metadata is None:
            return _event_of(ctx.invocation_id, agent.name, ctx.branch, content, long_running, total, fields)
        copied = _metadata_copy(metadata)  # (a provider's final has some: its raw finish reason)
        if copied is not None:
            return _event_of(ctx.invocation_id, agent.name, ctx.branch, content, long_running, total, fields, copied)
    return Event(
        invocation_id=ctx.invocation_id,
        author=agent.name,
        branch=ctx.branch,
        content=content,
        long_running_tool_ids=long_running,
        partial=partial,
        turn_complete=fields["turn_complete"],
        error_code=fields["error_code"],
        error_message=fields["error_message"],
        finish_reason=fields["finish_reason"],
        usage_metadata=fields["usage_metadata"],
        total_usage_metadata=total,
        interrupted=fields["interrupted"],
        model_version=fields["model_version"],
        custom_metadata=fields["custom_metadata"],
        input_transcription=fields["input_transcription"],
        output_transcription=fields["output_transcription"],
        go_away=fields["go_away"],
        live_session_resumption_update=fields["live_session_resumption_update"],
        tool_call_cancellation=fields["tool_call_cancellation"],
    )


_JSON_SCALARS = (str, int, float, bool, type(None))
# a response's custom_metadata is validated as an event's is: validating its (valid) value again gives a copy
_METADATA_COPIES = (
    LlmResponse.model_fields["custom_metadata"].annotation == Event.model_fields["custom_metadata"].annotation
    and not LlmResponse.model_fields["custom_metadata"].metadata
    and not Event.model_fields["custom_metadata"].metadata
)


class _NotPlain(Exception):
    """A value :func:`_plain_copy` does not copy (validation decides)."""


def _plain_copy(value: Any) -> Any:
    kind = type(value)
    if kind in _JSON_SCALARS:
        return value
    if kind is dict:
        copied = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copied[key] = _plain_copy(item)
        return copied
    if kind is list:
        return [_plain_copy(item) for item in value]
    raise _NotPlain


def _metadata_copy(metadata: Any) -> dict[str, Any] | None:
    """What validating a validated response's ``custom_metadata`` (a ``dict[str, JsonValue]``) as the
    event's gives: new dicts and lists all the way down, the same scalars (validation keeps str,
    int, float, bool and None of those exact types as they are). None when it holds anything else
    (then the event is validated): a copy is made only of what validation would have passed through."""
    if not _METADATA_COPIES or type(metadata) is not dict:
        return None
    try:
        copied: dict[str, Any] = _plain_copy(metadata)
    except (_NotPlain, RecursionError):
        return None
    return copied


def _has_function_call(content: Content | None) -> bool:
    """``bool(content.function_calls())`` (False for None), without building the list."""
    if content is None:
        return False
    if type(content) is not Content:  # (a subclass may have its own function_calls)
        return bool(content.function_calls())
    for part in content.parts:  # noqa: SIM110 (a loop, not any(...): no generator per response)
        if part.function_call is not None:
            return True
    return False


def _long_running_ids(step: _Step, content: Content) -> tuple[str, ...] | None:
    """The ids of ``content``'s function calls to long-running tools of the step (None for none)."""
    tools = step.tools
    ids: list[str] = []
    for part in content.parts:
        call = part.function_call
        if call is not None:
            call_id = call.id
            if call_id and getattr(tools.get(call.name), "is_long_running", False):
                ids.append(call_id)
    return tuple(ids) or None


def _handle_event(agent: FlowAgent, ctx: InvocationContext, step: _Step, event: Event) -> reactivex.Observable[Event]:
    if ctx._shared.cancelled:
        return reactivex.never()
    if event.partial:
        step.last_event = event
        return emit_now(event)
    output = _output_delta(agent, event)
    if step.state.has_delta() or output:
        delta = {**event.actions.state_delta, **step.state.take_delta(), **output}
        event = event.model_copy(update={"actions": event.actions.model_copy(update={"state_delta": delta})})

    def stored(event: Event) -> None:
        step.last_event = event

    def then_tools() -> reactivex.Observable[Event]:
        if ctx._shared.cancelled:
            return reactivex.never()
        model_event = step.last_event
        if model_event is None:
            return _NOTHING
        if type(model_event) is Event:  # (its fields read once: each attribute read is a slow lookup)
            fields = model_event.__dict__
            if fields["error_code"] is not None or not _has_function_call(fields["content"]):
                return _NOTHING
        elif model_event.error_code is not None or not model_event.function_calls():
            return _NOTHING
        return _run_tools(agent, ctx, step, model_event)

    return ctx._store_then(event, stored, then_tools)


def _output_delta(agent: FlowAgent, event: Event) -> dict[str, JsonValue]:
    """ADK's ``maybeSaveOutputToState``: the final text (validated with ``output_schema``) under ``output_key``."""
    key = agent.output_key
    if key is None or event.error_code is not None or not event.is_final_response() or event.content is None:
        return {}
    if not any(p.text is not None and not p.thought for p in event.content.parts):
        return {}
    text = event.text()
    if agent.output_schema is None:
        return {key: text}
    try:
        return {key: validate_output(agent.output_schema, text)}
    except ValueError as exc:
        logger.error(
            "agent %r: the reply does not validate against output_schema %s (%s); state key %r gets the raw text",
            agent.name,
            agent.output_schema.__name__,
            exc,
            key,
        )
        return {key: text}


def _run_tools(
    agent: FlowAgent,
    ctx: InvocationContext,
    step: _Step,
    model_event: Event,
    confirmations: Mapping[str, ToolConfirmation] | None = None,
) -> reactivex.Observable[Event]:
    calls = model_event.function_calls()
    contexts: list[ToolContext] = []
    answers = confirmations or {}

    def responses() -> Iterator[reactivex.Observable[Part]]:
        for call in calls:  # pulled lazily: call n + 1 starts after call n completed
            yield _run_call(agent, ctx, step, call, contexts, answers.get(call.id or ""))

    def store(parts: list[Part]) -> reactivex.Observable[Event]:
        if not parts and not step.state.has_delta():
            return nothing_now()  # every call went to a long-running tool still at work: the run pauses
        single = contexts[0].actions if len(contexts) == 1 else None
        transfer = (single.transfer_to_agent or None) if single is not None else None
        if (  # the usual step: one call, asking for no artifact or confirmation
            single is not None
            and new_actions is not EventActions  # (EventActions is still what prevalidated building was written for)
            and not single.artifact_delta
            and not single.requested_tool_confirmations
            and (transfer is None or type(transfer) is str)
        ):
            actions = prevalidated.instance(  # what EventActions(...) below validates to: every value is valid
                EventActions,
                {
                    "state_delta": step.state.take_delta(),  # (State checks every value it takes: JSON values)
                    "artifact_delta": {},
                    "skip_summarization": True if single.skip_summarization else None,
                    "transfer_to_agent": transfer,
                    "escalate": True if single.escalate else None,
                    "rewind_before_invocation_id": None,
                    "end_invocation": True if single.end_invocation else None,
                    "requested_tool_confirmations": {},
                    "compaction": None,
                },
                {
                    "state_delta",
                    "skip_summarization",
                    "escalate",
                    "end_invocation",
                    "artifact_delta",
                    "transfer_to_agent",
                    "requested_tool_confirmations",
                },
            )
        else:
            actions = EventActions(
                state_delta=step.state.take_delta(),
                skip_summarization=True if any(c.actions.skip_summarization for c in contexts) else None,
                escalate=True if any(c.actions.escalate for c in contexts) else None,
                end_invocation=True if any(c.actions.end_invocation for c in contexts) else None,
                artifact_delta={name: v for c in contexts for name, v in c.actions.artifact_delta.items()},
                transfer_to_agent=next(
                    (c.actions.transfer_to_agent for c in reversed(contexts) if c.actions.transfer_to_agent), None
                ),
                requested_tool_confirmations={
                    call_id: asked
                    for c in contexts
                    for call_id, asked in c.actions.requested_tool_confirmations.items()
                },
            )
        event = prevalidated_event(  # every value is validated already (built above, or the context's)
            {
                "invocation_id": ctx.invocation_id,
                "author": agent.name,
                "branch": ctx.branch,
                "content": _response_content(parts),
                "actions": actions,
                "total_usage_metadata": (  # this event ends the run
                    ctx.total_usage_metadata if actions.skip_summarization or actions.end_invocation else None
                ),
            }
        )

        def stored(event: Event) -> None:
            step.last_event = event

        def structured_final() -> reactivex.Observable[Event]:
            if step.structured is None:
                return _NOTHING
            return _handle_event(agent, ctx, step, _structured_event(agent, ctx, step.structured))

        if ctx._shared.cancelled:
            return reactivex.never()
        stored_response = ctx._store_then(event, stored, structured_final)
        if not actions.requested_tool_confirmations:  # (no request to build)
            return stored_response
        request = request_confirmation_event(
            model_event,
            actions.requested_tool_confirmations,
            invocation_id=ctx.invocation_id,
            author=agent.name,
            branch=ctx.branch,
        )
        if request is None:
            return stored_response
        # ADK's order: the confirmation request, then the function responses (the step's last event)
        return ctx._store_then(request, None, lambda: stored_response)

    if len(calls) == 1:  # (the usual step) one call: nothing to concatenate, its parts straight to ``store``
        only = calls[0]
        return defer_now(lambda: _run_call_then(agent, ctx, step, only, contexts, answers.get(only.id or ""), store))
    return collect_then(concat_now(responses()), store)


def _structured_event(agent: FlowAgent, ctx: InvocationContext, response: dict[str, Any]) -> Event:
    """The final model event of a ``set_model_response`` answer (ADK Java's
    ``OutputSchema.createFinalModelResponseEvent``): its text is the answer as JSON."""
    return Event(
        invocation_id=ctx.invocation_id,
        author=agent.name,
        branch=ctx.branch,
        content=Content(role="model", parts=(Part.from_text(structured_response_text(response)),)),
        total_usage_metadata=ctx.total_usage_metadata,  # it ends the run
    )


def _run_call_then(
    agent: FlowAgent,
    ctx: InvocationContext,
    step: _Step,
    call: FunctionCall,
    contexts: list[ToolContext],
    confirmation: ToolConfirmation | None,
    then: Callable[[list[Part]], reactivex.Observable[Event]],
) -> reactivex.Observable[Event]:
    """``collect_then(_run_call(...), then)``: the call's parts (one, or none) handed to ``then``."""
    return cast(reactivex.Observable[Event], _run_call(agent, ctx, step, call, contexts, confirmation, then=then))


def _run_call(
    agent: FlowAgent,
    ctx: InvocationContext,
    step: _Step,
    call: FunctionCall,
    contexts: list[ToolContext],
    confirmation: ToolConfirmation | None = None,
    *,
    then: Callable[[list[Part]], reactivex.Observable[Event]] | None = None,
) -> reactivex.Observable[Any]:
    """One call: before-tool callbacks (plugins first), the tool, on-error and after-tool callbacks.

    Emits the call's function-response part, or nothing for a long-running tool that returned
    None (its answer comes later, from the user). With ``then``: what ``then`` returns for the
    list of those parts (``collect_then(_run_call(...), then)``; with no callback and no span
    to make, the tool's outcome goes to ``then`` without an Observable of the outcome, nor of
    the parts, in between: :func:`~rxllm._tools.call_tool_then`)."""
    if ctx._shared.cancelled:
        return reactivex.never()
    tool_ctx = ToolContext(ctx, step.state, call.id, confirmation)
    contexts.append(tool_ctx)
    tool = step.tools.get(call.name)
    long_running = bool(getattr(tool, "is_long_running", False))

    def part_of(outcome: ToolCallOutcome) -> Part | None:
        if outcome.failed:  # (log_failure logs nothing for a call that succeeded: no message to format)
            outcome.log_failure(logger, f"agent {agent.name!r}, invocation {ctx.invocation_id}: ")
        if not outcome.failed and call.name == SET_MODEL_RESPONSE and isinstance(tool, SetModelResponseTool):
            step.structured = dict(outcome.response.response)
        # ADK Java's Functions: a long-running tool with no result (None or an empty map) answers later
        if long_running and not outcome.failed and not outcome.response.response:
            return None
        response = outcome.response
        if type(response) is FunctionResponse:  # (always) validation would keep it as it is
            return prevalidated.from_template(Part, _PART_TEMPLATE, {"function_response": response})
        return Part(function_response=response)

    def to_part(outcome: ToolCallOutcome) -> reactivex.Observable[Part]:
        part = part_of(outcome)
        return nothing_now() if part is None else emit_now(part)

    def to_parts(outcomes: list[ToolCallOutcome]) -> reactivex.Observable[Part]:
        if len(outcomes) == 1:
            return to_part(outcomes[0])
        return concat_now(map(to_part, outcomes))

    plugins = ctx.plugins
    before: tuple[Any, ...] | list[Any] = agent.before_tool_callbacks  # (without plugins: the agent's tuples)
    on_error: tuple[Any, ...] | list[Any] = agent.on_tool_error_callbacks
    after: tuple[Any, ...] | list[Any] = agent.after_tool_callbacks
    if plugins:
        before = [p.before_tool_callback for p in plugins] + list(before)
        on_error = [p.on_tool_error_callback for p in plugins] + list(on_error)
        after = [p.after_tool_callback for p in plugins] + list(after)
    if tool is None or not (before or on_error or after):
        if then is not None and otel() is None:  # (the usual call) no span: ``within`` would change nothing

            def subscribe(
                observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
            ) -> rx_abc.DisposableBase:
                return _ToolThen(part_of, then, observer, scheduler).start(step.tools, call, tool_ctx, ctx.tool_runtime)

            return Direct(subscribe)
        outcome = call_tool(step.tools, call, tool_ctx, runtime=ctx.tool_runtime)
        call_parts: reactivex.Observable[Part] = collect_then(within(ctx.telemetry_context, outcome), to_parts)
        return call_parts if then is None else collect_then(call_parts, then)
    args = dict(call.args)
    owner = _owner(agent)

    def answered(result: dict[str, Any]) -> ToolCallOutcome:
        return ToolCallOutcome(FunctionResponse(id=call.id, name=call.name, response=result))

    def run_tool(answers: list[dict[str, Any]]) -> reactivex.Observable[ToolCallOutcome]:
        if answers:
            return emit_now(answered(answers[0]))
        outcome = call_tool(step.tools, call, tool_ctx, runtime=ctx.tool_runtime)
        return within(ctx.telemetry_context, outcome).pipe(ops.flat_map(handle_error))

    def handle_error(outcome: ToolCallOutcome) -> reactivex.Observable[ToolCallOutcome]:
        if not outcome.failed or not on_error:
            return emit_now(outcome)
        error = outcome.error if isinstance(outcome.error, Exception) else ToolError(outcome.error_message or "")
        calls: list[tuple[object, Call]] = [(cb, partial(cb, tool, args, tool_ctx, error)) for cb in on_error]

        def pick(answers: list[dict[str, Any]]) -> ToolCallOutcome:
            return answered(answers[0]) if answers else outcome

        return callback_chain(
            "on_tool_error_callback", owner, calls, _tool_answer("on_tool_error_callback"), loop=ctx.tool_runtime.loop
        ).pipe(ops.to_list(), ops.map(pick))

    def apply_after(outcome: ToolCallOutcome) -> reactivex.Observable[ToolCallOutcome]:
        if outcome.failed or not after:
            return emit_now(outcome)
        result = dict(outcome.response.response)
        calls: list[tuple[object, Call]] = [(cb, partial(cb, tool, args, tool_ctx, result)) for cb in after]

        def pick(answers: list[dict[str, Any]]) -> ToolCallOutcome:
            return answered(answers[0]) if answers else outcome

        return callback_chain(
            "after_tool_callback", owner, calls, _tool_answer("after_tool_callback"), loop=ctx.tool_runtime.loop
        ).pipe(ops.to_list(), ops.map(pick))

    before_calls: list[tuple[object, Call]] = [(cb, partial(cb, tool, args, tool_ctx)) for cb in before]
    parts: reactivex.Observable[Part] = callback_chain(
        "before_tool_callback", owner, before_calls, _tool_answer("before_tool_callback"), loop=ctx.tool_runtime.loop
    ).pipe(ops.to_list(), ops.flat_map(run_tool), ops.flat_map(apply_after), ops.flat_map(to_part))
    return parts if then is None else collect_then(parts, then)


class _ToolThen(TwoStages):
    """``collect_then(call_tool(...) as parts, then)`` for a call with no callback and no span: the
    tool started by :func:`~rxllm._tools.call_tool_then`, its outcome made the call's parts
    (``part_of``) and handed to ``then``, whose Observable is subscribed at once (on the thread the
    outcome arrived on, as ``collect_then`` does) and forwarded to ``observer``. An exception
    ``part_of`` or ``then`` raises is delivered as ``on_error``, as is the error that ends the run
    (a tool that raised ``KeyboardInterrupt``). Disposing disposes whichever is active: the tool's
    call (its result dropped, what can be cancelled cancelled) or ``then``'s subscription."""

    __slots__ = ("_part_of", "_then")

    def __init__(
        self,
        part_of: Callable[[ToolCallOutcome], Part | None],
        then: Callable[[list[Part]], reactivex.Observable[Event]],
        observer: rx_abc.ObserverBase[Event],
        scheduler: rx_abc.SchedulerBase | None,
    ) -> None:
        super().__init__(observer, scheduler)
        self._part_of = part_of
        self._then = then

    def start(
        self, tools: Mapping[str, BaseTool], call: FunctionCall, tool_ctx: ToolContext, runtime: ToolRuntime
    ) -> _ToolThen:
        # the outcome may arrive (and ``then`` start) before this assignment: separate slots
        self.hold_first(call_tool_then(tools, call, tool_ctx, self._outcome, self._fail, runtime=runtime))
        return self

    def _fail(self, error: Exception) -> None:
        if not self._disposed:
            self._observer.on_error(error)

    def _outcome(self, outcome: ToolCallOutcome) -> None:
        if self._disposed:
            return
        try:
            part = self._part_of(outcome)
            source = self._then([] if part is None else [part])
        except Exception as exc:
            self._observer.on_error(exc)
            return
        self.follow(source)


def _tool_answer(kind: str) -> Callable[[object], dict[str, Any]]:
    def accept(answer: object) -> dict[str, Any]:
        if not isinstance(answer, Mapping):
            raise ConfigurationError(f"{kind} returned {type(answer).__name__}; expected None or a dict")
        try:
            result = to_jsonable_python(dict(answer))
        except (PydanticSerializationError, ValueError, TypeError) as exc:
            raise ConfigurationError(f"{kind} returned a dict that is not JSON: {exc}") from exc
        return cast(dict[str, Any], result)

    return accept


def _run_live(agent: FlowAgent, ctx: InvocationContext) -> reactivex.Observable[Event]:
    """BIDI, as ADK Java's ``BaseLlmFlow.runLive``: one live connection for the whole run.

    The request is built as for a step (instructions, history, tools) with the run's live options
    (``RunConfig.live_connect_config()``), then ``model.connect(request)`` opens the session
    (counted as one model call); the history, when there is one, goes first (``send_history``).
    Each request of ``ctx.live_request_queue`` is forwarded (``send_content``, ``send_realtime``;
    its close closes the connection once the sends before it were written). Each response of
    ``receive()`` passes the after-model callbacks and becomes an event, handled one after the
    other as in a step: a partial is emitted and never stored; a non-partial (a turn's text, a
    finished transcription, a turn's end, an interruption, a go-away) is stored, then emitted; its
    function calls run through the tool layer (callbacks, plugins, errors as tool results) and the
    function-response event is stored, emitted and sent back over the connection
    (``send_content``). A function response that transfers (``transfer_to_agent``) closes this
    connection and the target agent's live run continues the invocation on the same queue; a
    function response that ends the invocation (``end_invocation``) closes the connection and ends
    the run (ADK Java's ``runLive`` does both). The user's turns sent through the queue are not
    stored (as in ADK Java): the session keeps the model's side, the finished transcriptions and
    the tool events.

    The run completes when ``receive()`` completes (the queue's close, or the server's normal
    end) and fails with its error. Disposing disposes ``receive()`` (the socket closes at once)
    and the queue's reader; the runner's cancellation flag keeps any tool from starting.
    """
    queue = ctx.live_request_queue
    if queue is None:
        return fail_now(ConfigurationError("a BIDI (live) run reads a LiveRequestQueue: start it with Runner.run_live"))
    step = _Step()

    def connect_with(request: LlmRequest) -> reactivex.Observable[Event]:
        if ctx.is_cancelled:
            return reactivex.never()
        return reactivex.create(partial(_live_session, agent, ctx, step, queue, request))

    def with_tools(session: Session, groups: tuple[ToolGroup, ...]) -> reactivex.Observable[Event]:
        tools = group_tools(groups)
        step.tools = {tool.name: tool for tool in _request_tools(agent, transfer_targets(agent), tools)}
        request = build_request(agent, ctx, session, ReadonlyContext(ctx, step.state), tools)
        request = request.model_copy(update={"live_connect_config": ctx.run_config.live_connect_config()})
        tool_ctx = ToolContext(ctx, step.state, None)
        processed = process_request_by_tools(groups, request, tool_ctx, _owner(agent), ctx.tool_runtime.loop)
        return collect_then(processed, lambda requests: connect_with(requests[-1]))

    def with_session(session: Session) -> reactivex.Observable[Event]:
        step.state = State(session.state)
        groups = agent.canonical_tool_groups(ReadonlyContext(ctx, step.state))
        return collect_then(groups, lambda found: with_tools(session, found[-1]))

    return ctx._with_session_now(with_session)


def _live_session(
    agent: FlowAgent,
    ctx: InvocationContext,
    step: _Step,
    queue: LiveRequestQueue,
    request: LlmRequest,
    observer: rx_abc.ObserverBase[Event],
    scheduler: rx_abc.SchedulerBase | None = None,
) -> rx_abc.DisposableBase:
    """One live connection of :func:`_run_live`, from connect to close."""
    try:
        ctx.increment_llm_call_count()
        connection = agent.model.connect(request)  # the default BaseLlm.connect raises UnsupportedOperationError
    except Exception as exc:
        observer.on_error(exc)
        return Disposable()
    reader = SerialDisposable()

    def fail(error: Exception) -> None:  # a send failed: the session fails with its error
        connection.close(error)

    lock = threading.Lock()
    sends = {"pending": 0, "closing": False}

    def watch(sent: reactivex.Observable[None]) -> None:
        with lock:
            sends["pending"] += 1
        sent.subscribe(on_error=fail, on_completed=written)

    def written() -> None:
        with lock:
            sends["pending"] -= 1
            close = bool(sends["closing"]) and sends["pending"] == 0
        if close:
            connection.close()

    def close_when_written() -> None:  # the queue's close follows its sends, as ADK Java's concatMapCompletable
        with lock:
            sends["closing"] = True
            close = sends["pending"] == 0
        if close:
            connection.close()

    def forward(live_request: LiveRequest) -> None:
        try:
            if live_request.close:
                close_when_written()
            elif live_request.content is not None:
                watch(connection.send_content(live_request.content))
            elif live_request.blob is not None:
                watch(connection.send_realtime(live_request.blob))
        except Exception as exc:
            fail(exc)

    def handle(response: LlmResponse) -> reactivex.Observable[Event]:
        answered: list[Event] = []

        def note(event: Event) -> None:
            if not event.partial and event.function_responses():
                answered.append(event)

        event = _to_event(agent, ctx, step, response)
        if not event.partial:
            step.call_ids.clear()  # a live session's turns do not share call ids
        return then_now(tap_next(_handle_event(agent, ctx, step, event), note), lambda: answer(answered))

    def answer(answered: list[Event]) -> reactivex.Observable[Event]:
        if not answered or ctx.is_cancelled:
            return nothing_now()
        event = answered[-1]
        if event.actions.end_invocation:  # ADK Java's runLive: a tool ended the invocation
            reader.dispose()
            connection.close()
            return nothing_now()
        parts = tuple(p for p in event.content.parts if p.function_response is not None)  # type: ignore[union-attr]
        sent: reactivex.Observable[Event] = ignore_items(connection.send_content(Content(role="user", parts=parts)))
        target = event.actions.transfer_to_agent
        if not target:
            return sent

        def transfer() -> reactivex.Observable[Event]:
            reader.dispose()  # the target agent reads the queue from here on
            connection.close()
            return _transfer(agent, ctx, target)

        return then_now(sent, transfer)

    callback_ctx = CallbackContext(ctx, step.state)
    responses = _with_model_callbacks(agent, ctx, callback_ctx, request, connection.receive())
    events = concat_map_now(responses, handle).subscribe(observer, scheduler=scheduler)
    try:
        if request.contents:
            watch(connection.send_history(request.contents))
    except Exception as exc:
        fail(exc)
    reader.disposable = queue.get().subscribe(forward, fail, scheduler=scheduler)

    def dispose() -> None:
        reader.dispose()
        events.dispose()
        connection.close()

    return Disposable(dispose)
