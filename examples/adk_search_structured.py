"""ADK Java's ``contrib/samples/configagent/tool_builtin_config`` ported, with a structured answer.

The Java sample's ``search_agent`` (``gemini-2.0-flash``, the ``google_search`` built-in tool) with
two things added from ADK's tool surface: a function tool next to the built-in one, and an
``output_schema``, so the agent answers through ADK Java's ``set_model_response`` tool. It runs
the real :class:`~rxllm.providers.gemini.GeminiModel` against a local stub of the Gemini API (no
key needed) and prints what goes over the wire: the request's tools in ADK Java's order
(``googleSearch`` as its own entry, then one entry of function declarations:
``set_model_response`` first), then the model's two calls and the validated answer.

Run it::

    python examples/adk_search_structured.py
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

from pydantic import BaseModel
from reactivex import operators as ops

from rxllm.agents import Event, GoogleSearchTool, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.gemini import GeminiModel
from rxllm.testing import StubResponse, StubServer, ToolCallScript, sse_turn

KEY = "example-not-a-real-key"


class SearchAnswer(BaseModel):
    """The search agent's structured answer."""

    answer: str
    as_of: str


def get_current_date() -> dict[str, str]:
    """Today's date, for questions about "latest" or "today"."""
    return {"date": "2026-12-02"}


def gemini_turn(name: str, arguments: Mapping[str, object]) -> StubResponse:
    """One streamed Gemini turn that calls ``name``."""
    events = sse_turn("gemini", tool_calls=[ToolCallScript(f"call_{name}", name, [json.dumps(arguments)])])
    return StubResponse.sse(events)


def main() -> int:
    answer = {"answer": "The latest ADK Java release is 0.5.0.", "as_of": "2026-12-02"}
    script = [gemini_turn("get_current_date", {}), gemini_turn("set_model_response", answer)]
    with StubServer(script) as server:
        model = GeminiModel("gemini-2.0-flash", base_url=server.url, api_key=KEY)
        agent = LlmAgent(
            "search_agent",
            model,
            description="an agent whose job it is to perform Google search queries and answer questions about "
            "the results.",
            instruction="You are an agent whose job is to perform Google search queries and answer questions "
            "about the results.",
            tools=[GoogleSearchTool(), get_current_date],
            output_schema=SearchAnswer,
            output_key="search_answer",
        )
        runner = InMemoryRunner(agent, app_name="search")
        runner.session_service.create_session("search", "user", session_id="s1").run()
        question = "What is the latest ADK Java release?"
        streamed = RunConfig(streaming_mode=StreamingMode.SSE)  # the stub streams, as Gemini does
        events: list[Event] = runner.run_async("user", "s1", question, streamed).pipe(ops.to_list()).run()
        wire = json.loads(server.requests[0].body)

    tools = wire["tools"]
    print("tools sent:", [sorted(entry) for entry in tools])
    print("declared:", [d["name"] for d in tools[-1]["functionDeclarations"]])
    for event in events:
        if event.partial:
            continue
        for call in event.function_calls():
            print(f"  {event.author} -> {call.name}({json.dumps(call.args)})")
    final = events[-1]
    print("answer:", final.text())
    state = runner.session_service.get_session("search", "user", "s1").run().state
    ok = (
        tools[0] == {"googleSearch": {}}
        and [d["name"] for d in tools[1]["functionDeclarations"]] == ["set_model_response", "get_current_date"]
        and final.is_final_response()
        and json.loads(final.text()) == answer
        and state["search_answer"] == answer
        and len(server.requests) == 2  # the set_model_response call ends the run: no third model call
    )
    print("search structured: OK" if ok else "search structured: UNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
