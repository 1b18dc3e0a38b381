"""``Event`` and ``EventActions``: one entry of a session's history, as ADK's ``Event``.

>>> from rxllm import Content, Part
>>> from rxllm.agents import Event
>>> event = Event(author="user", content=Content(role="user", parts=(Part.from_text("Where is A17?"),)))
>>> event.text(), event.is_final_response(), event.partial
('Where is A17?', True, None)
>>> Event.model_validate_json(event.model_dump_json()) == event
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pydantic import Field, JsonValue, ValidationError

from ..._core import prevalidated
from ..._core.errors import StructuredOutputError
from ..._core.genai_types import (
    LiveServerGoAway,
    LiveServerSessionResumptionUpdate,
    LiveServerToolCallCancellation,
    Transcription,
)
from ..._core.schema import type_adapter
from ..._core.types import Content, FinishReason, FunctionCall, FunctionResponse, UsageMetadata, _Model
from ..._tools._confirmation import ToolConfirmation
from ..._tools._context import random_uuid4

__all__ = ["Event", "EventActions", "EventCompaction"]


def new_event_id() -> str:
    """A fresh event id (a UUID4 string, as ADK's ``Event.generateEventId``)."""
    return random_uuid4()


class EventCompaction(_Model):
    """What a compaction event stands for (ADK Java's ``events/EventCompaction``).

    Attributes:
        start_timestamp: the timestamp of the first event summarised.
        end_timestamp: the timestamp of the last event summarised; the request contents show
            ``compacted_content`` instead of every event stamped from start to end (inclusive).
        compacted_content: the summary (role ``model``).
    """

    start_timestamp: float
    end_timestamp: float
    compacted_content: Content


class EventActions(_Model):
    """What an event asks the runtime to do besides recording its content.

    Attributes:
        state_delta: session-state changes; the session service applies them when it stores the
            event. Keys prefixed ``temp:`` are never persisted, ``app:`` and ``user:`` keys are
            shared by all sessions of the app / of the user (ADK's prefixes).
        artifact_delta: artifact name to the version a tool saved in this step (``ToolContext.save_artifact``).
        skip_summarization: a tool asked that its response end the turn without another model
            call (the function-response event then counts as the final response).
        transfer_to_agent: the agent to hand over to: the flow continues with that agent, in the
            same invocation (ADK's transfer).
        escalate: escalate to the parent agent: a :class:`LoopAgent` stops at such an event, a
            :class:`ParallelAgent` stops every branch.
        rewind_before_invocation_id: the history before this event no longer holds that
            invocation nor anything after it (ADK Python's rewind; see ``_contents``).
        end_invocation: the flow of the agent that produced this event makes no further model
            call (ADK Java's ``endInvocation``, also named ``endOfAgent``): set on a
            function-response event when a tool set ``tool_context.actions.end_invocation``.
        requested_tool_confirmations: function-call id to the confirmation a tool asked for it
            (ADK's ``requestedToolConfirmations``; see ``rxllm._tools._confirmation``).
        compaction: set on a compaction event: the summary that stands for older events in
            requests (ADK's ``compaction``; the summarised events stay stored).
    """

    state_delta: dict[str, JsonValue] = Field(default_factory=dict)
    artifact_delta: dict[str, int] = Field(default_factory=dict)
    skip_summarization: bool | None = None
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    rewind_before_invocation_id: str | None = None
    end_invocation: bool | None = None
    requested_tool_confirmations: dict[str, ToolConfirmation] = Field(default_factory=dict)
    compaction: EventCompaction | None = None


_T = TypeVar("_T")


class Event(_Model):
    """One event of a run: a user message, a model response (partial or final) or tool responses.

    ``id`` is fresh for every event (``new_event_id``); ``timestamp`` is seconds since the epoch.
    The response fields (``partial``, ``turn_complete``, ``error_code``, ...) are copied from the
    :class:`~rxllm.LlmResponse` the event was made from. Partial events are streamed to the
    subscriber but never stored in a session.

    ``usage_metadata`` is the usage of the one model call the event came from (as in ADK);
    ``total_usage_metadata`` (rxllm's addition) is set on the event that ends an invocation --
    the final response, an error response, or a function-response event that skips
    summarization -- and sums the usage of every model call of that invocation.

    The live fields (a ``BIDI`` run, ``docs/live.md``) are the response's: ``input_transcription``
    / ``output_transcription``, ``go_away``, ``live_session_resumption_update`` and
    ``tool_call_cancellation``, as ADK's ``Event`` carries its ``LlmResponse`` fields.
    """

    id: str = Field(default_factory=new_event_id)
    invocation_id: str = ""
    author: str
    content: Content | None = None
    actions: EventActions = Field(default_factory=EventActions)
    long_running_tool_ids: tuple[str, ...] | None = None
    partial: bool | None = None
    turn_complete: bool | None = None
    error_code: FinishReason | None = None
    error_message: str | None = None
    finish_reason: FinishReason | None = None
    usage_metadata: UsageMetadata | None = None
    total_usage_metadata: UsageMetadata | None = None
    interrupted: bool | None = None
    branch: str | None = None
    timestamp: float = Field(default_factory=time.time)
    custom_metadata: dict[str, JsonValue] | None = None
    model_version: str | None = None
    input_transcription: Transcription | None = None
    output_transcription: Transcription | None = None
    go_away: LiveServerGoAway | None = None
    live_session_resumption_update: LiveServerSessionResumptionUpdate | None = None
    tool_call_cancellation: LiveServerToolCallCancellation | None = None

    @staticmethod
    def new_id() -> str:
        """A fresh event id."""
        return new_event_id()

    def text(self) -> str:
        """The answer text of the content (thought parts excluded); ``""`` without content."""
        content = self.content  # (read once: each attribute read of a pydantic model is a slow lookup)
        return content.text() if content is not None else ""

    def stringify_content(self) -> str:
        """The content as one string, as ADK Java's ``Event.stringifyContent``: each part's text, then
        ``Function Call: <call>`` / ``Function Response: <response>`` for call and response parts.

        >>> from rxllm import Content, FunctionCall, Part
        >>> call = FunctionCall(id="c1", name="get_order", args={"id": 7})
        >>> Event(author="bot", content=Content(role="model", parts=(
        ...     Part.from_text("Checking. "), Part(function_call=call)))).stringify_content()
        "Checking. Function Call: FunctionCall(id='c1', name='get_order', args={'id': 7})"
        """
        if self.content is None:
            return ""
        out: list[str] = []
        for part in self.content.parts:
            if part.text is not None:
                out.append(part.text)
            if part.function_call is not None:
                out.append(f"Function Call: {part.function_call!r}")
            if part.function_response is not None:
                out.append(f"Function Response: {part.function_response!r}")
        return "".join(out)

    def function_calls(self) -> list[FunctionCall]:
        """The function calls of the content, in order."""
        content = self.content  # (read once: each attribute read of a pydantic model is a slow lookup)
        if type(content) is Content:  # (Content.function_calls, without its lookup and call)
            return [call for p in content.parts if (call := p.function_call) is not None]
        return content.function_calls() if content is not None else []

    def function_responses(self) -> list[FunctionResponse]:
        """The function responses of the content, in order."""
        content = self.content  # (read once: each attribute read of a pydantic model is a slow lookup)
        if type(content) is Content:  # (Content.function_responses, without its lookup and call)
            return [response for p in content.parts if (response := p.function_response) is not None]
        return content.function_responses() if content is not None else []

    def has_trailing_code_execution_result(self) -> bool:
        """Whether the content's last part is a code-execution result (ADK's definition)."""
        content = self.content  # (read once: each attribute read of a pydantic model is a slow lookup)
        parts = content.parts if content is not None else ()
        return bool(parts) and parts[-1].code_execution_result is not None

    def parsed_as(self, schema: type[_T]) -> _T:
        """The final answer validated as ``schema``: ``event.parsed_as(City)`` is a ``City``, for
        a type checker too. For the final event of an agent with ``output_schema=City`` (whose
        answer text is that object's JSON), as the value stored under its ``output_key``.

        Args:
            schema: a pydantic model class (or any type pydantic validates: ``list[City]``).

        Raises:
            StructuredOutputError: the event is not a final answer (a partial, a tool call, an
                error), or its text does not validate against ``schema``.

        >>> from pydantic import BaseModel
        >>> from rxllm import Content, Part
        >>> class City(BaseModel):
        ...     name: str
        >>> answer = Content(role="model", parts=[Part.from_text('{"name": "Paris"}')])
        >>> Event(author="bot", content=answer).parsed_as(City)
        City(name='Paris')
        """
        name = getattr(schema, "__name__", repr(schema))
        if self.partial:
            reason = "it is a partial event; read the final one's"
        elif self.error_code is not None:
            reason = f"the turn ended in {self.error_code}: {self.error_message or 'no message'}"
        elif not self.is_final_response() or self.content is None or not self.text():
            reason = "it is not a final answer with text (a tool call or a tool response)"
        else:
            try:
                return cast(_T, type_adapter(schema).validate_json(self.text()))  # built once per type
            except ValidationError as exc:
                raise StructuredOutputError(
                    f"the event's answer does not validate as {name}: {exc.error_count()} error(s), "
                    f"first: {exc.errors()[0]['msg']}"
                ) from None
        raise StructuredOutputError(f"the event holds no {name}: {reason}")

    def is_final_response(self) -> bool:
        """Whether this event ends the agent's turn, exactly as ADK defines it.

        True when ``actions.skip_summarization`` is set or the event names long-running tool
        calls; otherwise True only without function calls, without function responses, when not
        partial and without a trailing code-execution result.
        """
        fields = self.__dict__  # (read once: each attribute read of a pydantic model is a slow lookup)
        if fields["actions"].skip_summarization or fields["long_running_tool_ids"]:
            return True
        content = fields["content"]
        if type(self) is Event and (content is None or type(content) is Content):  # (no method of theirs overridden)
            if fields["partial"]:
                return False
            if content is None:
                return True
            parts = content.parts
            for part in parts:  # no function call, no function response
                part_fields = part.__dict__
                if part_fields["function_call"] is not None or part_fields["function_response"] is not None:
                    return False
            return not parts or parts[-1].code_execution_result is None  # no trailing code-execution result
        return (
            not self.function_calls()
            and not self.function_responses()
            and not self.partial
            and not self.has_trailing_code_execution_result()
        )


def _new_actions() -> EventActions:
    """``EventActions()`` without validating its defaults."""
    return prevalidated.instance(
        EventActions,
        {
            "state_delta": {},
            "artifact_delta": {},
            "skip_summarization": None,
            "transfer_to_agent": None,
            "escalate": None,
            "rewind_before_invocation_id": None,
            "end_invocation": None,
            "requested_tool_confirmations": {},
            "compaction": None,
        },
        set(),
    )


# what the builders below were written for: the factories Event has now, every other field but
# the author (given always) at an immutable default
_EVENT_TEMPLATE = prevalidated.template(Event, frozenset({"id", "actions", "timestamp", "author"}))
_PREVALIDATED = (
    _EVENT_TEMPLATE is not None
    and prevalidated.buildable(EventActions)
    and list(_new_actions().__dict__.items()) == list(EventActions().__dict__.items())
    and Event.model_fields["id"].default_factory is new_event_id
    and Event.model_fields["actions"].default_factory is EventActions
    and Event.model_fields["timestamp"].default_factory is time.time
)

new_actions: Callable[[], EventActions] = _new_actions if _PREVALIDATED else EventActions
"""``EventActions()``: a fresh one, without validating its defaults when that gives the same."""


def prevalidated_event(values: dict[str, Any]) -> Event:
    """``Event(**values)`` for ``values`` that are valid already (instances of their fields' types,
    ``author`` included): the same ``__dict__`` (in field order, a fresh ``id``, ``actions`` and
    ``timestamp`` unless given) and fields set, without validating them again. Falls back to
    ``Event(**values)`` should ``Event`` change from what this was written for."""
    if not _PREVALIDATED:
        return Event(**values)
    built = dict(cast("dict[str, Any]", _EVENT_TEMPLATE))
    built["id"] = new_event_id()
    if "actions" not in values:  # (given: none made to be replaced)
        built["actions"] = _new_actions()
    built["timestamp"] = time.time()
    built.update(values)  # (every key is a field: the order stays the template's)
    return prevalidated.instance(Event, built, set(values))  # (the defaults made here are not set fields)
