"""Tool confirmation in the LLM flow: the request event, and which confirmed calls to run again.

The protocol is ADK Java's (``rxllm._tools._confirmation`` describes it from the tool's side):

- :func:`request_confirmation_event` is ``Functions.generateRequestConfirmationEvent``: after a
  step's tools ran, one ``adk_request_confirmation`` call per requested confirmation, arguments
  ``{"originalFunctionCall": call, "toolConfirmation": request}``, each call long-running. The
  flow stores it before the function-response event.
- :func:`calls_to_resume` is ``RequestConfirmationLlmRequestProcessor``: before a model call it
  finds the latest user event answering ``adk_request_confirmation`` calls and returns the
  original calls to run again, each with the client's :class:`ToolConfirmation`. A call is
  resumed only when it reproduces, by id, name and arguments, a call this agent made, for which
  a tool of this agent asked for confirmation, and which has not been answered since the user's
  answer (so it runs once).

The contents builder leaves every event with an ``adk_request_confirmation`` call or response
out of requests (``Contents.isRequestConfirmationEvent``): the model sees its call, the
function response asking for confirmation, and then (moved next to its call) the response of the
confirmed run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from ..._core.types import Content, FunctionCall, Part
from ..._models.aggregation import generate_function_call_id
from ..._tools import REQUEST_CONFIRMATION_FUNCTION_CALL_NAME, ToolConfirmation, confirmation_from_response
from .._sessions.event import Event

__all__ = ["PendingConfirmations", "calls_to_resume", "is_request_confirmation_event", "request_confirmation_event"]

logger = logging.getLogger("rxllm.agents")

_ORIGINAL_FUNCTION_CALL = "originalFunctionCall"
_TOOL_CONFIRMATION = "toolConfirmation"


@dataclass(frozen=True)
class PendingConfirmations:
    """Confirmed (or refused) calls to run again: the original calls, and the client's answers by call id."""

    calls: tuple[FunctionCall, ...]
    confirmations: Mapping[str, ToolConfirmation]


def is_request_confirmation_event(event: Event) -> bool:
    """Whether the event holds an ``adk_request_confirmation`` call or response (left out of requests)."""
    content = event.content  # (each value read once: each attribute read of a pydantic model is a slow lookup)
    if content is None:
        return False
    for part in content.parts:
        fields = part.__dict__
        call = fields["function_call"]
        if call is not None and call.name == REQUEST_CONFIRMATION_FUNCTION_CALL_NAME:
            return True
        response = fields["function_response"]
        if response is not None and response.name == REQUEST_CONFIRMATION_FUNCTION_CALL_NAME:
            return True
    return False


def request_confirmation_event(
    model_event: Event,
    requested: Mapping[str, ToolConfirmation],
    *,
    invocation_id: str,
    author: str,
    branch: str | None,
) -> Event | None:
    """The event asking the client to confirm the calls of ``model_event`` named in ``requested``; None without any."""
    calls = {c.id: c for c in model_event.function_calls() if c.id}
    parts: list[Part] = []
    ids: list[str] = []
    for call_id, confirmation in requested.items():
        call = calls.get(call_id)
        if call is None:
            continue
        request = FunctionCall(
            id=generate_function_call_id(),
            name=REQUEST_CONFIRMATION_FUNCTION_CALL_NAME,
            args={
                _ORIGINAL_FUNCTION_CALL: call.model_dump(mode="json", by_alias=True, exclude_none=True),
                _TOOL_CONFIRMATION: confirmation.model_dump(mode="json", by_alias=True, exclude_none=True),
            },
        )
        assert request.id is not None
        ids.append(request.id)
        parts.append(Part(function_call=request))
    if not parts:
        return None
    return Event(
        invocation_id=invocation_id,
        author=author,
        branch=branch,
        content=Content(role="user", parts=tuple(parts)),  # the function-response event's role, as ADK
        long_running_tool_ids=tuple(ids),
    )


def _latest_confirmations(events: Sequence[Event]) -> tuple[int, dict[str, ToolConfirmation]] | None:
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.author != "user" or not event.function_responses():
            continue
        answers: dict[str, ToolConfirmation] = {}
        for response in event.function_responses():
            if response.id and response.name == REQUEST_CONFIRMATION_FUNCTION_CALL_NAME:
                confirmation = confirmation_from_response(response.response)
                if confirmation is None:
                    logger.error("ignoring an adk_request_confirmation response that is not a ToolConfirmation")
                    continue
                answers[response.id] = confirmation
        if answers:
            return index, answers
    return None


def _original_call(call: FunctionCall) -> FunctionCall | None:
    value = call.args.get(_ORIGINAL_FUNCTION_CALL)
    if not isinstance(value, Mapping):
        return None
    try:
        original = FunctionCall.model_validate(value)
    except ValidationError:
        logger.warning("ignoring an adk_request_confirmation call whose originalFunctionCall is not a function call")
        return None
    return original if original.id else None


def _calls_by_id(events: Sequence[Event], agent_name: str) -> dict[str, tuple[str, FunctionCall]]:
    """Tool calls by id, the latest winning, except that another author never displaces this agent's."""
    by_id: dict[str, tuple[str, FunctionCall]] = {}
    for event in events:
        for call in event.function_calls():
            if not call.id or call.name == REQUEST_CONFIRMATION_FUNCTION_CALL_NAME:
                continue
            existing = by_id.get(call.id)
            if existing is None or event.author == agent_name or existing[0] != agent_name:
                by_id[call.id] = (event.author, call)
    return by_id


def _confirmation_requested_ids(events: Sequence[Event]) -> set[str]:
    ids: set[str] = set()
    for event in events:
        requested = event.actions.requested_tool_confirmations
        if requested:
            ids.update(r.id for r in event.function_responses() if r.id in requested)
    return ids


def _is_resumable(
    original: FunctionCall,
    calls_by_id: Mapping[str, tuple[str, FunctionCall]],
    requested_ids: set[str],
    agent_name: str,
) -> bool:
    call_id = original.id
    assert call_id is not None
    emitted = calls_by_id.get(call_id)
    if emitted is None:
        logger.warning("ignoring a tool confirmation for call %s: no such function call in the session", call_id)
        return False
    author, call = emitted
    if author != agent_name:
        return False  # another agent's call: that agent resumes it
    if call.name != original.name or dict(call.args) != dict(original.args):
        logger.warning(
            "ignoring a tool confirmation for call %s: its name or arguments differ from the call agent %r made",
            call_id,
            agent_name,
        )
        return False
    if call_id not in requested_ids:
        logger.warning("ignoring a tool confirmation for call %s: no tool asked to confirm it", call_id)
        return False
    return True


def calls_to_resume(events: Sequence[Event], agent_name: str) -> PendingConfirmations | None:
    """The calls of ``agent_name`` the client's latest confirmation answers let run again; None when none."""
    found = _latest_confirmations(events)
    if found is None:
        return None
    answer_index, answers = found
    already_resumed = {
        r.id for e in events[answer_index + 1 :] if e.author == agent_name for r in e.function_responses() if r.id
    }
    calls_by_id = _calls_by_id(events, agent_name)
    requested_ids = _confirmation_requested_ids(events)
    for index in range(answer_index - 1, -1, -1):
        event = events[index]
        if event.author != agent_name or not event.function_calls():
            continue
        calls: list[FunctionCall] = []
        confirmations: dict[str, ToolConfirmation] = {}
        for call in event.function_calls():
            if not call.id or call.id not in answers:
                continue
            original = _original_call(call)
            if original is None or original.id in already_resumed:
                continue
            if not _is_resumable(original, calls_by_id, requested_ids, agent_name):
                continue
            assert original.id is not None
            calls.append(original)
            confirmations[original.id] = answers[call.id]
        if calls:
            return PendingConfirmations(tuple(calls), confirmations)
    return None
