"""``AiService``: a model, tools, a system message, a retriever and guardrails, streamed as one typed Observable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reactivex import abc as rx_abc

from .._core import prevalidated
from .._core.errors import ConfigurationError
from .._core.json_codec import without_lone_surrogates
from .._core.schema import ResponseSchema, output_schema
from .._core.types import Content, Part, Tool
from .._models.base_llm import BaseLlm
from .._rx.aio import AwaitableObservable, awaitable
from .._rx.direct import Direct
from .._tools import BaseTool, ToolLike, check_timeout, tool_declarations, tools_by_name
from ._events import AiServiceStreamingEvent
from ._guardrails import OutputGuardrail, check_guardrails
from ._interaction import Retriever, interaction_config, start_interaction
from ._relay import check_positive_int
from ._tool_execution import default_tool_scheduler

__all__ = ["DEFAULT_BUFFER_SIZE", "DEFAULT_MAX_ROUNDS", "AiService"]

DEFAULT_BUFFER_SIZE = 16384
"""Default size of the bounded buffer between the interaction's threads and the subscriber."""

DEFAULT_MAX_ROUNDS = 10
"""Default number of model calls one interaction may make."""

_CONTENT = prevalidated.template(Content, frozenset({"role", "parts"}))
_TEXT_PART = prevalidated.template(Part, frozenset({"text"}))

class AiService:
    """A tool-using turn as one cold Observable of typed events (LangChain4j's ``AiServiceStreamingEventPublisher``).

    Args:
        model: the model, any :class:`~rxllm.BaseLlm`. Models that see provider chunks (every
            :class:`~rxllm.SseChatModel`) report each tool call the moment it is complete, so its
            tool starts while the model is still streaming; for others calls arrive with the
            round's final response (see :func:`rxllm.model_stream_events`).
        tools: :class:`~rxllm.agents.BaseTool` instances or plain functions (wrapped in
            :class:`~rxllm.agents.FunctionTool`); names must be unique. A tool that asks for a
            ``tool_context`` gets one whose state lives for the interaction only (a service keeps
            no sessions). A tool that fails answers the model with ``{"error": ...}``.
        system_message: the system instruction of every model call.
        retriever: finds content for the user message (see :data:`Retriever`).
        output_guardrails: checks of the final answer (see :data:`OutputGuardrail`). With any,
            no :class:`PartialResponseEvent` is emitted at all: only the final carries the answer.
        streaming_buffer_size: how many events may wait while the subscriber is busy on another
            thread; one more fails the stream with :class:`~rxllm.BufferOverflowError`.
        tool_scheduler: where synchronous tools, the retriever and the output guardrails run
            (default: the process-wide tool pool, ``rxllm-tool_N`` threads, 32 unless
            ``RXLLM_TOOL_WORKERS`` says otherwise; never the model's I/O thread or event loop).
            Tools of one round run concurrently when it has more than one worker. ``async def``
            tools run on the loop the stream was subscribed from (else rxllm's tool loop) and are
            cancelled when the stream is disposed.
        tool_timeout: seconds a tool call may take when its tool sets no ``timeout``; past it the
            model gets an error result for that call. None (the default): no limit.
        max_rounds: the most model calls one interaction makes. When round ``max_rounds`` still
            asks for tools, its tools run and then, instead of another model call, the stream
            fails with :class:`~rxllm.LimitExceededError`.
        output_type: structured output (a pydantic model class, a type such as ``list[X]``, or a
            JSON schema dict): every model call asks for it (``response_schema``), and the final
            response carries the validated object in ``response.parsed`` (a reply that does not
            validate is an error final, ``error_code="INVALID_STRUCTURED_OUTPUT"``).

    Raises:
        ConfigurationError: a model that is not a ``BaseLlm``, duplicate tool names, a
            non-callable guardrail or retriever, a buffer size or ``max_rounds`` below 1.

    >>> from reactivex import operators as ops
    >>> from reactivex.scheduler import ImmediateScheduler
    >>> from rxllm import Chunk, ToolCallFragment
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> def get_order(order_id: str) -> dict[str, str]:
    ...     '''Look an order up by its id.'''
    ...     return {"order_id": order_id, "status": "shipped Tuesday"}
    >>> call = ToolCallFragment(0, "call_1", "get_order", '{"order_id":"A17"}')
    >>> model = ScriptedLlm([
    ...     scripted_turn(Chunk(tool_call_fragments=(call,))),
    ...     scripted_turn(Chunk(text_delta="It shipped "), Chunk(text_delta="Tuesday.")),
    ... ])
    >>> service = AiService(model, tools=[get_order], tool_scheduler=ImmediateScheduler())  # tools inline: fixed order
    >>> events = service.stream("Where is order A17?").pipe(ops.to_list()).run()
    >>> [event.kind for event in events]  # doctest: +NORMALIZE_WHITESPACE
    ['complete_tool_call', 'before_tool_execution', 'after_tool_execution', 'intermediate_response',
     'partial_response', 'partial_response', 'final_response']
    >>> events[-1].response.text()
    'It shipped Tuesday.'
    """

    def __init__(
        self,
        model: BaseLlm,
        *,
        tools: Sequence[ToolLike] = (),
        system_message: str | None = None,
        retriever: Retriever | None = None,
        output_guardrails: Sequence[OutputGuardrail] = (),
        streaming_buffer_size: int = DEFAULT_BUFFER_SIZE,
        tool_scheduler: rx_abc.SchedulerBase | None = None,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        tool_timeout: float | None = None,
        output_type: ResponseSchema | None = None,
    ) -> None:
        if not isinstance(model, BaseLlm):
            raise ConfigurationError(f"AiService needs a BaseLlm model, got {type(model).__name__}")
        if retriever is not None and not callable(retriever):
            raise ConfigurationError(f"retriever must be a callable, got {type(retriever).__name__}")
        if system_message is not None and not isinstance(system_message, str):
            raise ConfigurationError(f"system_message must be a str, got {type(system_message).__name__}")
        self._model = model
        self._tools_by_name: Mapping[str, BaseTool] = tools_by_name(tools, "AiService")
        self._tools = tuple(self._tools_by_name.values())
        self._tool_declarations = tool_declarations(self._tools)
        self._system_message = system_message
        self._retriever = retriever
        self._output_guardrails = check_guardrails(output_guardrails)
        self._buffer_size = check_positive_int(streaming_buffer_size, "streaming_buffer_size")
        self._max_rounds = check_positive_int(max_rounds, "max_rounds")
        self._tool_scheduler = tool_scheduler
        check_timeout(tool_timeout, "tool_timeout")
        self._tool_timeout = tool_timeout
        self._output_type = output_type
        if output_type is not None:
            output_schema(output_type)  # fails here, naming the type, rather than on the first call
        self._config = interaction_config(self)  # immutable: every request of every interaction shares it

    def __repr__(self) -> str:
        tools = [tool.name for tool in self._tools]
        return f"AiService(model={self._model!r}, tools={tools!r}, guardrails={len(self._output_guardrails)})"

    @property
    def output_type(self) -> ResponseSchema | None:
        """The structured output asked for, or ``None``."""
        return self._output_type

    @property
    def tool_timeout(self) -> float | None:
        """Seconds a tool call may take when its tool sets no timeout (None: no limit)."""
        return self._tool_timeout

    @property
    def model(self) -> BaseLlm:
        """The model."""
        return self._model

    @property
    def tools(self) -> tuple[BaseTool, ...]:
        """The tools, callables already wrapped."""
        return self._tools

    @property
    def tools_by_name(self) -> Mapping[str, BaseTool]:
        """The tools by the name the model calls them."""
        return self._tools_by_name

    @property
    def tool_declarations(self) -> tuple[Tool, ...]:
        """What every request declares (empty without tools)."""
        return self._tool_declarations

    @property
    def system_message(self) -> str | None:
        """The system instruction of every model call."""
        return self._system_message

    @property
    def retriever(self) -> Retriever | None:
        """The retriever, if any."""
        return self._retriever

    @property
    def output_guardrails(self) -> tuple[OutputGuardrail, ...]:
        """The output guardrails, in the order they run."""
        return self._output_guardrails

    @property
    def has_output_guardrails(self) -> bool:
        """Whether any output guardrail is configured (pass it to :func:`to_text`)."""
        return bool(self._output_guardrails)

    @property
    def streaming_buffer_size(self) -> int:
        """The bounded buffer's size."""
        return self._buffer_size

    @property
    def tool_scheduler(self) -> rx_abc.SchedulerBase:
        """Where tools and the retriever run."""
        return self._tool_scheduler or default_tool_scheduler()

    @property
    def max_rounds(self) -> int:
        """The most model calls one interaction makes."""
        return self._max_rounds

    def stream(self, user_message: str | Content) -> AwaitableObservable[AiServiceStreamingEvent]:
        """The events of one interaction with the user message.

        Cold: nothing happens until subscribe, and each subscription is its own interaction.
        Subscribing runs the retriever (on the tool scheduler) or sends the first model call.
        Then round by round: partial events as the model streams, each tool started as soon as
        its :class:`CompleteToolCallEvent` is emitted (so its before/after events may precede the
        round's :class:`IntermediateResponseEvent`), the next model call once the round's stream
        completed *and* its tools finished (results sent in call order), and exactly one
        :class:`FinalResponseEvent` last, then ``on_completed``.

        A round that ends in error (``error_code`` set: length, safety, a malformed call, an
        in-band provider error) waits for the tools it already started, feeds their results
        nowhere, and ends the stream with an *error* ``FinalResponseEvent`` (its
        ``response.error_code`` / ``error_message`` say why) and ``on_completed``. ``on_error``
        is for failures with no answer to give: the transport, the protocol, a rejected answer
        (:class:`~rxllm.GuardrailError`), :class:`~rxllm.BufferOverflowError`,
        :class:`~rxllm.LimitExceededError`.

        Emissions come from the model's thread and the tool scheduler's threads, serialized
        (never two at once) through a bounded buffer; a subscriber called on the model's own
        thread without contention slows the model's reads (natural backpressure). Disposing
        stops everything: the model call is cancelled (its connection closed), no further
        round starts, nothing more is emitted (no terminal signal either); a tool already
        running finishes and its result is discarded.

        Args:
            user_message: the user's message (a ``str``, or a ``Content``; its role becomes ``user``).

        Raises:
            ConfigurationError: (at once) for a message that is neither.
        """
        clean = False
        if type(user_message) is str:  # (what validating a str keeps: built from the templates, nothing revalidated)
            part = prevalidated.from_template(Part, _TEXT_PART, {"text": user_message})
            content = prevalidated.from_template(Content, _CONTENT, {"role": "user", "parts": (part,)})
            clean = without_lone_surrogates(user_message) is user_message  # the content's one string needs no scrub
        elif isinstance(user_message, str):
            content = Content(role="user", parts=(Part(text=user_message),))
        elif isinstance(user_message, Content):
            content = user_message if user_message.role == "user" else user_message.model_copy(update={"role": "user"})
        else:
            raise ConfigurationError(f"user_message must be a str or a Content, got {type(user_message).__name__}")
        events = start_interaction(self, content, self._config, clean=clean)
        return AwaitableObservable(events) if type(events) is Direct else awaitable(events)
