"""The service's streaming events: what one tool-using turn looks like, piece by piece.

Every event is a small immutable value with a ``kind`` discriminator, so a consumer can
``match event.kind`` (or ``isinstance``) and a type checker can narrow the
:data:`AiServiceStreamingEvent` union.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .._core.types import FunctionCall, FunctionResponse, LlmResponse, UsageMetadata

__all__ = [
    "AfterToolExecutionEvent",
    "AiServiceStreamingEvent",
    "BeforeToolExecutionEvent",
    "CompleteToolCallEvent",
    "FinalResponseEvent",
    "IntermediateResponseEvent",
    "PartialResponseEvent",
    "PartialThinkingEvent",
    "PartialToolCallEvent",
    "RetrievedContentsEvent",
]


@dataclass(frozen=True, slots=True)
class RetrievedContentsEvent:
    """What the retriever found for the user message; first and once, only when it found anything.

    Attributes:
        contents: the retrieved snippets, in the retriever's order.
    """

    contents: tuple[str, ...]
    kind: Literal["retrieved_contents"] = "retrieved_contents"


@dataclass(frozen=True, slots=True)
class PartialThinkingEvent:
    """New reasoning text of the round being streamed.

    Attributes:
        text: the new thought text (thoughts never count as answer text).
    """

    text: str
    kind: Literal["partial_thinking"] = "partial_thinking"


@dataclass(frozen=True, slots=True)
class PartialResponseEvent:
    """New answer text of the round being streamed. Never emitted when output guardrails are set.

    Attributes:
        text: the new answer text.
    """

    text: str
    kind: Literal["partial_response"] = "partial_response"


@dataclass(frozen=True, slots=True)
class PartialToolCallEvent:
    """A fragment of a tool call being streamed (arguments are JSON text, not yet parseable).

    Attributes:
        index: the provider's index of the call within the round.
        id: the call's id, when the provider sent it with this fragment.
        name: the tool's name, when the provider sent it with this fragment.
        arguments_delta: a piece of the JSON arguments text.
    """

    index: int
    id: str | None
    name: str | None
    arguments_delta: str
    kind: Literal["partial_tool_call"] = "partial_tool_call"


@dataclass(frozen=True, slots=True)
class CompleteToolCallEvent:
    """A tool call known complete; its tool starts right after this event is emitted.

    Attributes:
        index: the provider's index of the call within the round.
        call: the call with parsed arguments and the id the round's response carries.
    """

    index: int
    call: FunctionCall
    kind: Literal["complete_tool_call"] = "complete_tool_call"


@dataclass(frozen=True, slots=True)
class BeforeToolExecutionEvent:
    """A tool is about to run (on the tool scheduler). May come before the round's intermediate response.

    Attributes:
        call: the call being executed.
    """

    call: FunctionCall
    kind: Literal["before_tool_execution"] = "before_tool_execution"


@dataclass(frozen=True, slots=True)
class AfterToolExecutionEvent:
    """A tool finished; ``result`` is what the next round sends back to the model.

    Attributes:
        call: the call that was executed.
        result: the function response (``{"error": "..."}`` when the tool failed or is unknown).
        failed: whether the tool failed (raised, rejected its arguments, returned no JSON, or is unknown).
    """

    call: FunctionCall
    result: FunctionResponse
    failed: bool
    kind: Literal["after_tool_execution"] = "after_tool_execution"


@dataclass(frozen=True, slots=True)
class IntermediateResponseEvent:
    """The assembled response of a round that requested tools (a per-round marker, not a barrier).

    Emitted once the round's stream completed; the round's tool events may come before or after it.

    Attributes:
        response: the round's final ``LlmResponse`` (text, function calls, usage).
    """

    response: LlmResponse
    kind: Literal["intermediate_response"] = "intermediate_response"


@dataclass(frozen=True, slots=True)
class FinalResponseEvent:
    """The answer: exactly once, last, then ``on_completed``.

    Attributes:
        response: the last round's ``LlmResponse`` after the output guardrails (possibly rewritten).
            ``response.error_code`` is set when the round ended in error (length, safety, a
            malformed call, an in-band provider error).
        total_usage_metadata: the token usage summed over every model call of the interaction
            (``response.usage_metadata`` is the last call's alone); None when no call reported usage.
    """

    response: LlmResponse
    total_usage_metadata: UsageMetadata | None = None
    kind: Literal["final_response"] = "final_response"


AiServiceStreamingEvent = (
    RetrievedContentsEvent
    | PartialThinkingEvent
    | PartialResponseEvent
    | PartialToolCallEvent
    | CompleteToolCallEvent
    | BeforeToolExecutionEvent
    | AfterToolExecutionEvent
    | IntermediateResponseEvent
    | FinalResponseEvent
)
"""Every event :meth:`AiService.stream` emits (discriminated by ``kind``)."""
