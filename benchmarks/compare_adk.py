"""Run the ADK comparison scenarios through google-adk and through rxllm, and diff them.

The scenarios (``tests/agents/adk_scenarios.py``) are written once, in a neutral form; this
script builds each with google-adk (a scripted ``BaseLlm`` per ``LlmAgent`` records every
``LlmRequest`` and replays the scenario's turns, so no network is needed), normalises the model
requests and the stored session events, and writes them to ``tests/fixtures/adk_golden/``. The
suite's ``tests/agents/test_adk_golden.py`` runs the rxllm side of every scenario against those
files (with the documented ADK Python / ADK Java differences applied), without google-adk.

Regenerate the golden files (a throwaway venv, not the project's)::

    python3 -m venv /tmp/adk-venv && /tmp/adk-venv/bin/pip install google-adk==2.13.0
    /tmp/adk-venv/bin/python benchmarks/compare_adk.py --write

Print the scenario table (rxllm's side against the golden files, with the project's venv)::

    .venv/bin/python benchmarks/compare_adk.py --table [--diff SCENARIO]

With both installed in one venv, ``--write --table`` does both in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import functools
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agents import adk_scenarios as sc  # noqa: E402

GOLDEN = ROOT / "tests" / "fixtures" / "adk_golden"
APP, USER, SESSION = "cmp", "u1", "s1"


# ---- the ADK side -----------------------------------------------------------------------------------


def _dump(value: Any) -> Any:
    """``model_dump(mode="json")`` of an ADK pydantic object; a pydantic class (response_schema) as its JSON schema."""
    from pydantic import BaseModel

    if isinstance(value, type) and issubclass(value, BaseModel):
        return value.model_json_schema()
    if isinstance(value, BaseModel):
        out = {}
        for name in type(value).model_fields:
            item = getattr(value, name)
            if item is None:
                continue
            out[name] = _dump(item)
        return out
    if isinstance(value, dict):
        return {str(k): _dump(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_dump(v) for v in value)
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return value.value  # an enum
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def run_adk(scenario: sc.Scenario) -> dict[str, Any]:
    """Run one scenario through google-adk; its raw record (requests per agent, stored events, state)."""
    from google.adk.agents import BaseAgent, LlmAgent, LoopAgent, ParallelAgent, RunConfig, SequentialAgent
    from google.adk.events import Event, EventActions
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.adk.tools import FunctionTool, LongRunningFunctionTool, exit_loop
    from google.adk.tools.agent_tool import AgentTool
    from google.genai import types

    lib = type(
        "Lib",
        (),
        {"Content": types.Content, "Part": types.Part, "FunctionCall": types.FunctionCall, "LlmResponse": LlmResponse},
    )

    requests: dict[str, list[Any]] = {}

    class Scripted(BaseLlm):
        agent_name: str
        turns: list[Any]

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            made = requests.setdefault(self.agent_name, [])
            made.append(_dump(llm_request))
            number = len(made) - 1
            reply = self.turns[number] if number < len(self.turns) else sc.Reply(text="(script exhausted)")
            parts = []
            if reply.text is not None:
                parts.append(types.Part(text=reply.text))
            for call in reply.calls:
                parts.append(types.Part(function_call=types.FunctionCall(name=call.name, args=call.args, id=call.id)))
            if stream and reply.text is not None:
                for piece in sc.stream_pieces(reply.text):
                    yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=piece)]), partial=True)
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    class Custom(BaseAgent):
        text: str
        delta: dict[str, Any]

        async def _run_async_impl(self, ctx: Any) -> Any:
            yield Event(
                invocation_id=ctx.invocation_id,
                author=self.name,
                branch=ctx.branch,
                content=types.Content(role="model", parts=[types.Part(text=self.text)]),
                actions=EventActions(state_delta=dict(self.delta)),
            )

    def tool(spec: sc.ToolSpec) -> Any:
        if spec.kind == "function":
            return spec.func
        if spec.kind == "long_running":
            return LongRunningFunctionTool(spec.func)
        if spec.kind == "confirm":
            return FunctionTool(spec.func, require_confirmation=True)
        if spec.kind == "exit_loop":
            return exit_loop
        if spec.kind == "agent":
            assert spec.agent is not None
            return AgentTool(agent=build(spec.agent), skip_summarization=spec.skip_summarization)
        if spec.kind == "examples":
            from google.adk.examples import Example
            from google.adk.tools.example_tool import ExampleTool

            return ExampleTool(
                [
                    Example(
                        input=_example_content(types, "user", ("text", text)),
                        output=[
                            _example_content(types, "model" if item[0] != "response" else "user", item)
                            for item in output
                        ],
                    )
                    for text, output in spec.examples
                ]
            )
        raise ValueError(spec.kind)

    def build(spec: sc.AgentSpec) -> Any:
        subs = [build(s) for s in spec.sub_agents]
        if spec.kind == "sequential":
            return SequentialAgent(name=spec.name, sub_agents=subs, description=spec.description)
        if spec.kind == "parallel":
            return ParallelAgent(name=spec.name, sub_agents=subs, description=spec.description)
        if spec.kind == "loop":
            return LoopAgent(name=spec.name, sub_agents=subs, max_iterations=spec.max_iterations)
        if spec.kind == "custom":
            return Custom(name=spec.name, text=spec.custom_text, delta=dict(spec.custom_delta))
        options: dict[str, Any] = {name: functools.partial(callback, lib) for name, callback in spec.callbacks}
        if spec.global_instruction:
            options["global_instruction"] = spec.global_instruction
        if spec.output_key:
            options["output_key"] = spec.output_key
        if spec.output_schema is not None:
            options["output_schema"] = spec.output_schema
        if spec.input_schema is not None:
            options["input_schema"] = spec.input_schema
        return LlmAgent(
            name=spec.name,
            model=Scripted(model="scripted", agent_name=spec.name, turns=list(spec.script)),
            instruction=spec.instruction,
            description=spec.description,
            tools=[tool(t) for t in spec.tools],
            sub_agents=subs,
            include_contents=spec.include_contents,
            disallow_transfer_to_parent=spec.disallow_transfer_to_parent,
            disallow_transfer_to_peers=spec.disallow_transfer_to_peers,
            **options,
        )

    async def main() -> dict[str, Any]:
        root = build(scenario.root)
        plugins = []
        if scenario.plugins:
            from google.adk.plugins import BasePlugin

            plugins.append(type("Audit", (BasePlugin,), sc.plugin_hooks(lib))(name="audit"))
        if scenario.compaction is None:
            runner = InMemoryRunner(root, app_name=APP, plugins=plugins)
        else:
            from google.adk.apps import App
            from google.adk.apps.app import EventsCompactionConfig
            from google.adk.apps.llm_event_summarizer import LlmEventSummarizer

            interval, overlap = scenario.compaction
            summarizer = LlmEventSummarizer(
                llm=Scripted(model="scripted", agent_name="summarizer", turns=list(scenario.summarizer_script))
            )
            config = EventsCompactionConfig(compaction_interval=interval, overlap_size=overlap, summarizer=summarizer)
            runner = InMemoryRunner(
                app=App(name=APP, root_agent=root, events_compaction_config=config, plugins=plugins)
            )
        service = runner.session_service
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION, state=dict(scenario.initial_state))
        from google.adk.agents.run_config import StreamingMode

        run_config = RunConfig(
            max_llm_calls=scenario.max_llm_calls or 500,
            streaming_mode=StreamingMode.SSE if scenario.streaming else StreamingMode.NONE,
        )
        outcomes = []
        partials = []
        for message in scenario.messages:
            session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            content = _adk_message(types, message, session.events)
            try:
                async for event in runner.run_async(
                    user_id=USER, session_id=SESSION, new_message=content, run_config=run_config
                ):
                    if event.partial:
                        partials.append("".join(p.text or "" for p in event.content.parts or []))
                outcomes.append("completed")
            except Exception:
                outcomes.append("error")
        session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
        return {
            "outcomes": outcomes,
            "partials": partials,
            "requests": requests,
            "events": [_dump(e) for e in session.events],
            "state": _dump(dict(session.state)),
        }

    return asyncio.run(main())


def _example_content(types: Any, role: str, item: tuple[Any, ...]) -> Any:
    if item[0] == "text":
        part = types.Part(text=item[1])
    elif item[0] == "call":
        part = types.Part(function_call=types.FunctionCall(name=item[1], args=item[2]))
    else:
        part = types.Part(function_response=types.FunctionResponse(name=item[1], response=item[2]))
    return types.Content(role=role, parts=[part])


def _latest_call_id(events: Any, name: str) -> str:
    for event in reversed(list(events)):
        for call in event.get_function_calls() if hasattr(event, "get_function_calls") else event.function_calls():
            if call.name == name and call.id:
                return call.id
    raise LookupError(f"no call of {name} in the session")


def _adk_message(types: Any, message: sc.Message, events: Any) -> Any:
    if isinstance(message, str):
        return types.Content(role="user", parts=[types.Part(text=message)])
    if isinstance(message, sc.FunctionReply):
        name, response = message.name, message.response
    else:
        name, response = "adk_request_confirmation", {"confirmed": message.confirmed}
    part = types.Part(
        function_response=types.FunctionResponse(id=_latest_call_id(events, name), name=name, response=response)
    )
    return types.Content(role="user", parts=[part])


# ---- the command -----------------------------------------------------------------------------------


def write_goldens(names: list[str]) -> None:
    from importlib.metadata import version

    GOLDEN.mkdir(parents=True, exist_ok=True)
    for scenario in sc.SCENARIOS:
        if names and scenario.name not in names:
            continue
        golden = sc.normalise(scenario, run_adk(scenario))
        (GOLDEN / f"{scenario.name}.json").write_text(sc.dumps(golden), encoding="utf-8")
        print(f"wrote {scenario.name} (google-adk {version('google-adk')})")


def table(diff: list[str]) -> int:
    from tests.agents.adk_scenarios_rxllm import run_rxllm

    rows = [("scenario", "requests", "events", "state", "outcomes", "partials", "documented differences")]
    failures = 0
    for scenario in sc.SCENARIOS:
        golden = json.loads((GOLDEN / f"{scenario.name}.json").read_text(encoding="utf-8"))
        expected = sc.expected_for_rxllm(scenario, golden)
        actual = sc.normalise(scenario, run_rxllm(scenario))
        marks = [
            "equal" if expected[key] == actual[key] else "DIFFERENT"
            for key in ("requests", "events", "state", "outcomes", "partials")
        ]
        failures += marks.count("DIFFERENT")
        named = [*scenario.differences, *(f"rxllm deviation: {d}" for d in scenario.deviations)]
        rows.append((scenario.name, *marks, ", ".join(named) or "-"))
        if scenario.name in diff or ("all" in diff and "DIFFERENT" in marks):
            for line in difflib.unified_diff(
                sc.dumps(expected).splitlines(),
                sc.dumps(actual).splitlines(),
                "adk (java-adjusted)",
                "rxllm",
                lineterm="",
            ):
                print(line)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="run google-adk and write the golden files")
    parser.add_argument("--table", action="store_true", help="run rxllm and compare with the golden files")
    parser.add_argument("--only", nargs="*", default=[], help="scenario names for --write")
    parser.add_argument("--diff", nargs="*", default=[], help="print the diff of these scenarios (or: all)")
    args = parser.parse_args()
    if not (args.write or args.table):
        parser.error("give --write, --table or both")
    if args.write:
        write_goldens(args.only)
    return table(args.diff) if args.table else 0


if __name__ == "__main__":
    raise SystemExit(main())
