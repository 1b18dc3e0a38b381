"""The ADK comparison scenarios, written once in a neutral form, and the normaliser both sides share.

Each :class:`Scenario` is an agent tree (:class:`AgentSpec`), the scripted model turns of each
``LlmAgent`` (:class:`Reply`), and the user messages of its invocations. Two builders turn it into
running code: ``benchmarks/compare_adk.py`` builds it with google-adk (it writes the golden files
in ``tests/fixtures/adk_golden/``) and ``tests/agents/adk_scenarios_rxllm.py`` builds it with
rxllm. Both sides record every model request and the stored session, and :func:`normalise` turns
them into the same plain JSON shape, apart from ids and timestamps.

Where ADK Python (the golden files) and ADK Java differ, rxllm follows Java: a scenario names the
difference in :attr:`Scenario.differences`, and :data:`DIFFERENCES` holds, per name, where Java
says so and a rewrite of the golden file into what Java does. Where rxllm knowingly does not do
what Java does, :data:`RXLLM_DEVIATIONS` says so the same way (:attr:`Scenario.deviations`).
Nothing else may differ.

This module imports neither rxllm nor google-adk (only pydantic, which both have), so the harness
can load it from a venv that has only google-adk.
"""

from __future__ import annotations

import ast
import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

JsonDict = dict[str, Any]

# ---- the neutral description ---------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """A function call in a scripted model turn."""

    name: str
    args: JsonDict = field(default_factory=dict)
    id: str = "call_1"


@dataclass(frozen=True)
class Reply:
    """One scripted model turn: text, function calls, or both (text first)."""

    text: str | None = None
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    """A tool: ``function`` (a plain function), ``long_running``, ``confirm`` (a function tool that
    requires confirmation), ``agent`` (an AgentTool of :attr:`agent`), ``exit_loop`` or ``examples``."""

    kind: str
    func: Callable[..., Any] | None = None
    agent: AgentSpec | None = None
    skip_summarization: bool = False
    examples: tuple[tuple[str, tuple[tuple[Any, ...], ...]], ...] = ()
    """``examples`` (an ExampleTool): ``(input text, output)``, each output content one of
    ``("text", str)``, ``("call", name, args)`` (a model content) or ``("response", name, dict)``."""


@dataclass(frozen=True)
class AgentSpec:
    """One agent of a tree. ``kind``: ``llm``, ``sequential``, ``parallel``, ``loop`` or ``custom``.

    ``callbacks`` maps an ADK callback option (``before_model_callback``, ...) to a neutral
    callback: a function ``(lib, *, <ADK Python's keyword names>)``, where ``lib`` has the side's
    ``Content``, ``Part``, ``FunctionCall`` and ``LlmResponse``. A ``custom`` agent emits one model
    event with :attr:`custom_text` and :attr:`custom_delta` (a literal port: it only yields it).
    """

    name: str
    kind: str = "llm"
    instruction: str = ""
    global_instruction: str = ""
    description: str = ""
    tools: tuple[ToolSpec, ...] = ()
    sub_agents: tuple[AgentSpec, ...] = ()
    script: tuple[Reply, ...] = ()
    output_key: str | None = None
    output_schema: type[BaseModel] | None = None
    input_schema: type[BaseModel] | None = None
    include_contents: str = "default"
    max_iterations: int | None = None
    disallow_transfer_to_parent: bool = False
    disallow_transfer_to_peers: bool = False
    callbacks: tuple[tuple[str, Callable[..., Any]], ...] = ()
    custom_text: str = ""
    custom_delta: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class FunctionReply:
    """A user message that answers the latest call of ``name`` with ``response`` (a long-running tool's result)."""

    name: str
    response: JsonDict


@dataclass(frozen=True)
class Confirm:
    """A user message that answers the latest ``adk_request_confirmation`` call with a ``ToolConfirmation``."""

    confirmed: bool


Message = str | FunctionReply | Confirm


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    root: AgentSpec
    messages: tuple[Message, ...]
    max_llm_calls: int | None = None
    initial_state: JsonDict = field(default_factory=dict)
    compaction: tuple[int, int] | None = None
    """Sliding-window events compaction: ``(compaction_interval, overlap_size)``, summarised by
    an ``LlmEventSummarizer`` on a scripted model whose requests are recorded as ``summarizer``."""
    summarizer_script: tuple[Reply, ...] = ()
    plugins: bool = False
    """Run with an :class:`AuditHooks` plugin (ADK Python's keyword-only hook signatures)."""
    streaming: bool = False
    """Run with ``StreamingMode.SSE``: each scripted text arrives as partial responses, word by word, then the final."""
    unordered_branches: bool = False
    """Parallel branches: events of different branches may interleave in any order (both sides)."""
    differences: tuple[str, ...] = ()
    deviations: tuple[str, ...] = ()
    """rxllm's known deviations from ADK Java in this scenario (:data:`RXLLM_DEVIATIONS`)."""


def llm_agents(agent: AgentSpec) -> list[AgentSpec]:
    """Every ``LlmAgent`` of a tree, agent tools' agents included, depth first."""
    found = [agent] if agent.kind == "llm" else []
    for sub in agent.sub_agents:
        found.extend(llm_agents(sub))
    for tool in agent.tools:
        if tool.agent is not None:
            found.extend(llm_agents(tool.agent))
    return found


# ---- the tools (plain functions both libraries declare alike) -------------------------------------


def get_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id."""
    return {"order_id": order_id, "status": "shipped"}


def get_weather(city: str) -> dict[str, Any]:
    """Tell the weather in a city."""
    return {"city": city, "forecast": "sunny"}


def get_time(city: str) -> dict[str, Any]:
    """Tell the time in a city."""
    return {"city": city, "time": "10:30"}


def note_scratch(value: str, tool_context: Any) -> dict[str, Any]:
    """Write a value to the scratch pad."""
    tool_context.state["temp:scratch"] = value
    return {"noted": value}


def remember_everywhere(value: str, tool_context: Any) -> dict[str, Any]:
    """Remember a value in the session, user and app state."""
    tool_context.state["plain"] = value
    tool_context.state["user:favourite"] = value
    tool_context.state["app:motto"] = value
    tool_context.state["temp:draft"] = value
    return {"remembered": value}


def log_event(message: str) -> None:
    """Log a message; returns nothing."""
    del message


def flaky_lookup(order_id: str) -> dict[str, Any]:
    """Look an order up in a store that is down."""
    raise RuntimeError(f"the order store is down (looking up {order_id})")


def start_refund(order_id: str) -> dict[str, Any]:
    """Start a refund that a person approves later."""
    return {"status": "pending", "ticket": "T-9", "order_id": order_id}


def delete_order(order_id: str) -> dict[str, Any]:
    """Delete an order for good."""
    return {"deleted": order_id}


class Forecast(BaseModel):
    city: str
    summary: str


class Question(BaseModel):
    topic: str


# ---- the callbacks (neutral: called with ADK Python's keyword names) ------------------------------


def cb_before_agent_mark(lib: Any, *, callback_context: Any) -> Any:
    callback_context.state["before_agent"] = "ran"
    return None


def cb_before_agent_closed(lib: Any, *, callback_context: Any) -> Any:
    callback_context.state["closed"] = True
    return lib.Content(role="model", parts=[lib.Part(text="We are closed today.")])


def cb_after_agent_mark(lib: Any, *, callback_context: Any) -> Any:
    callback_context.state["after_agent"] = "ran"
    return None


def cb_before_model_mark(lib: Any, *, callback_context: Any, llm_request: Any) -> Any:
    callback_context.state["model_calls_seen"] = len(llm_request.contents)
    return None


def cb_before_model_cached(lib: Any, *, callback_context: Any, llm_request: Any) -> Any:
    callback_context.state["cache"] = "hit"
    return lib.LlmResponse(content=lib.Content(role="model", parts=[lib.Part(text="From the cache.")]))


def cb_after_model_upper(lib: Any, *, callback_context: Any, llm_response: Any) -> Any:
    content = llm_response.content
    if content is None or not content.parts or content.parts[0].text is None:
        return None
    return lib.LlmResponse(content=lib.Content(role="model", parts=[lib.Part(text=content.parts[0].text.upper())]))


def cb_before_tool_block(lib: Any, *, tool: Any, args: Any, tool_context: Any) -> Any:
    if args.get("order_id") == "X1":
        tool_context.state["blocked"] = "X1"
        return {"error": "blocked by policy"}
    return None


def cb_after_tool_stamp(lib: Any, *, tool: Any, args: Any, tool_context: Any, tool_response: Any) -> Any:
    return {**tool_response, "checked_by": tool.name}


class AuditHooks:
    """A plugin's hooks, in ADK Python's keyword-only style. Each side builds its plugin class
    with these functions in the class body: ``type("Audit", (BasePlugin,), hooks)``. ``lib`` is
    set on the class, as for the callbacks."""

    lib: Any = None

    async def after_model_callback(self, *, callback_context: Any, llm_response: Any) -> Any:
        return cb_after_model_upper(self.lib, callback_context=callback_context, llm_response=llm_response)

    async def after_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any, result: Any) -> Any:
        # ADK Python hands an AgentTool's raw text here; ADK Java and rxllm its {"result": text}
        answer = result if isinstance(result, dict) else {"result": result}
        return {**answer, "audited": tool.name}


def plugin_hooks(lib: Any) -> dict[str, Any]:
    """The class body of a side's plugin: the hook functions and ``lib``."""
    return {
        "lib": lib,
        "after_model_callback": AuditHooks.after_model_callback,
        "after_tool_callback": AuditHooks.after_tool_callback,
    }


# ---- the scenarios --------------------------------------------------------------------------------


def stream_pieces(text: str) -> list[str]:
    """How a streamed scripted text arrives: word by word, each piece with its leading space."""
    words = text.split(" ")
    return [words[0], *(" " + w for w in words[1:])]


def _text(text: str) -> Reply:
    return Reply(text=text)


def _call(name: str, call_id: str = "call_1", **args: Any) -> Reply:
    return Reply(calls=(Call(name, args, call_id),))


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "single_agent_tools",
        "one LlmAgent, a text-and-call turn, the tool's answer, a final text",
        AgentSpec(
            "support",
            instruction="You answer questions about orders.",
            description="The order desk.",
            tools=(ToolSpec("function", get_order),),
            script=(
                Reply(text="Let me look.", calls=(Call("get_order", {"order_id": "A17"}),)),
                _text("Order A17 shipped."),
            ),
        ),
        ("Where is order A17?",),
    ),
    Scenario(
        "identity_and_global_instruction",
        "the identity line after the root's global instruction and the agent's own, with {state} rendering",
        AgentSpec(
            "concierge",
            instruction="Greet {user_name} politely. Mood: {mood?}.",
            global_instruction="You work for the Grand Hotel.",
            description="Greets guests.",
            script=(_text("Welcome, Ada."),),
        ),
        ("Hello",),
        initial_state={"user_name": "Ada"},
    ),
    Scenario(
        "temp_state_across_steps",
        "a tool writes temp:scratch; the next model call of the same invocation renders it; never stored",
        AgentSpec(
            "scribe",
            instruction="Scratch pad: {temp:scratch?}",
            tools=(ToolSpec("function", note_scratch),),
            script=(_call("note_scratch", value="42"), _text("Noted 42.")),
        ),
        ("Note 42.", "What did you note?"),
    ),
    Scenario(
        "state_prefixes",
        "session, user:, app: and temp: keys written by a tool; the stored delta and the state afterwards",
        AgentSpec(
            "keeper",
            instruction="Plain {plain?}, user {user:favourite?}, app {app:motto?}, temp {temp:draft?}.",
            tools=(ToolSpec("function", remember_everywhere),),
            script=(_call("remember_everywhere", value="tea"), _text("Remembered."), _text("Still tea.")),
        ),
        ("Remember tea.", "What do you remember?"),
    ),
    Scenario(
        "tool_returns_none",
        "a function tool that returns nothing",
        AgentSpec(
            "logger",
            instruction="Log what you are told.",
            tools=(ToolSpec("function", log_event),),
            script=(_call("log_event", message="door opened"), _text("Logged.")),
        ),
        ("Log: door opened",),
        differences=("none_result_is_empty_dict",),
    ),
    Scenario(
        "output_schema_with_tools",
        "output_schema and a tool: the set_model_response tool, its instruction, the final JSON",
        AgentSpec(
            "forecaster",
            instruction="Answer with a forecast.",
            tools=(ToolSpec("function", get_weather),),
            output_schema=Forecast,
            output_key="forecast",
            script=(
                _call("get_weather", city="Paris"),
                _call("set_model_response", "call_2", city="Paris", summary="Sunny"),
            ),
        ),
        ("Weather in Paris?",),
        differences=(
            "set_model_response_instruction_first",
            "set_model_response_description",
            "set_model_response_final_json",
        ),
    ),
    Scenario(
        "output_schema_no_tools",
        "output_schema alone: response_schema, no tools, output_key stores the parsed object",
        AgentSpec(
            "forecaster",
            instruction="Answer with a forecast.",
            output_schema=Forecast,
            output_key="forecast",
            script=(_text('{"city": "Oslo", "summary": "Snow"}'),),
        ),
        ("Weather in Oslo?",),
    ),
    Scenario(
        "transfer_to_sub_agent",
        "a router transfers to a specialist, who answers; the next message goes to the specialist",
        AgentSpec(
            "router",
            instruction="Route the question.",
            description="Routes questions.",
            sub_agents=(
                AgentSpec(
                    "billing",
                    instruction="Handle invoices.",
                    description="Invoices and refunds.",
                    script=(_text("Your invoice is paid."), _text("Anything else on billing?")),
                ),
                AgentSpec(
                    "shipping",
                    instruction="Handle deliveries.",
                    description="Deliveries.",
                    script=(_text("unused"),),
                ),
            ),
            script=(_call("transfer_to_agent", agent_name="billing"),),
        ),
        ("Is my invoice paid?", "Thanks."),
        differences=(
            "foreign_event_quoting",
            "transfer_instruction_wording",
            "transfer_tool_declaration",
            "none_result_is_empty_dict",
        ),
    ),
    Scenario(
        "transfer_back_to_parent",
        "a specialist transfers back to its parent (peers disallowed)",
        AgentSpec(
            "router",
            instruction="Route the question.",
            description="Routes questions.",
            sub_agents=(
                AgentSpec(
                    "billing",
                    instruction="Handle invoices.",
                    description="Invoices and refunds.",
                    disallow_transfer_to_peers=True,
                    script=(_call("transfer_to_agent", "call_b", agent_name="router"),),
                ),
            ),
            script=(_call("transfer_to_agent", agent_name="billing"), _text("I can help with that myself.")),
        ),
        ("Where is my parcel?",),
        differences=(
            "foreign_event_quoting",
            "transfer_instruction_wording",
            "transfer_tool_declaration",
            "none_result_is_empty_dict",
        ),
    ),
    Scenario(
        "sequential_workflow",
        "writer then reviewer; output_key passes the draft through state",
        AgentSpec(
            "pipeline",
            kind="sequential",
            sub_agents=(
                AgentSpec(
                    "writer", instruction="Write a haiku.", output_key="draft", script=(_text("Old pond, frog."),)
                ),
                AgentSpec("reviewer", instruction="Review this draft: {draft}", script=(_text("Good haiku."),)),
            ),
        ),
        ("Write about a frog.",),
        differences=("foreign_event_quoting",),
    ),
    Scenario(
        "parallel_workflow",
        "two branches in parallel, then a merger that reads both results from state",
        AgentSpec(
            "research",
            kind="sequential",
            sub_agents=(
                AgentSpec(
                    "fan_out",
                    kind="parallel",
                    sub_agents=(
                        AgentSpec(
                            "weather",
                            instruction="Find the weather.",
                            tools=(ToolSpec("function", get_weather),),
                            output_key="weather",
                            script=(_call("get_weather", "w1", city="Rome"), _text("Sunny in Rome.")),
                        ),
                        AgentSpec(
                            "clock",
                            instruction="Find the time.",
                            tools=(ToolSpec("function", get_time),),
                            output_key="time",
                            script=(_call("get_time", "t1", city="Rome"), _text("10:30 in Rome.")),
                        ),
                    ),
                ),
                AgentSpec("merger", instruction="Merge: {weather} / {time}", script=(_text("Sunny, 10:30."),)),
            ),
        ),
        ("Rome now?",),
        unordered_branches=True,
        differences=("foreign_event_quoting",),
    ),
    Scenario(
        "loop_with_exit_loop",
        "a loop of a critic and a refiner; the refiner calls exit_loop in the second iteration",
        AgentSpec(
            "refine",
            kind="loop",
            max_iterations=5,
            sub_agents=(
                AgentSpec("critic", instruction="Critique: {draft?}", script=(_text("Too long."), _text("Fine now."))),
                AgentSpec(
                    "refiner",
                    instruction="Refine the draft, or call exit_loop when the critic is happy.",
                    tools=(ToolSpec("exit_loop"),),
                    output_key="draft",
                    script=(_text("Short draft."), _call("exit_loop", "x1")),
                ),
            ),
        ),
        ("Refine: a very long draft",),
        differences=("foreign_event_quoting", "none_result_is_empty_dict"),
    ),
    Scenario(
        "loop_max_iterations",
        "a loop that stops at max_iterations",
        AgentSpec(
            "repeat",
            kind="loop",
            max_iterations=2,
            sub_agents=(AgentSpec("echo", instruction="Say it again.", script=(_text("Again."), _text("Again!"))),),
        ),
        ("Go",),
    ),
    Scenario(
        "agent_tool",
        "an AgentTool: the inner agent runs in its own session; its answer is the tool's result",
        AgentSpec(
            "assistant",
            instruction="Use the translator.",
            tools=(
                ToolSpec(
                    "agent",
                    agent=AgentSpec(
                        "translator",
                        instruction="Translate to French.",
                        description="Translates text to French.",
                        script=(_text("Bonjour"),),
                    ),
                ),
            ),
            script=(_call("translator", request="Hello"), _text("It is Bonjour.")),
        ),
        ("Translate Hello",),
    ),
    Scenario(
        "callbacks_model_and_tool",
        "before/after agent, before/after model and before/after tool callbacks (ADK Python keyword style)",
        AgentSpec(
            "guarded",
            instruction="Look orders up.",
            tools=(ToolSpec("function", get_order),),
            callbacks=(
                ("before_agent_callback", cb_before_agent_mark),
                ("after_agent_callback", cb_after_agent_mark),
                ("before_model_callback", cb_before_model_mark),
                ("after_model_callback", cb_after_model_upper),
                ("before_tool_callback", cb_before_tool_block),
                ("after_tool_callback", cb_after_tool_stamp),
            ),
            script=(
                Reply(
                    calls=(Call("get_order", {"order_id": "A17"}, "c1"), Call("get_order", {"order_id": "X1"}, "c2"))
                ),
                _text("one shipped, one blocked."),
            ),
        ),
        ("Check A17 and X1",),
    ),
    Scenario(
        "before_model_short_circuit",
        "a before_model callback answers instead of the model",
        AgentSpec(
            "cached",
            instruction="Answer.",
            callbacks=(("before_model_callback", cb_before_model_cached),),
            script=(),
        ),
        ("Anything",),
    ),
    Scenario(
        "long_running_tool",
        "a long-running tool: the invocation pauses; the client's function response resumes it",
        AgentSpec(
            "refunds",
            instruction="Start refunds.",
            tools=(ToolSpec("long_running", start_refund),),
            script=(_call("start_refund", "r1", order_id="A17"), _text("Refund requested."), _text("Refund approved.")),
        ),
        ("Refund A17", FunctionReply("start_refund", {"status": "approved", "ticket": "T-9"})),
        differences=("function_response_new_invocation",),
    ),
    Scenario(
        "max_llm_calls",
        "max_llm_calls=2 stops a model that keeps calling a tool",
        AgentSpec(
            "looper",
            instruction="Keep checking.",
            tools=(ToolSpec("function", get_order),),
            script=(_call("get_order", "c1", order_id="A1"), _call("get_order", "c2", order_id="A2"), _text("unused")),
        ),
        ("Check forever",),
        max_llm_calls=2,
        differences=("error_stops_without_an_event",),
    ),
    Scenario(
        "tool_confirmation",
        "a tool that requires confirmation: the request event, the client's ToolConfirmation, the call runs",
        AgentSpec(
            "admin",
            instruction="Delete orders when asked.",
            tools=(ToolSpec("confirm", delete_order),),
            script=(_call("delete_order", "d1", order_id="A17"), _text("Waiting for approval."), _text("Deleted A17.")),
        ),
        ("Delete A17", Confirm(True)),
        differences=(
            "confirmation_event_role",
            "confirmation_request_continues",
            "function_response_new_invocation",
        ),
    ),
    Scenario(
        "custom_agent_events",
        "a custom agent that only yields its event (a literal port); the next agent reads its state",
        AgentSpec(
            "pipeline",
            kind="sequential",
            sub_agents=(
                AgentSpec("greeter", kind="custom", custom_text="Hello.", custom_delta=(("greeted", "yes"),)),
                AgentSpec("reader", instruction="Greeted: {greeted}", script=(_text("Read."),)),
            ),
        ),
        ("hi",),
        differences=("foreign_event_quoting",),
    ),
    Scenario(
        "events_compaction",
        "sliding-window compaction after two invocations: the summary replaces them in the next request",
        AgentSpec(
            "support",
            instruction="You answer questions about orders.",
            tools=(ToolSpec("function", get_order),),
            script=(
                _call("get_order", "c1", order_id="A1"),
                _text("A1 shipped."),
                _text("Noted."),
                _text("A1 shipped, as I said."),
            ),
        ),
        ("Where is A1?", "Thanks.", "Remind me about A1."),
        compaction=(2, 0),
        summarizer_script=(_text("The user asked about order A1; it shipped."),),
        differences=("summarizer_prompt",),
    ),
    Scenario(
        "include_contents_none",
        "a second agent with include_contents='none' sees only the current turn, not the first agent's",
        AgentSpec(
            "pipeline",
            kind="sequential",
            sub_agents=(
                AgentSpec("drafter", instruction="Draft a reply.", output_key="draft", script=(_text("Draft one."),)),
                AgentSpec(
                    "polisher",
                    instruction="Polish: {draft}",
                    include_contents="none",
                    script=(_text("Polished one."),),
                ),
            ),
        ),
        ("Reply to the customer.",),
        differences=("foreign_event_quoting",),
    ),
    Scenario(
        "agent_tool_input_schema",
        "an AgentTool over an agent with an input_schema: the schema is the tool's parameters; skip_summarization",
        AgentSpec(
            "assistant",
            instruction="Ask the expert.",
            tools=(
                ToolSpec(
                    "agent",
                    skip_summarization=True,
                    agent=AgentSpec(
                        "expert",
                        instruction="Explain the topic briefly.",
                        description="Explains a topic.",
                        input_schema=Question,
                        script=(_text("Tides come from the moon."),),
                    ),
                ),
            ),
            script=(_call("expert", "e1", topic="tides"), _text("unused")),
        ),
        ("Why are there tides?",),
        differences=("agent_tool_skip_summarization_text",),
    ),
    Scenario(
        "example_tool",
        "an ExampleTool adds few-shot examples to the system instruction, with a call and its response",
        AgentSpec(
            "dice",
            instruction="Roll dice when asked.",
            tools=(
                ToolSpec(
                    "examples",
                    examples=(
                        (
                            "Roll a die.",
                            (
                                ("call", "roll_die", {"sides": 6}),
                                ("response", "roll_die", {"result": 4}),
                                ("text", "You rolled 4."),
                            ),
                        ),
                        ("Hello", (("text", "Hi! Shall I roll a die?"),)),
                    ),
                ),
            ),
            script=(_text("Rolling."),),
        ),
        ("Roll for me.",),
        differences=("example_text_format",),
    ),
    Scenario(
        "before_agent_short_circuit",
        "a before_agent callback answers with content: the agent's model is never called",
        AgentSpec(
            "closed",
            instruction="Answer.",
            callbacks=(("before_agent_callback", cb_before_agent_closed),),
        ),
        ("Are you open?",),
    ),
    Scenario(
        "tool_confirmation_rejected",
        "the client rejects the confirmation: the call answers ADK's rejection error",
        AgentSpec(
            "admin",
            instruction="Delete orders when asked.",
            tools=(ToolSpec("confirm", delete_order),),
            script=(_call("delete_order", "d1", order_id="A17"), _text("Waiting for approval."), _text("Not deleted.")),
        ),
        ("Delete A17", Confirm(False)),
        differences=("confirmation_event_role", "confirmation_request_continues", "function_response_new_invocation"),
    ),
    Scenario(
        "output_schema_with_sub_agents",
        "an output_schema agent with a sub-agent: transfer is offered as to any other agent",
        AgentSpec(
            "judge",
            instruction="Judge the forecast, or hand over to the helper.",
            description="Judges forecasts.",
            output_schema=Forecast,
            sub_agents=(
                AgentSpec(
                    "helper", instruction="Help.", description="Helps with anything.", script=(_text("Helped."),)
                ),
            ),
            script=(_call("transfer_to_agent", "j1", agent_name="helper"),),
        ),
        ("Is this forecast right?",),
        differences=(
            "foreign_event_quoting",
            "transfer_instruction_wording",
            "transfer_tool_declaration",
            "none_result_is_empty_dict",
        ),
    ),
    Scenario(
        "sse_partials",
        "streaming (SSE): partial text events reach the caller and are never stored; the final is stored once",
        AgentSpec(
            "support",
            instruction="You answer questions about orders.",
            tools=(ToolSpec("function", get_order),),
            script=(
                Reply(text="Let me look.", calls=(Call("get_order", {"order_id": "A17"}),)),
                Reply(text="Order A17 shipped."),
            ),
        ),
        ("Where is order A17?",),
        streaming=True,
    ),
    Scenario(
        "plugins_and_agent_tool",
        "a plugin (after_model upper-cases, after_tool stamps) and an AgentTool with its default include_plugins",
        AgentSpec(
            "assistant",
            instruction="Use the translator, then look the order up.",
            tools=(
                ToolSpec(
                    "agent",
                    agent=AgentSpec(
                        "translator",
                        instruction="Translate to French.",
                        description="Translates text to French.",
                        script=(_text("Bonjour"),),
                    ),
                ),
                ToolSpec("function", get_order),
            ),
            script=(
                Reply(
                    calls=(Call("translator", {"request": "Hello"}, "p1"), Call("get_order", {"order_id": "A17"}, "p2"))
                ),
                _text("Bonjour; A17 shipped."),
            ),
        ),
        ("Translate Hello and check A17",),
        plugins=True,
        differences=("agent_tool_include_plugins_default",),
    ),
    Scenario(
        "tool_raises",
        "a function tool that raises",
        AgentSpec(
            "support",
            instruction="Look orders up.",
            tools=(ToolSpec("function", flaky_lookup),),
            script=(_call("flaky_lookup", "f1", order_id="A17"), _text("The store is down.")),
        ),
        ("Where is A17?",),
        differences=("tool_error_answers_the_model",),
        deviations=("tool_error_detail",),
    ),
)

SCENARIOS_BY_NAME = {s.name: s for s in SCENARIOS}

# ---- normalising a side's record ------------------------------------------------------------------

_GENERATED_ID = re.compile(r"^(adk-|af-|call_[0-9a-f]{16,}|[0-9a-f]{8}-[0-9a-f]{4}-)")
_SCRIPTED_IDS = {c.id for s in SCENARIOS for a in llm_agents(s.root) for r in a.script for c in r.calls}

_EVENT_ACTION_KEYS = (
    "state_delta",
    "artifact_delta",
    "transfer_to_agent",
    "escalate",
    "skip_summarization",
    "requested_tool_confirmations",
    "end_invocation",
    "compaction",
)


class IdMap:
    """Generated call ids, by first appearance: ``gen-1``, ``gen-2``, ...; scripted ids stay."""

    def __init__(self, prefix: str = "gen") -> None:
        self._ids: dict[str, str] = {}
        self._prefix = prefix

    def __call__(self, value: str | None) -> str | None:
        if value is None or value in _SCRIPTED_IDS:
            return value
        if value not in self._ids:
            self._ids[value] = f"{self._prefix}-{len(self._ids) + 1}"
        return self._ids[value]


def _prune(value: Any) -> Any:
    """Drop None, empty dicts and empty lists, recursively (absent and empty read alike)."""
    if isinstance(value, dict):
        pruned = {k: _prune(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v is not None and v != {} and v != []}
    if isinstance(value, (list, tuple)):
        return [_prune(v) for v in value]
    return value


def _part(part: JsonDict, ids: IdMap) -> JsonDict:
    out: JsonDict = {}
    if part.get("text") is not None:
        out["text"] = part["text"]
    call = part.get("function_call")
    if call:
        out["function_call"] = {"id": ids(call.get("id")), "name": call["name"], "args": call.get("args") or {}}
    response = part.get("function_response")
    if response:
        out["function_response"] = {
            "id": ids(response.get("id")),
            "name": response["name"],
            "response": response.get("response"),
        }
    if part.get("thought"):
        out["thought"] = True
    return out


def normalise_content(content: JsonDict | None, ids: IdMap) -> JsonDict | None:
    if not content:
        return None
    return {"role": content.get("role"), "parts": [_part(p, ids) for p in content.get("parts") or []]}


def _system_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "".join(p.get("text") or "" for p in value.get("parts") or [])
    return str(value)


def _schema(value: Any) -> Any:
    """A JSON schema, lower-cased types, without the titles and ``additionalProperties`` a generator adds."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in ("title", "additionalProperties", "additional_properties", "property_ordering"):
                continue
            if key == "type" and isinstance(item, str):
                item = item.lower()
            if key == "properties" and isinstance(item, dict):
                out[key] = {name: _schema(prop) for name, prop in item.items()}
                continue
            out[key] = _schema(item)
        return _prune(out)
    if isinstance(value, list):
        return [_schema(v) for v in value]
    return value


def _tools(config: JsonDict) -> list[JsonDict]:
    out: list[JsonDict] = []
    for tool in config.get("tools") or []:
        for declaration in tool.get("function_declarations") or []:
            parameters = (
                declaration.get("parameters_json_schema")
                or declaration.get("parameters")
                or {"type": "object", "properties": {}}
            )
            out.append(
                _prune(
                    {
                        "name": declaration["name"],
                        "description": declaration.get("description") or "",
                        "parameters": _schema(parameters) or {"type": "object"},
                    }
                )
            )
        others = {k: v for k, v in tool.items() if k != "function_declarations" and v}
        if others:
            out.append({"built_in": sorted(others)})
    return out


def normalise_request(request: JsonDict, ids: IdMap) -> JsonDict:
    """A model request as a side recorded it (``model_dump(mode="json")``): system instruction, contents, tools."""
    config = request.get("config") or {}
    out: JsonDict = {
        "system_instruction": _system_text(config.get("system_instruction")),
        "contents": [normalise_content(c, ids) for c in request.get("contents") or []],
        "tools": _tools(config),
    }
    schema = config.get("response_schema") or config.get("response_json_schema")
    if schema:
        out["response_schema"] = _schema(schema)
    return out


def normalise_event(event: JsonDict, ids: IdMap, invocations: IdMap | None = None) -> JsonDict:
    actions = event.get("actions") or {}
    kept_actions = {}
    for key in _EVENT_ACTION_KEYS:
        value = actions.get(key)
        if key == "requested_tool_confirmations" and value:
            value = {ids(k): _prune(v) for k, v in value.items()}
        if key == "compaction" and value:
            value = {"compacted_content": normalise_content(value.get("compacted_content"), ids)}
        kept_actions[key] = value
    out = {  # pruned at this level only: a tool's response keeps its nulls
        "author": event.get("author"),
        "invocation": invocations(event.get("invocation_id") or "") if invocations is not None else None,
        "branch": event.get("branch"),
        "content": normalise_content(event.get("content"), ids),
        "actions": _prune(kept_actions),
        "long_running_tool_ids": sorted(ids(i) or "" for i in event.get("long_running_tool_ids") or []),
        "error_code": event.get("error_code"),
        "turn_complete": event.get("turn_complete"),
        "interrupted": event.get("interrupted"),
    }
    return {k: v for k, v in out.items() if v is not None and v != {} and v != []}


def _order_branches(events: list[JsonDict]) -> list[JsonDict]:
    """Events of parallel branches in branch order (stable within a branch), the rest where they stand."""
    branched = [i for i, e in enumerate(events) if (e.get("branch") or "").count(".") >= 1]
    if not branched:
        return events
    first, last = branched[0], branched[-1]
    middle = sorted(events[first : last + 1], key=lambda e: e.get("branch") or "")
    return events[:first] + middle + events[last + 1 :]


_NARRATED_AUTHOR = re.compile(r"^\[([^\]]+)\]")


def _order_narrations(request: JsonDict) -> JsonDict:
    """Runs of other agents' narrated turns ("For context: ...") in author order, stable within an author.

    Parallel branches finish in any order, and a later agent's request narrates them as stored.
    """

    def author(content: JsonDict | None) -> str | None:
        parts = (content or {}).get("parts") or []
        if len(parts) < 2 or not (parts[0].get("text") or "").startswith("For context:"):
            return None
        found = _NARRATED_AUTHOR.match(parts[1].get("text") or "")
        return found[1] if found else None

    contents = request["contents"]
    ordered: list[JsonDict] = []
    run: list[JsonDict] = []
    for content in [*contents, None]:
        if content is not None and author(content) is not None:
            run.append(content)
            continue
        ordered.extend(sorted(run, key=lambda c: author(c) or ""))
        run = []
        if content is not None:
            ordered.append(content)
    request["contents"] = ordered
    return request


def normalise(scenario: Scenario, record: JsonDict) -> JsonDict:
    """A side's raw record → the comparable shape.

    ``record``: ``{"requests": {agent name: [request dump, ...]}, "events": [event dump, ...],
    "state": {...}}`` (dumps are ``model_dump(mode="json")`` of either library's types). Ids are
    mapped by their first appearance in the stored events, then in the requests.
    """
    ids = IdMap()
    invocations = IdMap("inv")
    events = [normalise_event(e, ids, invocations) for e in record["events"]]
    requests = {
        agent: [normalise_request(r, ids) for r in dumps]
        for agent, dumps in sorted(record["requests"].items())
        if dumps
    }
    if scenario.unordered_branches:
        events = _order_branches(events)
        requests = {agent: [_order_narrations(r) for r in made] for agent, made in requests.items()}
    return {
        "scenario": scenario.name,
        "requests": requests,
        "events": events,
        "state": json.loads(json.dumps(record.get("state") or {}, sort_keys=True)),
        "outcomes": list(record["outcomes"]),
        "partials": list(record.get("partials") or []),
    }


# ---- where ADK Python and ADK Java differ (rxllm follows Java) -------------------------------------


@dataclass(frozen=True)
class Difference:
    """A documented ADK Python / ADK Java difference: ``rewrite`` turns the golden file (ADK
    Python's record) into what ADK Java does; ``java`` says where Java's source says so."""

    name: str
    summary: str
    java: str
    rewrite: Callable[[JsonDict, Scenario], JsonDict]


def _walk_parts(golden: JsonDict) -> list[JsonDict]:
    parts: list[JsonDict] = []
    for event in golden["events"]:
        parts.extend((event.get("content") or {}).get("parts") or [])
    for requests in golden["requests"].values():
        for request in requests:
            for content in request["contents"]:
                parts.extend(content.get("parts") or [])
    return parts


def _request_parts(golden: JsonDict) -> list[JsonDict]:
    return [
        part
        for requests in golden["requests"].values()
        for request in requests
        for content in request["contents"]
        for part in content.get("parts") or []
    ]


def _none_result_is_empty_dict(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for part in _walk_parts(golden):
        response = part.get("function_response")
        if response is not None and response.get("response") == {"result": None}:
            response["response"] = {}
        text = part.get("text")
        if text is not None and "tool returned result:" in text:  # the narration of another agent's call
            part["text"] = text.replace("\n{'result': None}\n", "\n{}\n").replace('{"result":null}', "{}")
    return golden


_QUOTED = re.compile(
    r"^\[(?P<author>[^\]]+)\] (?P<what>said|called tool `[^`]+` with parameters|`[^`]+` tool returned result):\n"
    r"<<<BEGIN_QUOTED_AGENT_CONTENT>>>\n(?P<body>.*)\n<<<END_QUOTED_AGENT_CONTENT>>>$",
    re.DOTALL,
)


def _foreign_event_quoting(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for part in _request_parts(golden):
        text = part.get("text")
        if text is None:
            continue
        if text.startswith("For context: below is a transcript of what another agent did"):
            part["text"] = "For context:"
            continue
        quoted = _QUOTED.match(text)
        if quoted is None:
            continue
        body = quoted["body"]
        if quoted["what"] != "said":  # ADK Python prints the dict's repr; Java writes compact JSON
            body = json.dumps(ast.literal_eval(body), ensure_ascii=False, separators=(",", ":"))
        part["text"] = f"[{quoted['author']}] {quoted['what']}: {body}"
    return golden


_PY_TRANSFER_TEXT = (
    "If you are the best to answer the question according to your description,\n"
    "you can answer it.\n\n"
    "If another agent is better for answering the question according to its\n"
    "description, call `transfer_to_agent` function to transfer the question to that\n"
    "agent. When transferring, do not generate any text other than the function\n"
    "call.\n\n"
    "**NOTE**: the only available agents for `transfer_to_agent` function are\n"
)
_JAVA_TRANSFER_TEXT = (
    "If you are the best to answer the question according to your description, you\n"
    "can answer it.\n\n"
    "If another agent is better for answering the question according to its\n"
    "description, call `transfer_to_agent` function to transfer the\n"
    "question to that agent. When transferring, do not generate any text other than\n"
    "the function call.\n\n"
    "**NOTE**: the only available agents for `transfer_to_agent` function are "
)


def _transfer_instruction_wording(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for requests in golden["requests"].values():
        for request in requests:
            request["system_instruction"] = request["system_instruction"].replace(
                _PY_TRANSFER_TEXT, _JAVA_TRANSFER_TEXT
            )
    return golden


JAVA_TRANSFER_DESCRIPTION = (
    "Transfer the question to another agent.\n\n"
    "  This tool hands off control to another agent when it's more suitable to\n"
    "  answer the user's question according to the agent's description.\n\n"
    "  Args:\n"
    "    agent_name: the agent name to transfer to.\n"
    "  "
)


def _transfer_tool_declaration(golden: JsonDict, scenario: Scenario) -> JsonDict:
    java = {
        "name": "transfer_to_agent",
        "description": JAVA_TRANSFER_DESCRIPTION,
        "parameters": {"properties": {"agent_name": {"type": "string"}}, "required": ["agent_name"], "type": "object"},
    }
    for requests in golden["requests"].values():
        for request in requests:
            request["tools"] = [java if t.get("name") == "transfer_to_agent" else t for t in request["tools"]]
    return golden


SET_MODEL_RESPONSE_INSTRUCTION = (
    "IMPORTANT: You have access to other tools, but you must provide your final response using the "
    "set_model_response tool with the required structured format. After using any other tools needed to "
    "complete the task, always call set_model_response with your final answer in the specified schema format."
)
JAVA_SET_MODEL_RESPONSE_DESCRIPTION = (
    "Set your final response using the required output schema. After using any other tools needed to "
    "complete the task, always call set_model_response with your final answer in the specified schema format."
)


def _set_model_response_instruction_first(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for requests in golden["requests"].values():
        for request in requests:
            text = request["system_instruction"]
            if text.endswith("\n\n" + SET_MODEL_RESPONSE_INSTRUCTION):
                rest = text[: -len("\n\n" + SET_MODEL_RESPONSE_INSTRUCTION)]
                request["system_instruction"] = SET_MODEL_RESPONSE_INSTRUCTION + "\n\n" + rest
    return golden


def _set_model_response_description(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for requests in golden["requests"].values():
        for request in requests:
            for tool in request["tools"]:
                if tool.get("name") == "set_model_response":
                    tool["description"] = JAVA_SET_MODEL_RESPONSE_DESCRIPTION
    return golden


def _set_model_response_final_json(golden: JsonDict, scenario: Scenario) -> JsonDict:
    answered = False
    for event in golden["events"]:
        parts = (event.get("content") or {}).get("parts") or []
        if any((p.get("function_response") or {}).get("name") == "set_model_response" for p in parts):
            answered = True
            continue
        if answered and len(parts) == 1 and parts[0].get("text"):
            parts[0]["text"] = json.dumps(json.loads(parts[0]["text"]), ensure_ascii=False, separators=(",", ":"))
            answered = False
    return golden


def _error_stops_without_an_event(golden: JsonDict, scenario: Scenario) -> JsonDict:
    golden["events"] = [e for e in golden["events"] if not (e.get("error_code") and not e.get("content"))]
    return golden


def _confirmation_event_role(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for event in golden["events"]:
        parts = (event.get("content") or {}).get("parts") or []
        if parts and all((p.get("function_call") or {}).get("name") == "adk_request_confirmation" for p in parts):
            event["content"]["role"] = "user"
    return golden


def _confirmation_request_continues(golden: JsonDict, scenario: Scenario) -> JsonDict:
    """ADK Python ends the agent's turn at a confirmation request; Java's flow calls the model once more.

    The extra call's request is the previous request's contents with the call and its error
    response; its answer is the agent's next scripted turn, so every later turn moves up by one.
    The request after the client's confirmation is unchanged (the contents builder keeps the
    latest response of the call and drops what came between).
    """
    events = golden["events"]
    at = next(i for i, e in enumerate(events) if (e.get("actions") or {}).get("requested_tool_confirmations"))
    response_event = events[at]
    response_event["actions"].pop("skip_summarization", None)
    author = response_event["author"]
    agent = next(a for a in llm_agents(scenario.root) if a.name == author)
    requests = golden["requests"][author]

    def model_turn(event: JsonDict) -> bool:  # a model response of the agent (not the confirmation request)
        parts = (event.get("content") or {}).get("parts") or []
        return (
            event.get("author") == author
            and event["content"]["role"] == "model"
            and not any((p.get("function_call") or {}).get("name") == "adk_request_confirmation" for p in parts)
        )

    calls_before = sum(1 for e in events[:at] if model_turn(e))
    call_event = next(e for e in reversed(events[:at]) if model_turn(e))
    extra = copy.deepcopy(requests[calls_before - 1])
    extra["contents"] += [copy.deepcopy(call_event["content"]), copy.deepcopy(response_event["content"])]
    requests.insert(calls_before, extra)
    turn = agent.script[calls_before]
    events.insert(
        at + 1,
        {
            "author": author,
            "content": {"role": "model", "parts": [{"text": turn.text}]},
            "invocation": response_event.get("invocation"),
        },
    )
    later_turn = calls_before + 1  # the model events after the pause answer one turn later
    for event in events[at + 2 :]:
        parts = (event.get("content") or {}).get("parts") or []
        if model_turn(event) and parts and "text" in parts[0]:
            later_turn += 1
            parts[0]["text"] = agent.script[later_turn - 1].text
    return golden


JAVA_SUMMARY_PROMPT = (
    "The following is a conversation history between a user and an AI agent. Please summarize the "
    "conversation, focusing on key information and decisions made, as well as any unresolved questions or "
    "tasks. The summary should be concise and capture the essence of the interaction.\n\n"
)
_PY_CALL_LINE = re.compile(r"^(?P<author>[^:]+) called tool: (?P<name>[^(]+)\((?P<args>.*)\)$")
_PY_RESPONSE_LINE = re.compile(r"^Tool response from (?P<name>[^:]+): (?P<response>.*)$")


def _compact_json(python_repr: str) -> str:
    return json.dumps(ast.literal_eval(python_repr), ensure_ascii=False, separators=(",", ":"))


def _summarizer_prompt(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for request in golden["requests"].get("summarizer", []):
        part = request["contents"][0]["parts"][0]
        _, history = part["text"].split("\n\n", 1)
        lines = []
        for line in history.split("\n"):
            call, response = _PY_CALL_LINE.match(line), _PY_RESPONSE_LINE.match(line)
            if call is not None:
                lines.append(f"model: [FUNCTION_CALL: {call['name']}({_compact_json(call['args'])})]")
            elif response is not None:
                lines.append(f"user: [FUNCTION_RESPONSE: {response['name']} -> {_compact_json(response['response'])}]")
            else:
                author, text = line.split(": ", 1)
                lines.append(f"{'user' if author == 'user' else 'model'}: {text}")
        part["text"] = JAVA_SUMMARY_PROMPT + "\n".join(lines) + "\n"
    return golden


def _agent_tool_skip_summarization_text(golden: JsonDict, scenario: Scenario) -> JsonDict:
    for event in golden["events"]:
        parts = (event.get("content") or {}).get("parts") or []
        if (event.get("actions") or {}).get("skip_summarization") and parts and "function_response" in parts[0]:
            event["content"]["parts"] = [p for p in parts if "function_response" in p]
    return golden


def java_examples_text(examples: tuple[tuple[str, tuple[tuple[Any, ...], ...]], ...]) -> str:
    """ADK Java's ``ExampleUtils.convertExamplesToText`` for a scenario's examples."""
    out = [
        "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and model responses using "
        "the available tools.\n\n"
    ]
    for number, (text, output) in enumerate(examples, start=1):
        out.append(f"EXAMPLE {number}:\nBegin example\n[user]\n{text}\n\n")
        for item in output:
            if item[0] == "call":
                args = ", ".join(f"{k}='{v}'" if isinstance(v, str) else f"{k}={v}" for k, v in item[2].items())
                out.append(f"[model]\n```tool_code\n{item[1]}({args})\n```\n")
            elif item[0] == "response":
                out.append(f"```tool_outputs\n{json.dumps(item[2], separators=(',', ':'))}\n```\n")
            else:
                out.append(f"[model]\n{item[1]}\n")
        out.append("End example\n\n")
    out.append("End few-shot\nNow, try to follow these examples and complete the following conversation\n<EXAMPLES>")
    return "".join(out)


def _example_text_format(golden: JsonDict, scenario: Scenario) -> JsonDict:
    examples = next(t.examples for a in llm_agents(scenario.root) for t in a.tools if t.kind == "examples")
    for requests in golden["requests"].values():
        for request in requests:
            text = request["system_instruction"]
            start = text.find("<EXAMPLES>")
            end = text.find("<EXAMPLES>", start + 1)
            if start >= 0 and end > start:
                request["system_instruction"] = text[:start] + java_examples_text(examples) + text[end + 10 :]
    return golden


def _function_response_new_invocation(golden: JsonDict, scenario: Scenario) -> JsonDict:
    events = golden["events"]
    labels = [e.get("invocation") for e in events if e.get("invocation")]
    counter = max(int(label.split("-")[1]) for label in labels)
    seen: set[str] = set()
    old = new = None
    for event in events:
        parts = (event.get("content") or {}).get("parts") or []
        if event.get("author") == "user":
            old = None
            if parts and "function_response" in parts[0] and event.get("invocation") in seen:
                counter += 1
                old, new = event["invocation"], f"inv-{counter}"
        if old is not None and event.get("invocation") == old:
            event["invocation"] = new
        if event.get("invocation"):
            seen.add(event["invocation"])
    renumber = IdMap("inv")
    for event in events:
        if event.get("invocation"):
            event["invocation"] = renumber(event["invocation"])
    return golden


def _agent_tool_include_plugins_default(golden: JsonDict, scenario: Scenario) -> JsonDict:
    """The agent tools' results as their agents answered, with no plugin running inside them."""
    answers = {
        tool.agent.name: tool.agent.script[-1].text
        for agent in llm_agents(scenario.root)
        for tool in agent.tools
        if tool.agent is not None
    }
    for part in _walk_parts(golden):
        response = part.get("function_response")
        if response is not None and response.get("name") in answers and "result" in (response.get("response") or {}):
            response["response"]["result"] = answers[response["name"]]
    return golden


JAVA_TOOL_ERROR = {"status": "error", "message": "An internal error occurred."}


def _tool_error_answers_the_model(golden: JsonDict, scenario: Scenario) -> JsonDict:
    """ADK Python fails the run when a function tool raises; Java answers the model an error map."""
    events = golden["events"]
    at = next(i for i, e in enumerate(events) if e.get("error_code") and not e.get("content"))
    failed = events[at]
    author = failed["author"]
    call_event = next(e for e in reversed(events[:at]) if e.get("author") == author and e["content"]["role"] == "model")
    (call,) = [p["function_call"] for p in call_event["content"]["parts"] if "function_call" in p]
    response_content = {
        "role": "user",
        "parts": [{"function_response": {"id": call["id"], "name": call["name"], "response": dict(JAVA_TOOL_ERROR)}}],
    }
    agent = next(a for a in llm_agents(scenario.root) if a.name == author)
    requests = golden["requests"][author]
    following = agent.script[len(requests)]
    events[at : at + 1] = [
        {"author": author, "content": response_content, "invocation": failed.get("invocation")},
        {
            "author": author,
            "content": {"role": "model", "parts": [{"text": following.text}]},
            "invocation": failed.get("invocation"),
        },
    ]
    extra = copy.deepcopy(requests[-1])
    extra["contents"] += [copy.deepcopy(call_event["content"]), copy.deepcopy(response_content)]
    requests.append(extra)
    golden["outcomes"] = ["completed" if o == "error" else o for o in golden["outcomes"]]
    return golden


DIFFERENCES: dict[str, Difference] = {
    d.name: d
    for d in (
        Difference(
            "none_result_is_empty_dict",
            'a function tool that returns nothing answers {} (ADK Python: {"result": null})',
            "ADK Java tools/FunctionTool.java runAsync: call(args, toolContext).defaultIfEmpty(ImmutableMap.of()), "
            "and call() answers Maybe.empty() for a null result (so a void method, transfer_to_agent "
            "included, answers {}); ADK Python wraps every non-dict result as {'result': value}",
            _none_result_is_empty_dict,
        ),
        Difference(
            "foreign_event_quoting",
            "another agent's turn in a request: Java's 'For context:' / '[a] said: text' / compact JSON "
            "(ADK Python 2.13: a long preamble, the content between <<<BEGIN/END_QUOTED_AGENT_CONTENT>>> "
            "markers, dicts as Python repr)",
            'ADK Java flows/llmflows/Contents.java convertForeignEvent: Part.fromText("For context:"), '
            'String.format("[%s] said: %s"), "[%s] called tool `%s` with parameters: %s" and '
            '"[%s] `%s` tool returned result: %s" with convertMapToJson',
            _foreign_event_quoting,
        ),
        Difference(
            "transfer_instruction_wording",
            "the transfer instruction's line breaks, and the agent names on the **NOTE** line",
            "ADK Java flows/llmflows/AgentTransfer.java buildTargetAgentsInstructions: its text block "
            '("...according to your description, you\\ncan answer it..."), then " " and the sorted names',
            _transfer_instruction_wording,
        ),
        Difference(
            "transfer_tool_declaration",
            "transfer_to_agent's declaration: Java's description, agent_name a plain string "
            "(ADK Python: its own docstring, and an enum of the targets)",
            'ADK Java flows/llmflows/AgentTransfer.java: the @Schema(name = "transfer_to_agent", '
            'description = <text block>) on transferToAgent(@Schema(name = "agent_name") String agentName, ...)',
            _transfer_tool_declaration,
        ),
        Difference(
            "set_model_response_instruction_first",
            "output_schema with tools: the set_model_response instruction comes first in the system "
            "instruction (ADK Python appends it after the agent's instruction and the identity)",
            "ADK Java flows/llmflows/SingleFlow.java REQUEST_PROCESSORS: Basic, OutputSchema, "
            "RequestConfirmation, Instructions, Identity, ... (OutputSchema's appendInstructions runs "
            "before the agent's instruction is added)",
            _set_model_response_instruction_first,
        ),
        Difference(
            "set_model_response_description",
            "the set_model_response tool's description",
            'ADK Java tools/SetModelResponseTool.java description(): "Set your final response using the '
            "required output schema. After using any other tools needed to complete the task, always call "
            'set_model_response with your final answer in the specified schema format."',
            _set_model_response_description,
        ),
        Difference(
            "set_model_response_final_json",
            "the final model event after set_model_response holds compact JSON (ADK Python: json.dumps's ', ')",
            "ADK Java flows/llmflows/OutputSchema.java getStructuredModelResponse: "
            "JsonBaseModel.getMapper().writeValueAsString(response) (Jackson, no spaces)",
            _set_model_response_final_json,
        ),
        Difference(
            "error_stops_without_an_event",
            "a run that fails (max_llm_calls passed) stores no error event; the caller gets the error "
            "(ADK Python 2.13's workflow runner stores an event with error_code = the exception's class name)",
            "ADK Java flows/llmflows/BaseLlmFlow.java runOneStep: context.incrementLlmCallsCount() "
            "throws LlmCallsLimitExceededException, answered with Flowable.error(e); the Runner appends no event",
            _error_stops_without_an_event,
        ),
        Difference(
            "confirmation_event_role",
            "the adk_request_confirmation event's content has the function-response event's role (user)",
            "ADK Java flows/llmflows/Functions.java generateRequestConfirmationEvent: "
            "functionResponseEvent.content().flatMap(Content::role).ifPresent(contentBuilder::role)",
            _confirmation_event_role,
        ),
        Difference(
            "confirmation_request_continues",
            "after a confirmation request the flow calls the model again with the call's error response "
            "(ADK Python sets skip_summarization on that response and ends the agent's turn)",
            "ADK Java flows/llmflows/BaseLlmFlow.java postprocess: the request-confirmation event then the "
            "function-response event, no skipSummarization; the loop goes on while the last event is not "
            "finalResponse(), and the function-response event is not",
            _confirmation_request_continues,
        ),
        Difference(
            "summarizer_prompt",
            "the LlmEventSummarizer's prompt: Java's template, and each part as '<role>: text', "
            "'model: [FUNCTION_CALL: name(json)]', 'user: [FUNCTION_RESPONSE: name -> json]' (ADK Python "
            "2.13: a longer template, '<author> called tool: name(repr)', 'Tool response from name: repr')",
            "ADK Java summarizer/LlmEventSummarizer.java: DEFAULT_PROMPT_TEMPLATE, formatEventsForPrompt, "
            "formatFunctionCallToString and formatFunctionResponseToString",
            _summarizer_prompt,
        ),
        Difference(
            "agent_tool_skip_summarization_text",
            "an AgentTool with skip_summarization: the function-response event holds the function "
            "response only (ADK Python 2.13 appends the result again as a text part)",
            "ADK Java flows/llmflows/Functions.java builds the response event from the function "
            "response part alone; nothing reads skipSummarization there (ADK Python's "
            "flows/llm_flows/tools/_caller.py adds the text for AgentTool and NodeTool)",
            _agent_tool_skip_summarization_text,
        ),
        Difference(
            "example_text_format",
            "the few-shot examples' text: '[user]\\ntext\\n\\n', tool outputs as JSON with no role line, "
            "the closing 'Now, try to follow these examples...' line (ADK Python: one newline, a '[user]' line "
            "and the FunctionResponse's repr, no closing line)",
            "ADK Java examples/ExampleUtils.java: EXAMPLES_END, appendInput, appendFunctionResponse "
            "(objectMapper.writeValueAsString)",
            _example_text_format,
        ),
        Difference(
            "function_response_new_invocation",
            "a message that answers a paused call (a long-running tool, a confirmation) starts a new "
            "invocation (ADK Python 2.13 resumes the paused invocation, its id included)",
            "ADK Java runner/Runner.java runAsync: String invocationId = "
            "InvocationContext.newInvocationContextId() for every call",
            _function_response_new_invocation,
        ),
        Difference(
            "agent_tool_include_plugins_default",
            "AgentTool(agent) runs its agent without the runner's plugins unless include_plugins=True "
            "(ADK Python's default is include_plugins=True)",
            "ADK Java tools/AgentTool.java create(BaseAgent agent): new AgentTool(agent, "
            "/* skipSummarization= */ false, /* includePlugins= */ false)",
            _agent_tool_include_plugins_default,
        ),
        Difference(
            "tool_error_answers_the_model",
            "a function tool that raises answers the model an error map and the run goes on "
            "(ADK Python 2.13 fails the run and stores an error event)",
            "ADK Java tools/FunctionTool.java runAsync: catch (Exception e) -> "
            'ImmutableMap.of("status", "error", "message", "An internal error occurred.")',
            _tool_error_answers_the_model,
        ),
    )
}


def _tool_error_detail(golden: JsonDict, scenario: Scenario) -> JsonDict:
    tools = {t.func.__name__: t.func for a in llm_agents(scenario.root) for t in a.tools if t.func is not None}
    for part in _walk_parts(golden):
        response = part.get("function_response")
        if response is None or response.get("response") != JAVA_TOOL_ERROR:
            continue
        call = next(
            p["function_call"]
            for e in golden["events"]
            for p in (e.get("content") or {}).get("parts") or []
            if (p.get("function_call") or {}).get("id") == response["id"]
        )
        try:
            tools[response["name"]](**call["args"])
        except Exception as error:  # the tool's own exception, as rxllm words it
            response["response"] = {"error": f"tool {response['name']!r} raised {type(error).__name__}: {error}"}
    return golden


RXLLM_DEVIATIONS: dict[str, Difference] = {
    d.name: d
    for d in (
        Difference(
            "tool_error_detail",
            'rxllm answers a raising tool with {"error": "tool \'name\' raised <Type>: <message>"} '
            "(docs/agents.md), so the model sees what failed; ADK Java answers its generic map",
            'ADK Java tools/FunctionTool.java runAsync: {"status": "error", "message": "An internal error occurred."}',
            _tool_error_detail,
        ),
    )
}
"""Where rxllm knowingly does not do what ADK Java does. Each is applied after the scenario's
:data:`DIFFERENCES`, is listed in the porting guide and in the harness's table, and is to be
removed when rxllm changes."""


def expected_for_rxllm(scenario: Scenario, golden: JsonDict) -> JsonDict:
    """The golden file with the scenario's documented differences (then rxllm's known deviations)
    applied: what rxllm must record."""
    expected = copy.deepcopy(golden)
    for name in scenario.differences:
        expected = DIFFERENCES[name].rewrite(expected, scenario)
    for name in scenario.deviations:
        expected = RXLLM_DEVIATIONS[name].rewrite(expected, scenario)
    return expected


def dumps(value: JsonDict) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
