"""The flow's fast paths build what the slow ones build (a model response's event without a second
validation; a step with static tools skipping the toolset layers)."""

from __future__ import annotations

import pickle
from typing import Any

from reactivex import operators as ops

from rxllm import Content, FinishReason, FunctionCall, LlmResponse, Part, UsageMetadata
from rxllm._rx.direct import emit_now, emitted
from rxllm.agents import Event, FunctionTool, InMemoryRunner, LlmAgent
from rxllm.agents._flows import flow
from rxllm.testing import ScriptedLlm

from .support import user_message
from .test_agents_adk_request_tools import Listing
from .test_agents_adk_tool_surface import call_turn, text_turn


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


def _names(request: Any) -> list[list[str]]:
    return [[d.name for d in tool.function_declarations or ()] for tool in request.config.tools or ()]


def get_order(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


def _run(agent: Any) -> list[Event]:
    runner = InMemoryRunner(agent)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events: list[Event] = runner.run_async("u1", "s1", user_message("hi")).pipe(ops.to_list()).run()
    return events


def test_an_agent_without_toolsets_hands_out_the_same_groups_every_step() -> None:
    agent = LlmAgent("a", ScriptedLlm([]), tools=[get_order])
    assert agent.canonical_tool_groups() is agent.canonical_tool_groups()
    listed = LlmAgent("b", ScriptedLlm([]), tools=[get_order, Listing(FunctionTool(get_order))])
    assert listed.canonical_tool_groups() is not listed.canonical_tool_groups()


def test_the_tools_of_two_steps_are_the_same_and_still_run() -> None:
    model = ScriptedLlm([call_turn("get_order", '{"order_id": "A17"}'), text_turn("shipped")])
    events = _run(LlmAgent("a", model, tools=[get_order]))
    assert [_names(request) for request, _ in model.requests] == [[["get_order"]], [["get_order"]]]
    assert events[-1].text() == "shipped"
    assert any(r.response == {"order_id": "A17", "status": "shipped"} for e in events for r in e.function_responses())


def test_a_toolset_listing_other_tools_each_step_is_read_again_each_step() -> None:
    def refund(order_id: str) -> dict[str, str]:
        """Refund an order."""
        return {"refunded": order_id}

    toolset = Listing(FunctionTool(get_order))
    model = ScriptedLlm([call_turn("get_order", '{"order_id": "A17"}'), text_turn("done")])
    original = model.generate_content

    def generate(request: Any, stream: bool = False) -> Any:
        toolset._tool = FunctionTool(refund)  # what the next step lists
        return original(request, stream)

    model.generate_content = generate  # type: ignore[method-assign]
    _run(LlmAgent("a", model, tools=[toolset]))
    assert [_names(request) for request, _ in model.requests] == [[["get_order"]], [["refund"]]]


def test_the_kept_step_tools_follow_the_agents_transfer_targets() -> None:
    agent = LlmAgent("helper", ScriptedLlm([]), description="Helps.", tools=[get_order])
    groups = emitted(agent.canonical_tool_groups())
    assert groups is not None
    first = flow._step_tools(agent, groups[0], static=True)
    assert flow._step_tools(agent, groups[0], static=True) is first
    assert [t.name for t in first.request_tools] == ["get_order"]
    LlmAgent("boss", ScriptedLlm([]), description="Boss.", sub_agents=[agent])  # a parent, after a first step
    then = flow._step_tools(agent, groups[0], static=True)
    assert then is not first and [t.name for t in then.request_tools] == ["transfer_to_agent", "get_order"]
    assert flow._step_tools(agent, groups[0], static=False) is not then  # (not kept: built each time)


def test_disposing_the_run_disposes_the_model_call_of_a_step_with_static_tools() -> None:
    import reactivex
    from reactivex.disposable import Disposable

    from rxllm import BaseLlm
    from rxllm.aio import AwaitableObservable

    disposed: list[bool] = []
    seen: list[Any] = []

    class Hanging(BaseLlm):
        def generate_content(self, llm_request: Any, stream: bool = False) -> Any:
            def subscribe(observer: Any, scheduler: Any = None) -> Any:
                observer.on_next(
                    LlmResponse(content=Content(role="model", parts=(Part.from_text("so"),)), partial=True)
                )
                return Disposable(lambda: disposed.append(True))  # and never completes

            return AwaitableObservable(reactivex.create(subscribe))

    runner = InMemoryRunner(LlmAgent("a", Hanging(model="hanging"), tools=[get_order]))
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    from rxllm.agents import RunConfig, StreamingMode

    subscription = runner.run_async(
        "u1", "s1", user_message("hi"), RunConfig(streaming_mode=StreamingMode.SSE)
    ).subscribe(seen.append)
    assert [e.text() for e in seen if e.partial] == ["so"] and disposed == []
    subscription.dispose()
    assert disposed == [True]


def test_the_kept_config_follows_the_instruction_and_a_tool_declaring_anew_each_step() -> None:
    from rxllm import FunctionDeclaration
    from rxllm.agents import BaseTool

    class Counting(BaseTool):
        """Declares a new description every time it is asked (not what construction fixed)."""

        def __init__(self) -> None:
            super().__init__(name="counting", description="counts")
            self.asked = 0

        def declaration(self) -> Any:
            self.asked += 1
            return FunctionDeclaration(name=self.name, description=f"asked {self.asked}")

        def run(self, args: dict[str, Any], tool_context: Any) -> Any:
            return emit_now({"ok": True})

    agent = LlmAgent("a", ScriptedLlm([]), tools=[get_order])
    groups = emitted(agent.canonical_tool_groups())
    assert groups is not None
    kept = flow._step_tools(agent, groups[0], static=True)
    base = agent.generate_content_config
    one = kept.request_config(base, "Be brief.")
    assert kept.request_config(base, "Be brief.") is one
    other = kept.request_config(base, "Be long.")
    assert other is not one and other.system_instruction.parts[0].text == "Be long."  # type: ignore[union-attr]
    assert other.tools == one.tools and [d.name for d in one.tools[0].function_declarations] == ["get_order"]  # type: ignore[index, union-attr]

    counting = Counting()
    dynamic = LlmAgent("b", ScriptedLlm([]), tools=[counting])
    groups = emitted(dynamic.canonical_tool_groups())
    assert groups is not None
    kept = flow._step_tools(dynamic, groups[0], static=True)
    first = kept.request_config(dynamic.generate_content_config, "x")
    second = kept.request_config(dynamic.generate_content_config, "x")
    descriptions = [c.tools[0].function_declarations[0].description for c in (first, second)]  # type: ignore[index]
    assert descriptions == ["asked 1", "asked 2"]
