"""The tools of a request as ADK Java builds them: built-in tool entries next to function tools
(each provider maps or refuses them), the order of ``set_model_response``, ``transfer_to_agent``,
tools and toolsets, a toolset's own ``process_llm_request``, name clashes with the tools the
flow adds; and ``temp:`` keys in emitted (not stored) events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import reactivex
from pydantic import BaseModel
from reactivex import operators as ops

from rxllm import (
    AnthropicServerTool,
    ConfigurationError,
    FunctionDeclaration,
    GenerateContentConfig,
    GoogleSearch,
    LlmRequest,
    OpenAiWebSearch,
    RequestMapper,
    Tool,
)
from rxllm.agents import (
    BaseTool,
    BaseToolset,
    BuiltInCodeExecutionTool,
    BuiltInTool,
    Event,
    FunctionTool,
    GoogleSearchTool,
    InMemoryRunner,
    LlmAgent,
    SequentialAgent,
    ToolContext,
    UrlContextTool,
)
from rxllm.providers._anthropic import AnthropicRequestMapper
from rxllm.providers._gemini import GeminiRequestMapper
from rxllm.providers._openai_chat import OpenAiChatRequestMapper
from rxllm.providers._openai_responses import OpenAiResponsesRequestMapper
from rxllm.testing import ScriptedLlm

from .support import user_message
from .test_agents_adk_tool_surface import call_turn, text_turn


def send(agent: Any, text: str = "hi") -> tuple[InMemoryRunner, list[Event]]:
    runner = InMemoryRunner(agent)
    runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events: list[Event] = runner.run_async("u1", "s1", user_message(text)).pipe(ops.to_list()).run()
    return runner, events


def get_order(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"status": "shipped"}


def refund(order_id: str) -> dict[str, str]:
    """Refund an order."""
    return {"status": "refunded"}


def layout(request: LlmRequest) -> list[Any]:
    """Each Tool entry of the request: its function names, or the built-in tool it is."""
    found: list[Any] = []
    for tool in request.config.tools or ():
        if tool.function_declarations:
            found.append([d.name for d in tool.function_declarations])
        for field in ("google_search", "code_execution", "url_context", "openai_web_search", "anthropic_server_tool"):
            if getattr(tool, field) is not None:
                found.append(field)
    return found


# ---- built-in tools as tool entries (ADK's GoogleSearchTool, BuiltInCodeExecutionTool, UrlContextTool) ----


def test_built_in_tools_go_into_the_request_next_to_function_tools_where_adk_java_puts_them() -> None:
    model = ScriptedLlm([text_turn("Found it.")])
    agent = LlmAgent("search", model, tools=[GoogleSearchTool(), get_order, UrlContextTool(), refund,
                                             BuiltInCodeExecutionTool()])
    send(agent)
    request = model.requests[0][0]
    # Java appends each built-in entry in turn and moves the function entry to the end after each
    # function tool: built-ins before the last function tool, the functions, the built-ins after
    assert layout(request) == ["google_search", "url_context", ["get_order", "refund"], "code_execution"]
    assert [t.name for t in agent.tools] == ["google_search", "get_order", "url_context", "refund", "code_execution"]
    assert GoogleSearchTool().declaration() is None  # the model never calls it as a function


def test_built_in_tool_entries_name_and_check_what_they_hold() -> None:
    assert BuiltInTool(Tool(openai_web_search=OpenAiWebSearch())).name == "web_search"
    assert BuiltInTool(Tool(anthropic_server_tool=AnthropicServerTool.web_fetch())).name == "web_fetch"
    assert GoogleSearchTool(GoogleSearch(exclude_domains=["x.example"])).tool.google_search is not None
    assert BuiltInTool(Tool(url_context=None, google_search=GoogleSearch()), name="grounding").name == "grounding"
    with pytest.raises(ConfigurationError, match="exactly one built-in tool"):
        BuiltInTool(Tool())
    with pytest.raises(ConfigurationError, match="exactly one built-in tool"):
        BuiltInTool(Tool(google_search=GoogleSearch(), url_context=None, code_execution=BuiltInCodeExecutionTool().tool
                         .code_execution))
    with pytest.raises(ConfigurationError, match="needs a Tool"):
        BuiltInTool(GoogleSearch())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="built-in tool as an entry"):
        config = GenerateContentConfig(tools=[Tool(google_search=GoogleSearch())])
        LlmAgent("a", ScriptedLlm([]), generate_content_config=config)


def test_a_call_to_a_built_in_tool_by_name_answers_an_error_the_model_sees() -> None:
    model = ScriptedLlm([call_turn("google_search", "{}"), text_turn("Sorry.")])
    _, events = send(LlmAgent("search", model, tools=[GoogleSearchTool()]))
    response = events[1].function_responses()[0].response
    assert "built-in tool" in str(response["error"]) and "Gemini" in str(response["error"])


MAPPERS: dict[str, Callable[[], RequestMapper]] = {
    "openai-chat": lambda: OpenAiChatRequestMapper(base_url="https://x.example/v1", api_key="k"),
    "openai-responses": lambda: OpenAiResponsesRequestMapper(api_key="k"),
    "anthropic": lambda: AnthropicRequestMapper(api_key="k"),
    "gemini": lambda: GeminiRequestMapper(api_key="k"),
}
ENTRIES: dict[str, tuple[Callable[[], BuiltInTool], str]] = {  # an entry, and the provider that runs it
    "google_search": (GoogleSearchTool, "gemini"),
    "web_search": (lambda: BuiltInTool(Tool(openai_web_search=OpenAiWebSearch())), "openai-responses"),
    "anthropic": (lambda: BuiltInTool(Tool(anthropic_server_tool=AnthropicServerTool.web_search())), "anthropic"),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("provider", sorted(MAPPERS))
def test_each_provider_maps_an_agents_built_in_tool_with_its_function_tools_or_refuses_it(
    provider: str, entry: str
) -> None:
    model = ScriptedLlm([text_turn("ok")])
    make, runs_on = ENTRIES[entry]
    send(LlmAgent("a", model, tools=[get_order, make()]))
    request = model.requests[0][0]
    mapper = MAPPERS[provider]()
    if provider != runs_on:
        with pytest.raises(ConfigurationError, match=r"the built-in tool .* runs on"):
            mapper.to_http_request(request, model="m", stream=True)
        return
    body = json.loads(mapper.to_http_request(request, model="m", stream=True).body)
    wire = str(body["tools"])
    assert "get_order" in wire
    assert {"gemini": "googleSearch", "openai-responses": "'web_search'", "anthropic": "web_search_20250305"}[
        provider
    ] in wire


# ---- the order of the request's tools (ADK Java's request processors, then the tools) ---------------


class Forecast(BaseModel):
    city: str


def test_set_model_response_then_transfer_to_agent_then_the_agents_tools() -> None:
    model = ScriptedLlm([text_turn("ok")])
    helper = LlmAgent("helper", ScriptedLlm([]), description="Helps.")
    agent = LlmAgent("planner", model, tools=[get_order, refund], output_schema=Forecast, sub_agents=[helper])
    send(agent)
    assert layout(model.requests[0][0]) == [["set_model_response", "transfer_to_agent", "get_order", "refund"]]


class Listing(BaseToolset):
    """Lists one tool and edits requests (or not)."""

    def __init__(self, tool: BaseTool, note: str | None = None) -> None:
        super().__init__()
        self._tool, self._note = tool, note

    def get_tools(self, readonly_context: Any = None) -> reactivex.Observable[list[BaseTool]]:
        return reactivex.just([self._tool])

    def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> object:
        if self._note is None:
            return None
        return llm_request.append_instructions(self._note)


class Noting(BaseTool):
    """A declared tool that edits the request."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, description="notes")

    def declaration(self) -> Any:
        return FunctionDeclaration(name=self.name, parameters={"type": "object", "properties": {}})

    def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> object:
        return llm_request.append_instructions(f"tool {self.name}")

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return reactivex.just({})


def test_toolsets_tools_keep_their_place_among_the_tools_and_the_toolset_edits_the_request_first() -> None:
    model = ScriptedLlm([text_turn("ok")])
    listing = Listing(Noting("listed"), note="toolset listing")
    agent = LlmAgent("a", model, tools=[Noting("first"), listing, get_order])
    send(agent)
    request = model.requests[0][0]
    # ADK Java's canonicalTools: the order given, each toolset's tools in its place
    assert layout(request) == [["first", "listed", "get_order"]]
    assert [e for e in agent.tools_union] == [agent.tools[0], listing, agent.tools[1]]
    # getRequestProcessorFromTools: a tool's hook; a toolset's own hook, then its tools'
    assert request.config.system_instruction.text().split("\n\n")[-3:] == [
        "tool first",
        "toolset listing",
        "tool listed",
    ]


def test_a_toolset_whose_process_llm_request_answers_wrongly_fails_the_run_naming_it() -> None:
    class Broken(Listing):
        def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> object:
            return "not a request"

    with pytest.raises(ConfigurationError, match="process_llm_request of toolset Broken"):
        send(LlmAgent("a", ScriptedLlm([text_turn("ok")]), tools=[Broken(Noting("x"))]))


# ---- the names of the tools the flow adds -----------------------------------------------------------


def set_model_response(city: str) -> dict[str, str]:
    """A user tool with the name of ADK's structured-answer tool."""
    return {}


def transfer_to_agent(agent_name: str) -> dict[str, str]:
    """A user tool with the name of ADK's transfer tool."""
    return {}


def test_a_tool_named_set_model_response_on_an_agent_with_output_schema_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"tool named 'set_model_response'.*rename the tool"):
        LlmAgent("a", ScriptedLlm([]), tools=[set_model_response], output_schema=Forecast)
    LlmAgent("a", ScriptedLlm([]), tools=[set_model_response])  # without output_schema the name is free
    # a toolset's tool of that name: the run fails before the model is called
    model = ScriptedLlm([text_turn("ok")])
    listing = Listing(listed_set_model_response())
    with pytest.raises(ConfigurationError, match="tool named 'set_model_response'"):
        send(LlmAgent("a", model, tools=[listing], output_schema=Forecast))
    assert model.requests == []


def listed_set_model_response() -> BaseTool:
    return FunctionTool(set_model_response)


def test_a_tool_named_transfer_to_agent_on_an_agent_that_can_transfer_is_refused() -> None:
    model = ScriptedLlm([text_turn("ok")])
    agent = LlmAgent("a", model, tools=[transfer_to_agent], sub_agents=[LlmAgent("b", ScriptedLlm([]))])
    with pytest.raises(ConfigurationError, match=r"tool named 'transfer_to_agent'.*can transfer"):
        send(agent)


# ---- temp: keys: in the emitted event (ADK Java), never stored ------------------------------------------


def test_temp_keys_are_in_the_emitted_events_state_delta_and_never_in_the_stored_one() -> None:
    def jot(note: str, tool_context: ToolContext) -> dict[str, str]:
        """Jot a note down."""
        tool_context.state["temp:scratch"] = note
        tool_context.state["kept"] = "yes"
        return {}

    model = ScriptedLlm([call_turn("jot", '{"note": "draft"}'), text_turn("Done.")])
    runner, events = send(SequentialAgent("p", sub_agents=[LlmAgent("writer", model, tools=[jot])]))
    emitted = events[1]
    assert emitted.actions.state_delta == {"temp:scratch": "draft", "kept": "yes"}  # the event as Java emits it
    stored = runner.session_service.get_session(runner.app_name, "u1", "s1").run()
    same = next(e for e in stored.events if e.id == emitted.id)
    assert same.actions.state_delta == {"kept": "yes"}
    assert stored.state == {"kept": "yes"}


# ---- load_memory tells the model it has memory (ADK Java's LoadMemoryTool.processLlmRequest) -------------


def test_an_agent_with_load_memory_is_told_it_has_memory_after_its_instructions() -> None:
    from rxllm.agents import load_memory
    from rxllm.agents._memory.tools import MEMORY_INSTRUCTION

    model = ScriptedLlm([text_turn("ok")])
    send(LlmAgent("a", model, instruction="Be brief.", tools=[load_memory]))
    system = model.requests[0][0].config.system_instruction.text()
    assert system.startswith("Be brief.\n\n") and system.endswith("\n\n" + MEMORY_INSTRUCTION)
    assert "you should call load_memory function with a query." in system


def test_an_output_schema_agent_whose_toolset_lists_nothing_still_answers_through_set_model_response() -> None:
    class Empty(BaseToolset):
        def get_tools(self, readonly_context: Any = None) -> reactivex.Observable[list[BaseTool]]:
            return reactivex.just([])

    model = ScriptedLlm([text_turn("ok")])
    send(LlmAgent("a", model, tools=[Empty()], output_schema=Forecast))
    request = model.requests[0][0]
    assert layout(request) == [["set_model_response"]]  # ADK Java's OutputSchema asks toolsUnion()
    assert request.config.response_schema is None
