"""LlmAgent's options: transfer between agents, output_key / output_schema, include_contents,
global_instruction, a model given by name (LlmRegistry)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from reactivex import operators as ops

from rxllm import BaseLlm, Chunk, ConfigurationError, LlmRequest, LlmResponse, ToolCallFragment
from rxllm.agents import Event, InMemoryRunner, LlmAgent, LlmRegistry, RunConfig, SequentialAgent, StreamingMode
from rxllm.testing import ScriptedLlm, scripted_turn

from .support import user_message

MODES = [StreamingMode.NONE, StreamingMode.SSE]


def text_turn(*pieces: str) -> list[LlmResponse]:
    return scripted_turn(*(Chunk(text_delta=p) for p in pieces))


def call_turn(name: str, arguments: str, call_id: str = "call_1") -> list[LlmResponse]:
    return scripted_turn(Chunk(tool_call_fragments=(ToolCallFragment(0, call_id, name, arguments),)))


def run(runner: InMemoryRunner, text: str, mode: StreamingMode = StreamingMode.NONE) -> list[Event]:
    if not runner.session_service.get_session(runner.app_name, "u1", "s1").pipe(ops.to_list()).run():
        runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    events: list[Event] = (
        runner.run_async("u1", "s1", user_message(text), RunConfig(streaming_mode=mode)).pipe(ops.to_list()).run()
    )
    return [e for e in events if not e.partial]


def declared_tools(request: LlmRequest) -> list[str]:
    return [d.name for tool in request.config.tools or () for d in tool.function_declarations]


def system_text(request: LlmRequest) -> str:
    instruction = request.config.system_instruction
    return instruction.text() if instruction is not None else ""


# ---- transfer ---------------------------------------------------------------------------------


def router_tree(
    router_turns: list[list[LlmResponse]], billing_turns: list[list[LlmResponse]], **billing_options: Any
) -> tuple[LlmAgent, ScriptedLlm, ScriptedLlm, ScriptedLlm]:
    router_model = ScriptedLlm(router_turns)
    billing_model = ScriptedLlm(billing_turns)
    shipping_model = ScriptedLlm([text_turn("Shipping here.")])
    billing = LlmAgent("billing", billing_model, description="Invoices and refunds.", **billing_options)
    shipping = LlmAgent("shipping", shipping_model, description="Where parcels are.")
    router = LlmAgent("router", router_model, instruction="Route.", sub_agents=[billing, shipping])
    return router, router_model, billing_model, shipping_model


@pytest.mark.parametrize("mode", MODES)
def test_transfer_hands_the_next_model_call_and_the_next_turn_to_the_target(mode: StreamingMode) -> None:
    router, router_model, billing_model, _ = router_tree(
        [call_turn("transfer_to_agent", '{"agent_name": "billing"}')],
        [text_turn("Your refund ", "is on its way."), text_turn("Anything else?")],
    )
    runner = InMemoryRunner(router)
    events = run(runner, "Where is my refund?", mode)
    assert [(e.author, e.text(), e.actions.transfer_to_agent) for e in events] == [
        ("router", "", None),
        ("router", "", "billing"),
        ("billing", "Your refund is on its way.", None),
    ]
    request, _ = router_model.requests[0]
    assert "transfer_to_agent" in declared_tools(request)
    assert "Agent name: billing" in system_text(request) and "Agent description: Invoices and refunds." in system_text(
        request
    )
    billing_request, _ = billing_model.requests[0]
    assert "transfer_to_agent" in declared_tools(billing_request)  # to the parent or the peer
    assert len(router_model.requests) == 1

    # the next user turn goes to the agent that answered last
    second = run(runner, "Thanks!", mode)
    assert [(e.author, e.text()) for e in second] == [("billing", "Anything else?")]
    assert len(router_model.requests) == 1 and len(billing_model.requests) == 2


def test_no_transfer_tool_without_targets_and_disallow_flags() -> None:
    lonely_model = ScriptedLlm([text_turn("Hi.")])
    runner = InMemoryRunner(LlmAgent("lonely", lonely_model))
    run(runner, "hello")
    assert declared_tools(lonely_model.requests[0][0]) == []

    router, _, billing_model, _ = router_tree(
        [call_turn("transfer_to_agent", '{"agent_name": "billing"}')],
        [text_turn("Done.")],
        disallow_transfer_to_parent=True,
        disallow_transfer_to_peers=True,
    )
    run(InMemoryRunner(router), "refund?")
    assert declared_tools(billing_model.requests[0][0]) == []


def test_a_non_transferable_agent_does_not_keep_the_next_turn() -> None:
    router, _router_model, _, _ = router_tree(
        [call_turn("transfer_to_agent", '{"agent_name": "billing"}'), text_turn("Router again.")],
        [text_turn("Done.")],
        disallow_transfer_to_parent=True,
    )
    runner = InMemoryRunner(router)
    run(runner, "refund?")
    assert [(e.author, e.text()) for e in run(runner, "more")] == [("router", "Router again.")]


def test_transfer_to_an_unknown_agent_fails_the_run() -> None:
    router, _, _, _ = router_tree([call_turn("transfer_to_agent", '{"agent_name": "nobody"}')], [])
    runner = InMemoryRunner(router)
    with pytest.raises(ConfigurationError, match="transferred to 'nobody'"):
        run(runner, "?")


# ---- output_key, output_schema ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_output_key_writes_the_final_text_to_state(mode: StreamingMode) -> None:
    writer = LlmAgent("writer", ScriptedLlm([text_turn("Roses ", "are red.")]), output_key="draft")
    reviewer_model = ScriptedLlm([text_turn("Fine.")])
    reviewer = LlmAgent("reviewer", reviewer_model, instruction="Review this: {draft}")
    runner = InMemoryRunner(SequentialAgent("pipeline", sub_agents=[writer, reviewer]))
    events = run(runner, "poem", mode)
    assert events[0].actions.state_delta == {"draft": "Roses are red."}
    assert system_text(reviewer_model.requests[0][0]) == (
        'Review this: Roses are red.\n\nYou are an agent. Your internal name is "reviewer".'
    )
    assert runner.session_service.get_session(runner.app_name, "u1", "s1").run().state["draft"] == "Roses are red."


class Verdict(BaseModel):
    ok: bool
    reason: str


def test_output_schema_asks_for_json_and_stores_the_validated_object() -> None:
    model = ScriptedLlm([text_turn('{"ok": true, ', '"reason": "short"}')])
    agent = LlmAgent("judge", model, output_schema=Verdict, output_key="verdict")
    events = run(InMemoryRunner(agent), "judge it", StreamingMode.SSE)
    assert events[-1].actions.state_delta == {"verdict": {"ok": True, "reason": "short"}}
    config = model.requests[0][0].config
    assert config.response_mime_type == "application/json"
    assert config.response_schema is Verdict


def test_output_schema_reply_that_does_not_validate_is_logged_and_kept_raw(caplog: pytest.LogCaptureFixture) -> None:
    agent = LlmAgent("judge", ScriptedLlm([text_turn("not json")]), output_schema=Verdict, output_key="verdict")
    events = run(InMemoryRunner(agent), "judge it")
    assert events[-1].actions.state_delta == {"verdict": "not json"}
    assert "does not validate against output_schema Verdict" in caplog.text


def test_output_schema_must_be_a_pydantic_model_class() -> None:
    with pytest.raises(ConfigurationError, match="output_schema must be a pydantic model class"):
        LlmAgent("judge", ScriptedLlm([]), output_schema=dict)  # type: ignore[arg-type]


# ---- include_contents, global_instruction -------------------------------------------------------


def test_include_contents_none_sends_only_the_current_turn() -> None:
    model = ScriptedLlm([text_turn("one"), text_turn("two")])
    runner = InMemoryRunner(LlmAgent("bot", model, include_contents="none"))
    run(runner, "first")
    run(runner, "second")
    assert [c.text() for c in model.requests[1][0].contents] == ["second"]


def test_global_instruction_of_the_root_comes_first_for_every_agent() -> None:
    child_model = ScriptedLlm([text_turn("ok")])
    child = LlmAgent("child", child_model, instruction="Be a child of {mood?}.")
    root = LlmAgent(
        "root",
        ScriptedLlm([call_turn("transfer_to_agent", '{"agent_name": "child"}')]),
        global_instruction="Always be kind.",
        instruction="Route.",
        sub_agents=[child],
    )
    run(InMemoryRunner(root), "hi")
    assert system_text(child_model.requests[0][0]).startswith("Always be kind.\n\nBe a child of .")


# ---- LlmRegistry -----------------------------------------------------------------------------


@pytest.fixture
def registry() -> Iterator[None]:
    saved = (dict(LlmRegistry._factories), dict(LlmRegistry._instances))
    yield
    LlmRegistry._factories.clear()
    LlmRegistry._factories.update(saved[0])
    LlmRegistry._instances.clear()
    LlmRegistry._instances.update(saved[1])


def test_a_model_by_name_resolves_through_the_registry(registry: None) -> None:
    built: list[str] = []

    def factory(name: str) -> BaseLlm:
        built.append(name)
        return ScriptedLlm([text_turn("Hello from the registry.")], model=name)

    LlmRegistry.register_llm(r"gemini-.*", factory)
    agent = LlmAgent("root", "gemini-2.0-flash")
    assert [e.text() for e in run(InMemoryRunner(agent), "hi")] == ["Hello from the registry."]
    assert built == ["gemini-2.0-flash"]


@pytest.mark.parametrize(
    ("name", "module"),
    [("gpt-4o", "openai"), ("o3-mini", "openai"), ("claude-3-5-sonnet", "anthropic"), ("gemini-2.0-flash", "gemini")],
)
def test_built_in_patterns(registry: None, monkeypatch: pytest.MonkeyPatch, name: str, module: str) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key-not-real")
    model = LlmRegistry.get_llm(name)
    assert model.model == name and type(model).__module__ == f"rxllm.providers.{module}"
    assert module in type(model).__name__.lower() or (module == "openai" and "OpenAi" in type(model).__name__)


def test_patterns_match_the_whole_name_and_unknown_names_list_them(registry: None) -> None:
    with pytest.raises(ConfigurationError) as info:
        LlmRegistry.get_llm("my-gpt-4")  # "gpt-.*" must match the whole name
    assert "gpt-.*" in str(info.value) and "claude-.*" in str(info.value) and "register_llm" in str(info.value)
    with pytest.raises(ConfigurationError, match="has no model"):
        _ = LlmAgent("orphan").model


def test_a_sub_agent_without_a_model_uses_its_ancestors() -> None:
    model = ScriptedLlm([text_turn("inherited")])
    child = LlmAgent("child")
    LlmAgent("root", model, sub_agents=[child])
    assert child.model is model
