"""ADK Java's tool surface beyond function tools: ``EventActions.end_invocation`` and the typed
confirmation and compaction fields, ``exit_loop``, ``BaseTool.process_llm_request``,
``ExampleTool`` and example providers, ``LlmAgent(input_schema=)`` and ``AgentTool(include_plugins=)``."""

from __future__ import annotations

from typing import Any

from reactivex import operators as ops

from rxllm import Chunk, Content, Part, ToolCallFragment, UsageMetadata
from rxllm.agents import (
    Event,
    EventActions,
    EventCompaction,
    InMemoryRunner,
    LlmAgent,
    LoopAgent,
    ToolConfirmation,
    ToolContext,
    exit_loop,
)
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import user_message


def text_turn(text: str) -> list[Any]:
    return scripted_turn(Chunk(text_delta=text))


def call_turn(name: str, arguments: str, call_id: str = "call_1") -> list[Any]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, arguments),)))


def new_runner(agent: Any, **options: Any) -> InMemoryRunner:
    runner = InMemoryRunner(agent, **options)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    return runner


def send(runner: InMemoryRunner, text: str) -> list[Event]:
    events: list[Event] = runner.run_async("u1", "s1", user_message(text)).pipe(ops.to_list()).run()
    return events


def stored_events(runner: InMemoryRunner) -> list[Event]:
    return list(runner.session_service.get_session(runner.app_name, "u1", "s1").run().events)


# ---- EventActions -----------------------------------------------------------------------------


def test_event_actions_carry_confirmations_compaction_and_end_invocation_through_json() -> None:
    summary = Content(role="model", parts=(Part.from_text("The user ordered A17."),))
    actions = EventActions(
        end_invocation=True,
        requested_tool_confirmations={"call_1": ToolConfirmation(hint="Refund 20 EUR?", payload={"amount": 20})},
        compaction=EventCompaction(start_timestamp=1.5, end_timestamp=9.25, compacted_content=summary),
    )
    event = Event(author="support", actions=actions)
    assert Event.model_validate_json(event.model_dump_json()) == event
    wire = event.to_json()  # ADK Java's JSON names
    assert '"endInvocation":true' in wire and '"requestedToolConfirmations":{"call_1":' in wire
    assert '"compactedContent":' in wire and '"startTimestamp":1.5' in wire
    confirmation = Event.from_json(wire).actions.requested_tool_confirmations["call_1"]
    assert (confirmation.hint, confirmation.confirmed) == ("Refund 20 EUR?", False)
    assert confirmation.payload == {"amount": 20}
    assert EventActions().end_invocation is None and EventActions().requested_tool_confirmations == {}
    assert EventActions().compaction is None


def test_a_tool_that_ends_the_invocation_stops_the_flow_after_its_response() -> None:
    def stop_here(tool_context: ToolContext) -> dict[str, str]:
        """Stop."""
        tool_context.actions.end_invocation = True
        return {"status": "stopped"}

    usage = UsageMetadata(prompt_token_count=3, total_token_count=5)
    model = ScriptedLlm(
        [
            scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, "c1", "stop_here", "{}"),), usage=usage)),
            text_turn("never asked"),
        ]
    )
    runner = new_runner(LlmAgent("bot", model, tools=[stop_here]))
    events = send(runner, "go")
    assert len(model.requests) == 1  # no second model call
    last = events[-1]
    assert [r.response for r in last.function_responses()] == [{"status": "stopped"}]
    assert last.actions.end_invocation is True and not last.is_final_response()
    assert last.total_usage_metadata is not None and last.total_usage_metadata.total_token_count == 5
    assert stored_events(runner)[-1].actions.end_invocation is True


# ---- exit_loop --------------------------------------------------------------------------------


def test_exit_loop_has_adks_declaration_and_ends_a_loop_agent() -> None:
    declaration = exit_loop.declaration()
    assert declaration.name == "exit_loop"
    assert declaration.description == "Exits the loop.\n\nCall this function only when you are instructed to do so."
    assert declaration.parameters["properties"] == {}
    writer = ScriptedLlm([text_turn("draft 1"), text_turn("draft 2"), text_turn("draft 3")])
    critic = ScriptedLlm([text_turn("again"), call_turn("exit_loop", "{}"), text_turn("never asked")])
    loop = LoopAgent(
        "refine",
        sub_agents=[LlmAgent("writer", writer), LlmAgent("critic", critic, tools=[exit_loop])],
        max_iterations=5,
    )
    events = send(new_runner(loop), "write")
    assert len(writer.requests) == 2 and len(critic.requests) == 2  # the second call's response ends the turn
    last = events[-1]
    assert last.author == "critic" and last.function_responses()[0].name == "exit_loop"
    assert last.actions.escalate is True and last.actions.skip_summarization is True
