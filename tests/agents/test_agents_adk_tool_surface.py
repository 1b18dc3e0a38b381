"""ADK Java's tool surface beyond function tools: ``EventActions.end_invocation`` and the typed
confirmation and compaction fields, ``exit_loop``, ``BaseTool.process_llm_request``,
``ExampleTool`` and example providers, ``LlmAgent(input_schema=)`` and ``AgentTool(include_plugins=)``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from reactivex import operators as ops

from rxllm import Chunk, ConfigurationError, Content, LlmRequest, Part, RxLlmError, ToolCallFragment, UsageMetadata
from rxllm.agents import (
    AgentTool,
    BaseExampleProvider,
    BasePlugin,
    BaseTool,
    Event,
    EventActions,
    EventCompaction,
    Example,
    ExampleTool,
    InMemoryRunner,
    LlmAgent,
    LoopAgent,
    SequentialAgent,
    ToolConfirmation,
    ToolContext,
    build_example_si,
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
    assert declaration.parameters is not None and declaration.parameters["properties"] == {}
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


# ---- BaseTool.process_llm_request --------------------------------------------------------------


class _Noting(BaseTool):
    """A tool that adds a line to the system instruction (Java-order signature) and never runs."""

    def __init__(self, name: str, line: str, seen: list[str]) -> None:
        super().__init__(name=name)
        self._line = line
        self._seen = seen

    def process_llm_request(self, llm_request: LlmRequest, tool_context: ToolContext) -> LlmRequest:
        instruction = llm_request.config.system_instruction
        self._seen.append(instruction.text() if instruction is not None else "")
        tool_context.state["noted_by"] = self.name
        return llm_request.append_instructions(self._line)

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        raise AssertionError("never called")


class _AsyncKeywordTool(BaseTool):
    """ADK Python's shape: ``async def process_llm_request(self, *, tool_context, llm_request)``."""

    def __init__(self) -> None:
        super().__init__(name="async_editor")

    async def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> LlmRequest:
        return llm_request.model_copy(update={"config": llm_request.config.model_copy(update={"temperature": 0.25})})

    def run(self, args: dict[str, Any], tool_context: ToolContext) -> Any:
        raise AssertionError("never called")


def test_tools_edit_the_request_in_order_before_the_before_model_callbacks() -> None:
    seen: list[str] = []
    callback_saw: list[str] = []

    def before_model(callback_context: Any, request: LlmRequest) -> None:
        instruction = request.config.system_instruction
        callback_saw.append(instruction.text() if instruction is not None else "")

    model = ScriptedLlm([text_turn("Bonjour.")])
    agent = LlmAgent(
        "bot",
        model,
        instruction="Be brief.",
        tools=[_Noting("first", "Answer in French.", seen), _AsyncKeywordTool(), _Noting("second", "Sign.", seen)],
        before_model_callback=before_model,
    )
    runner = new_runner(agent)
    events = send(runner, "hi")
    built = seen[0]  # the instruction as the flow built it (the agent's, then ADK's identity line)
    assert built.startswith("Be brief.")
    assert seen == [built, f"{built}\n\nAnswer in French."]  # each tool sees the one before it
    sent = model.requests[0][0]
    assert sent.config.system_instruction is not None
    assert sent.config.system_instruction.text() == f"{built}\n\nAnswer in French.\n\nSign."
    assert callback_saw == [sent.config.system_instruction.text()]
    assert sent.config.temperature == 0.25  # the async keyword-only hook ran too
    assert sent.config.tools is None  # tools without a declaration are not offered to the model
    assert events[-1].actions.state_delta == {"noted_by": "second"}  # the step's state, stored with its event


def test_a_process_llm_request_with_a_wrong_answer_fails_the_run_naming_the_tool() -> None:
    class Broken(_AsyncKeywordTool):
        def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> Any:
            return "not a request"

    model = ScriptedLlm([text_turn("never asked")])
    runner = new_runner(LlmAgent("bot", model, tools=[Broken()]))
    with pytest.raises(RxLlmError, match="process_llm_request of tool 'async_editor' of agent 'bot' returned str"):
        send(runner, "hi")
    assert model.requests == []


# ---- ExampleTool and example providers (strings from ADK Java's ExampleUtilsTest) ------------

_INTRO = (
    "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and model responses using the "
    "available tools.\n\n"
)
_OUTRO = "End few-shot\nNow, try to follow these examples and complete the following conversation\n<EXAMPLES>"


def _content(role: str | None, *parts: Part) -> Content:
    return Content(role=role, parts=parts)


def _text_example(question: str, answer: str, answer_role: str | None = "model") -> Example:
    answered = (_content(answer_role, Part.from_text(answer)),)
    return Example(input=_content("user", Part.from_text(question)), output=answered)


def test_build_example_si_matches_adk_java_for_text_calls_responses_and_several_examples() -> None:
    assert build_example_si([], "test query") == ""
    single = (
        _INTRO + "EXAMPLE 1:\nBegin example\n[user]\nUser input\n\n[model]\nModel response\nEnd example\n\n" + _OUTRO
    )
    assert build_example_si([_text_example("User input", "Model response")], "test query") == single
    call = Example(
        input=_content("user", Part.from_text("User input")),
        output=(_content("model", Part.from_function_call("test_function", {"arg1": "value1", "arg2": 123})),),
    )
    assert build_example_si([call], "q") == (
        _INTRO + "EXAMPLE 1:\nBegin example\n[user]\nUser input\n\n[model]\n```tool_code\n"
        "test_function(arg1='value1', arg2=123)\n```\nEnd example\n\n" + _OUTRO
    )
    mixed = Example(
        input=_content("user", Part.from_text("User input")),
        output=(
            _content(
                "model",
                Part.from_text("Some text"),
                Part.from_function_call("func1", {"a": "b"}),
                Part.from_function_response("func1", {"c": "d"}),
                Part.from_text("More text"),
            ),
        ),
    )
    assert build_example_si([mixed], "q") == (
        _INTRO + "EXAMPLE 1:\nBegin example\n[user]\nUser input\n\n[model]\nSome text\n[model]\n```tool_code\n"
        "func1(a='b')\n```\n```tool_outputs\n{\"c\":\"d\"}\n```\n[model]\nMore text\nEnd example\n\n" + _OUTRO
    )
    two = build_example_si([_text_example("User input 1", "Model response 1"), _text_example("In 2", "Out 2")], "q")
    assert two == (
        _INTRO + "EXAMPLE 1:\nBegin example\n[user]\nUser input 1\n\n[model]\nModel response 1\nEnd example\n\n"
        "EXAMPLE 2:\nBegin example\n[user]\nIn 2\n\n[model]\nOut 2\nEnd example\n\n" + _OUTRO
    )
    only_output = Example(input=Content(), output=(_content("model", Part.from_text("Model response")),))
    assert build_example_si([only_output], "q") == (
        _INTRO + "EXAMPLE 1:\nBegin example\n[model]\nModel response\nEnd example\n\n" + _OUTRO
    )


def test_build_example_si_shows_values_as_java_does_and_roleless_outputs_as_user() -> None:
    example = Example(
        input=_content(None, Part.from_text("q")),
        output=(_content(None, Part.from_function_call("f", {"on": True, "no": None, "n": [1, 2], "m": {"k": "v"}})),),
    )
    shown = "[user]\n```tool_code\nf(on=true, no=null, n=[1, 2], m={k=v})\n```\n"
    assert shown in build_example_si([example], "q")


class _ByQuery(BaseExampleProvider):
    def __init__(self) -> None:
        self.queries: list[str] = []

    def get_examples(self, query: str) -> list[Example]:
        self.queries.append(query)
        return [_text_example("qin", "qout")]


def test_example_tool_appends_the_examples_to_the_instruction_and_is_not_declared() -> None:
    provider = _ByQuery()
    model = ScriptedLlm([text_turn("I rolled a 3."), text_turn("Hello.")])
    roll = ExampleTool([_text_example("Roll a die.", "I rolled a 4 for you.")])
    agent = LlmAgent("bot", model, instruction="You roll dice.", tools=[roll, ExampleTool(provider, name="more")])
    runner = new_runner(agent)
    send(runner, "Roll a 6-sided die.")
    request = model.requests[0][0]
    assert request.config.system_instruction is not None
    instruction = request.config.system_instruction.text()
    first = build_example_si([_text_example("Roll a die.", "I rolled a 4 for you.")], "")
    second = build_example_si([_text_example("qin", "qout")], "")
    assert instruction.startswith("You roll dice.") and instruction.endswith(f"\n\n{first}\n\n{second}")
    assert instruction.count("Begin few-shot") == 2
    assert request.config.tools is None  # never offered to the model
    assert provider.queries == ["Roll a 6-sided die."]  # asked with the user's message
    assert (roll.name, roll.description) == ("example_tool", "Adds few-shot examples to the request")


def test_example_tool_adds_nothing_without_user_text_or_examples() -> None:
    tool = ExampleTool(lambda query: [_text_example("qin", "qout")])
    request = LlmRequest()
    empty = ToolContext.standalone(user_content=user_message(""))
    assert tool.process_llm_request(tool_context=empty, llm_request=request) is None
    no_examples = ExampleTool(lambda query: [])
    asked = ToolContext.standalone(user_content=user_message("hi"))
    assert no_examples.process_llm_request(tool_context=asked, llm_request=request) is None
    edited = tool.process_llm_request(tool_context=asked, llm_request=request)
    assert edited is not None and edited.config.system_instruction is not None
    text = edited.config.system_instruction.text()
    assert "Begin few-shot" in text and "qout" in text
    with pytest.raises(ConfigurationError, match="examples must be Example instances"):
        ExampleTool(["not an example"])  # type: ignore[list-item]


# ---- LlmAgent(input_schema=) and AgentTool ----------------------------------------------------


class Lookup(BaseModel):
    order_id: str
    verbose: bool = False


class Verdict(BaseModel):
    status: str


def test_an_agent_tool_takes_its_agents_input_schema_and_sends_the_arguments_as_json() -> None:
    inner = ScriptedLlm([text_turn('{"status": "shipped"}')])
    looker = LlmAgent("looker", inner, description="Looks orders up.", input_schema=Lookup, output_schema=Verdict)
    tool = AgentTool(looker)
    declaration = tool.declaration()
    assert declaration.parameters == {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "verbose": {"default": False, "type": "boolean"}},
        "required": ["order_id"],
    }
    outer = ScriptedLlm([call_turn("looker", '{"order_id": "A17", "verbose": true}'), text_turn("It shipped.")])
    runner = new_runner(LlmAgent("root", outer, tools=[tool]))
    events = send(runner, "Where is A17?")
    assert inner.requests[0][0].contents[-1].text() == '{"order_id":"A17","verbose":true}'
    responses = [r.response for e in events for r in e.function_responses()]
    assert responses == [{"status": "shipped"}]
    assert looker.input_schema is Lookup


def test_an_agent_tool_refuses_arguments_that_fail_the_input_schema() -> None:
    inner = ScriptedLlm([text_turn("never asked")])
    tool = AgentTool(LlmAgent("looker", inner, input_schema=Lookup))
    outer = ScriptedLlm([call_turn("looker", '{"verbose": "very"}'), text_turn("Sorry.")])
    events = send(new_runner(LlmAgent("root", outer, tools=[tool])), "?")
    (response,) = [r.response for e in events for r in e.function_responses()]
    assert "invalid arguments for agent tool 'looker'" in str(response["error"])
    assert "order_id" in str(response["error"]) and inner.requests == []


def test_a_workflow_agent_tool_takes_the_first_agents_input_and_the_last_agents_output_schema() -> None:
    first = LlmAgent("first", ScriptedLlm([text_turn("noted")]), input_schema=Lookup)
    last = LlmAgent("last", ScriptedLlm([text_turn('{"status": "lost"}')]), output_schema=Verdict)
    tool = AgentTool(SequentialAgent("pipeline", sub_agents=[first, last]))
    parameters = tool.declaration().parameters
    assert parameters is not None and parameters["required"] == ["order_id"]
    outer = ScriptedLlm([call_turn("pipeline", '{"order_id": "B2"}'), text_turn("Lost.")])
    events = send(new_runner(LlmAgent("root", outer, tools=[tool])), "?")
    assert [r.response for e in events for r in e.function_responses()] == [{"status": "lost"}]


class _Recorder(BasePlugin):
    def __init__(self) -> None:
        super().__init__("recorder")
        self.model_calls: list[str] = []

    def before_model_callback(self, callback_context: Any, llm_request: LlmRequest) -> None:
        self.model_calls.append(callback_context.agent_name)


def _plugins_seen(include_plugins: bool) -> list[str]:
    recorder = _Recorder()
    inner = LlmAgent("helper", ScriptedLlm([text_turn("helped")]))
    outer = ScriptedLlm([call_turn("helper", '{"request": "help"}'), text_turn("Done.")])
    root = LlmAgent("root", outer, tools=[AgentTool(inner, include_plugins=include_plugins)])
    send(new_runner(root, plugins=[recorder]), "go")
    return recorder.model_calls


def test_agent_tool_runs_its_agent_with_the_callers_plugins_only_when_asked() -> None:
    assert _plugins_seen(include_plugins=False) == ["root", "root"]
    assert _plugins_seen(include_plugins=True) == ["root", "helper", "root"]
    assert AgentTool(LlmAgent("a", ScriptedLlm([]))).include_plugins is False


def test_input_schema_must_be_a_pydantic_model_class() -> None:
    with pytest.raises(ConfigurationError, match="input_schema must be a pydantic model class"):
        LlmAgent("a", ScriptedLlm([]), input_schema=dict)  # type: ignore[arg-type]
