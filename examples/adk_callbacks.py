"""ADK Java's callbacks sample (``contrib/samples/configagent`` ``CoreCallbacks.java``) ported.

Lists of before/after agent, model and tool callbacks on one agent. Callbacks that return
nothing let the run go on; ``after_agent_callback2`` answers (the list stops there and its content
is added as an event, ``(stopped) after_agent_callback2``); ``after_tool_callback2`` replaces the
tool's result. One callback returns an Observable (Java's ``Maybe``) and one is ``async def``: all
three styles mix in one list. A plugin's hooks run before the agent's own.

Run it::

    python examples/adk_callbacks.py
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import reactivex
from reactivex import operators as ops

from rxllm import Chunk, Content, LlmRequest, LlmResponse, Part, ToolCallFragment
from rxllm.agents import (
    BasePlugin,
    BaseTool,
    CallbackContext,
    Event,
    InMemoryRunner,
    LlmAgent,
    ToolContext,
)
from rxllm.testing import ScriptedLlm, scripted_turn

LOG: list[str] = []


def note(name: str) -> None:
    LOG.append(name)
    print(f"@{name}")


def before_agent_callback1(ctx: CallbackContext) -> None:
    note("before_agent_callback1")


def before_agent_callback2(ctx: CallbackContext) -> reactivex.Observable[Content]:
    note("before_agent_callback2")
    return reactivex.empty()  # Maybe.empty(): no answer


async def before_agent_callback3(ctx: CallbackContext) -> None:
    await asyncio.sleep(0)
    note("before_agent_callback3")


def after_agent_callback1(ctx: CallbackContext) -> None:
    note("after_agent_callback1")


def after_agent_callback2(ctx: CallbackContext) -> Content:
    note("after_agent_callback2")
    return Content(role="model", parts=(Part.from_text("(stopped) after_agent_callback2"),))


def after_agent_callback3(ctx: CallbackContext) -> None:
    note("after_agent_callback3")  # never runs: callback2 answered


def before_model_callback(ctx: CallbackContext, request: LlmRequest) -> None:
    note("before_model_callback")


def after_model_callback(ctx: CallbackContext, response: LlmResponse) -> None:
    note("after_model_callback")


def before_tool_callback(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> None:
    note("before_tool_callback")


def after_tool_callback1(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
) -> None:
    note("after_tool_callback1")


def after_tool_callback2(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
) -> reactivex.Observable[dict[str, Any]]:
    note("after_tool_callback2")
    return reactivex.just({"test": "after_tool_callback2", "response": result})  # Maybe.just(modified)


class Audit(BasePlugin):
    def before_model_callback(self, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        note("plugin.before_model_callback")


def get_weather(city: str) -> dict[str, str]:
    """Get the weather of a city."""
    return {"city": city, "weather": "sunny"}


def main() -> int:
    call = ToolCallFragment(0, "call_1", "get_weather", '{"city": "Paris"}')
    model = ScriptedLlm(
        [scripted_turn(Chunk(tool_call_fragments=(call,))), scripted_turn(Chunk(text_delta="Sunny in Paris."))]
    )
    agent = LlmAgent(
        "weather",
        model,
        tools=[get_weather],
        before_agent_callback=[before_agent_callback1, before_agent_callback2, before_agent_callback3],
        after_agent_callback=[after_agent_callback1, after_agent_callback2, after_agent_callback3],
        before_model_callback=before_model_callback,
        after_model_callback=after_model_callback,
        before_tool_callback=before_tool_callback,
        after_tool_callback=[after_tool_callback1, after_tool_callback2],
    )
    runner = InMemoryRunner(agent, app_name="callbacks", plugins=[Audit("audit")])
    runner.session_service.create_session("callbacks", "u1", session_id="s1").run()
    message = Content(role="user", parts=(Part.from_text("Weather in Paris?"),))
    events: list[Event] = runner.run_async("u1", "s1", message).pipe(ops.to_list()).run()
    for event in events:
        print(f"{event.author}: {event.stringify_content()}")

    tool_result = events[1].function_responses()[0].response
    ok = (
        LOG[:3] == ["before_agent_callback1", "before_agent_callback2", "before_agent_callback3"]
        and LOG[3:5] == ["plugin.before_model_callback", "before_model_callback"]
        and "after_agent_callback3" not in LOG
        and tool_result == {"test": "after_tool_callback2", "response": {"city": "Paris", "weather": "sunny"}}
        and events[-1].text() == "(stopped) after_agent_callback2"
    )
    print("callbacks: OK" if ok else "callbacks: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
