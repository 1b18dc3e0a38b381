"""State deletion and in-place changes, Event.stringify_content, AgentTool, LongRunningFunctionTool."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from reactivex import operators as ops

from rxllm import Chunk, ConfigurationError, Content, FunctionResponse, LlmResponse, Part, ToolCallFragment
from rxllm.agents import (
    STATE_REMOVED,
    AgentTool,
    Event,
    InMemoryRunner,
    LlmAgent,
    LongRunningFunctionTool,
    State,
    ToolContext,
)
from rxllm.agents._sessions.state import apply_state_delta
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import user_message


def text_turn(*pieces: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=p) for p in pieces))


def call_turn(name: str, arguments: str, call_id: str = "call_1") -> list[LlmResponse]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, arguments),)))


def new_runner(agent: LlmAgent, state: dict[str, Any] | None = None) -> InMemoryRunner:
    runner = InMemoryRunner(agent)
    runner.session_service.create_session(runner.app_name, "u1", state=state, session_id="s1").run()
    return runner


def send(runner: InMemoryRunner, message: Content) -> list[Event]:
    events: list[Event] = runner.run_async("u1", "s1", message).pipe(ops.to_list()).run()
    return events


def stored_state(runner: InMemoryRunner) -> dict[str, Any]:
    return dict(runner.session_service.get_session(runner.app_name, "u1", "s1").run().state)


# ---- State ------------------------------------------------------------------------------------


def test_state_deletion_and_remove() -> None:
    state = State({"a": 1, "b": 2})
    del state["a"]
    assert "a" not in state and list(state) == ["b"] and state.get("a") is None
    assert state.remove("b") == 2 and state.remove("missing") is None
    assert state.delta() == {"a": STATE_REMOVED, "b": STATE_REMOVED, "missing": STATE_REMOVED}
    with pytest.raises(KeyError):
        del state["a"]
    state["a"] = 3  # set again after deleting
    assert state["a"] == 3 and state.take_delta()["a"] == 3 and dict(state) == {"a": 3}


def test_in_place_changes_are_persisted_like_assignments() -> None:
    state = State({"rolls": [3], "profile": {"name": "Ada"}, "count": 1})
    rolls = state["rolls"]
    assert isinstance(rolls, list)
    rolls.append(21)
    assert state.has_delta() and state.take_delta() == {"rolls": [3, 21]}
    assert not state.has_delta()
    rolls.append(5)  # again after the delta was taken
    assert state.take_delta() == {"rolls": [3, 21, 5]}
    profile = state["profile"]
    assert isinstance(profile, dict)
    profile["bad"] = {1, 2}  # no longer JSON: loud, not lost
    with pytest.raises(ConfigurationError, match="'profile' must be a JSON value"):
        state.take_delta()


def test_apply_state_delta_removes_keys_in_every_scope() -> None:
    app, user, session = {"app:x": 1}, {"user:y": 2}, {"z": 3, "keep": 4}
    changed = apply_state_delta(
        {"app:x": STATE_REMOVED, "user:y": STATE_REMOVED, "z": STATE_REMOVED}, app=app, user=user, session=session
    )
    assert changed == {"app", "user", "session"}
    assert (app, user, session) == ({}, {}, {"keep": 4})


def test_deletion_and_in_place_changes_persist_through_a_run() -> None:
    def roll(tool_context: ToolContext) -> dict[str, str]:
        """Roll a die."""
        rolls = tool_context.state["rolls"]
        assert isinstance(rolls, list)
        rolls.append(21)
        del tool_context.state["draft"]
        return {"rolled": "21"}

    agent = LlmAgent("dice", ScriptedLlm([call_turn("roll", "{}"), text_turn("Rolled.")]), tools=[roll])
    runner = new_runner(agent, {"rolls": [4], "draft": "old", "app:theme": "dark"})
    events = send(runner, user_message("roll"))
    assert events[1].actions.state_delta == {"rolls": [4, 21], "draft": STATE_REMOVED}
    assert stored_state(runner) == {"rolls": [4, 21], "app:theme": "dark"}


def test_stringify_content() -> None:
    event = Event(
        author="bot",
        content=Content(
            role="user",
            parts=(Part(function_response=FunctionResponse(id="c1", name="f", response={"ok": True})),),
        ),
    )
    assert event.stringify_content() == "Function Response: FunctionResponse(id='c1', name='f', response={'ok': True})"
    assert Event(author="bot").stringify_content() == ""


# ---- AgentTool --------------------------------------------------------------------------------


def test_agent_tool_result_and_state_flow_back() -> None:
    def remember(tool_context: ToolContext) -> str:
        """Remember the language."""
        tool_context.state["language"] = "fr"
        del tool_context.state["scratch"]
        return "ok"

    translator_model = ScriptedLlm([call_turn("remember", "{}"), text_turn("Bonjour")])
    translator = LlmAgent("translator", translator_model, description="Translates.", tools=[remember])
    root_model = ScriptedLlm([call_turn("translator", '{"request": "Hello"}'), text_turn("It is Bonjour.")])
    root = LlmAgent("root", root_model, tools=[AgentTool(translator)])
    runner = new_runner(root, {"scratch": 1, "seen": True})
    events = send(runner, user_message("Translate hello"))
    response = events[1].function_responses()[0]
    assert (response.name, response.response) == ("translator", {"result": "Bonjour"})
    assert events[1].actions.state_delta == {"language": "fr", "scratch": STATE_REMOVED}
    assert events[-1].text() == "It is Bonjour."
    assert stored_state(runner) == {"seen": True, "language": "fr"}
    # the sub-agent saw the caller's state and only the request
    request = translator_model.requests[0][0]
    assert [c.text() for c in request.contents] == ["Hello"]


class Translation(BaseModel):
    text: str
    language: str


def test_agent_tool_with_output_schema_and_skip_summarization() -> None:
    translator = LlmAgent(
        "translator", ScriptedLlm([text_turn('{"text": "Hallo", "language": "de"}')]), output_schema=Translation
    )
    root_model = ScriptedLlm([call_turn("translator", '{"request": "Hello"}')])
    root = LlmAgent("root", root_model, tools=[AgentTool(translator, skip_summarization=True)])
    events = send(new_runner(root), user_message("Translate"))
    assert events[-1].function_responses()[0].response == {"text": "Hallo", "language": "de"}
    assert events[-1].is_final_response() and len(root_model.requests) == 1


# ---- LongRunningFunctionTool ------------------------------------------------------------------


def test_long_running_call_pauses_the_run_and_a_user_response_resumes_it() -> None:
    asked: list[int] = []

    def ask_for_approval(amount: int) -> None:
        """Ask a manager to approve a refund."""
        asked.append(amount)

    model = ScriptedLlm([call_turn("ask_for_approval", '{"amount": 40}', "call_9"), text_turn("Refund approved.")])
    approver = LongRunningFunctionTool(ask_for_approval)
    runner = new_runner(LlmAgent("refunds", model, tools=[approver]))
    assert "long-running operation" in (approver.declaration().description or "")

    first = send(runner, user_message("Refund 40 please"))
    assert asked == [40]
    assert [(e.long_running_tool_ids, e.is_final_response()) for e in first] == [(("call_9",), True)]
    assert len(model.requests) == 1

    answer = Content(
        role="user",
        parts=(Part(function_response=FunctionResponse(id="call_9", name="ask_for_approval", response={"ok": True})),),
    )
    second = send(runner, answer)
    assert [e.text() for e in second] == ["Refund approved."]
    contents = model.requests[1][0].contents
    assert contents[1].parts[0].function_call is not None and contents[1].parts[0].function_call.id == "call_9"
    assert contents[2].parts[0].function_response is not None
    assert contents[2].parts[0].function_response.response == {"ok": True}


def test_long_running_tool_with_an_interim_status_lets_the_model_answer() -> None:
    def start_job(name: str) -> dict[str, str]:
        """Start a job."""
        return {"status": "pending"}

    model = ScriptedLlm([call_turn("start_job", '{"name": "x"}'), text_turn("Started; I will tell you.")])
    runner = new_runner(LlmAgent("jobs", model, tools=[LongRunningFunctionTool(start_job)]))
    events = send(runner, user_message("run x"))
    assert [e.text() for e in events][-1] == "Started; I will tell you."
    assert events[0].long_running_tool_ids == ("call_1",)
