"""The flow's fast paths build what the slow ones build (a model response's event without a second
validation; a step with static tools skipping the toolset layers)."""

from __future__ import annotations

import pickle
from typing import Any

from rxllm import Content, FinishReason, FunctionCall, LlmResponse, Part, UsageMetadata
from rxllm.agents import Event
from rxllm.agents._flows import flow


def _slow(response: LlmResponse, total: UsageMetadata | None, long_running: tuple[str, ...] | None) -> Event:
    return Event(
        invocation_id="e-1",
        author="support",
        branch="root.support",
        content=response.content,
        long_running_tool_ids=long_running,
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
        input_transcription=response.input_transcription,
        output_transcription=response.output_transcription,
        go_away=response.go_away,
        live_session_resumption_update=response.live_session_resumption_update,
        tool_call_cancellation=response.tool_call_cancellation,
    )


def _same(fast: Event, original: Event) -> None:
    assert fast.model_fields_set == original.model_fields_set
    assert fast.model_dump(exclude_unset=True) == original.model_dump(exclude_unset=True)
    slow = original.model_copy(update={"id": fast.id, "timestamp": fast.timestamp})
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.to_json() == slow.to_json()
    assert repr(fast) == repr(slow)
    assert pickle.loads(pickle.dumps(fast)) == fast
    assert pickle.loads(pickle.dumps(fast)).model_fields_set == fast.model_fields_set
    assert Event.model_validate(fast.model_dump()) == fast
    assert list(fast.__dict__) == list(Event.model_fields)


def test_the_fast_path_is_on_for_the_event_it_was_written_for() -> None:
    assert flow._FAST_EVENT


def test_a_response_event_built_without_validation_is_the_validated_one() -> None:
    usage = UsageMetadata(prompt_token_count=3, candidates_token_count=4, total_token_count=7)
    responses: list[tuple[LlmResponse, UsageMetadata | None, tuple[str, ...] | None]] = [
        (LlmResponse(content=Content(role="model", parts=(Part.from_text("Let me"),)), partial=True), None, None),
        (
            LlmResponse(
                content=Content(role="model", parts=(Part(function_call=FunctionCall(id="c1", name="f", args={})),)),
                finish_reason=FinishReason.STOP,
                usage_metadata=usage,
                model_version="m-1",
                turn_complete=True,
            ),
            usage,
            ("c1",),
        ),
        (LlmResponse(error_code=FinishReason("rate_limited"), error_message="slow down"), None, None),
    ]
    for response, total, long_running in responses:
        fast = flow._response_event("e-1", "support", "root.support", response.content, long_running, total, response)
        _same(fast, _slow(response, total, long_running))
        assert fast.actions == Event(author="a").actions and fast.id != _slow(response, total, long_running).id


def test_events_get_fresh_ids_and_actions() -> None:
    response = LlmResponse(content=Content(role="model", parts=(Part.from_text("hi"),)))
    one = flow._response_event("e", "a", None, response.content, None, None, response)
    two = flow._response_event("e", "a", None, response.content, None, None, response)
    assert one.id != two.id and one.actions is not two.actions
    one.actions.state_delta["k"] = 1  # (a frozen model's dict: what Event() gives is not shared either)
    assert two.actions.state_delta == {}


def test_custom_metadata_is_copied_as_validation_copies_it() -> None:
    metadata: dict[str, Any] = {"k": [1]}
    response = LlmResponse(content=Content(role="model", parts=(Part.from_text("hi"),)), custom_metadata=metadata)

    class Ctx:
        invocation_id = "e"
        branch = None
        total_usage_metadata = None

        def add_usage(self, usage: object) -> None:
            return None

    class Agent:
        name = "a"

    step = flow._Step()
    event = flow._to_event(Agent(), Ctx(), step, response)  # type: ignore[arg-type]
    assert event.custom_metadata == response.custom_metadata
    assert event.custom_metadata is not response.custom_metadata
