"""The fine-grained model stream: what one model call produced, piece by piece.

``generate_content`` keeps ADK's contract (partials carry text only). Consumers that want to act
on tool calls while the model is still talking -- the service event stream starts tools eagerly --
use :meth:`~rxllm.BaseLlm.stream_events` instead: text and thought deltas, tool-call fragments, each
tool call as soon as it is complete, then the round's final response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import reactivex
from reactivex import abc as rx_abc

from .._core.types import FunctionCall, LlmResponse

__all__ = [
    "MODEL_EVENTS",
    "EventMakers",
    "ModelStreamEvent",
    "ResponseCompleteEvent",
    "TextDeltaEvent",
    "ThoughtDeltaEvent",
    "ToolCallCompleteEvent",
    "ToolCallDeltaEvent",
    "derive_stream_events",
]


@dataclass(frozen=True, slots=True)
class TextDeltaEvent:
    """New answer text."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ThoughtDeltaEvent:
    """New reasoning text."""

    text: str
    kind: Literal["thought_delta"] = "thought_delta"


@dataclass(frozen=True, slots=True)
class ToolCallDeltaEvent:
    """A fragment of a streamed tool call (``arguments_delta`` is a piece of JSON text)."""

    index: int
    id: str | None
    name: str | None
    arguments_delta: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ToolCallCompleteEvent:
    """A tool call known complete, with parsed arguments and the id the final response carries."""

    index: int
    call: FunctionCall
    kind: Literal["tool_call_complete"] = "tool_call_complete"


@dataclass(frozen=True, slots=True)
class ResponseCompleteEvent:
    """The round's final aggregate, exactly as ``generate_content(stream=True)`` ends with it; always last."""

    response: LlmResponse
    kind: Literal["response_complete"] = "response_complete"


ModelStreamEvent = (
    TextDeltaEvent | ThoughtDeltaEvent | ToolCallDeltaEvent | ToolCallCompleteEvent | ResponseCompleteEvent
)


class EventMakers(NamedTuple):
    """What a model that reads provider chunks builds for each piece of the fine-grained stream
    (private: the seam between the models and a consumer with event types of its own).

    :data:`MODEL_EVENTS` builds the :data:`ModelStreamEvent` s (``stream_events``); a consumer
    that would only turn those into its own events passes makers of its own events instead, and
    gets them where the model events would have been, in the same order, one for one: nothing is
    built only to be converted. Each maker gets what the model event's constructor gets.
    """

    text: Callable[[str], Any]
    thought: Callable[[str], Any]
    tool_call_delta: Callable[[int, str | None, str | None, str], Any]
    tool_call_complete: Callable[[int, FunctionCall], Any]
    response_complete: Callable[[LlmResponse], Any]


MODEL_EVENTS = EventMakers(TextDeltaEvent, ThoughtDeltaEvent, ToolCallDeltaEvent, ToolCallCompleteEvent,
                           ResponseCompleteEvent)
"""The makers of the model's own events (what :meth:`~rxllm.BaseLlm.stream_events` emits)."""


def derive_stream_events(responses: reactivex.Observable[LlmResponse]) -> reactivex.Observable[ModelStreamEvent]:
    """The fine-grained stream of any contract-following ``generate_content(stream=True)``.

    Partials become text and thought deltas as they arrive (synchronously: no queue, no thread
    hop); at the final, each function call becomes a :class:`ToolCallCompleteEvent`, then the
    :class:`ResponseCompleteEvent`. Models that see provider chunks do better (tool calls before
    the final): :class:`~rxllm.SseChatModel` overrides :meth:`~rxllm.BaseLlm.stream_events`.
    """

    def subscribe(
        observer: rx_abc.ObserverBase[ModelStreamEvent], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        def on_next(response: LlmResponse) -> None:
            if response.partial:
                for part in response.content.parts if response.content is not None else ():
                    if part.text:
                        observer.on_next(ThoughtDeltaEvent(part.text) if part.thought else TextDeltaEvent(part.text))
                return
            for index, call in enumerate(response.function_calls()):
                observer.on_next(ToolCallCompleteEvent(index, call))
            observer.on_next(ResponseCompleteEvent(response))

        return responses.subscribe(on_next, observer.on_error, observer.on_completed, scheduler=scheduler)

    return reactivex.create(subscribe)
