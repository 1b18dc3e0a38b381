"""OpenTelemetry is optional: without it nothing is imported and everything works; with it and a
global provider, spans appear with no call to rxllm at all; ``RXLLM_TELEMETRY=off`` turns them off.

Each case runs in a fresh interpreter: the global tracer provider can be set only once per process,
and blocking an import must not leak into the other tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCENARIO = """
import sys, threading
from reactivex import operators as ops
import rxllm
from rxllm import Content, LlmRequest, Part
from rxllm.agents import InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from rxllm.providers.openai import OpenAiChatModel
from rxllm.service import AiService
from rxllm.testing import StubResponse, StubServer, sse_turn, ToolCallScript

def get_order(order_id: str) -> dict:
    '''Look an order up.'''
    return {"order_id": order_id, "status": "shipped"}

request = LlmRequest(contents=(Content(role="user", parts=(Part.from_text("Where is A17?"),)),))
with StubServer() as server:
    server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["It ", "shipped."], usage=(5, 3))))
    server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["ok"], usage=(5, 3))))
    call = ToolCallScript("call_1", "get_order", ['{"order_id": "A17"}'])
    server.enqueue(StubResponse(body=sse_turn("openai-chat", tool_calls=[call], usage=(5, 3))))
    server.enqueue(StubResponse(body=sse_turn("openai-chat", text=["Shipped."], usage=(7, 2))))
    model = OpenAiChatModel("gpt-x", base_url=server.url + "/v1", api_key="sk-test")
    final = model.generate_content(request, stream=True).pipe(ops.last()).run()
    assert final.text() == "It shipped.", final
    runner = InMemoryRunner(LlmAgent("support", model, tools=[get_order]))
    runner.session_service.create_session(runner.app_name, "u", session_id="s").run()
    hi = Content(role="user", parts=(Part.from_text("hi"),))
    run = runner.run_async("u", "s", hi, RunConfig(streaming_mode=StreamingMode.SSE))
    events = run.pipe(ops.to_list()).run()
    assert events[-1].text() == "ok", events
    service = AiService(model, tools=[get_order])
    answer = service.stream("Where is A17?").pipe(ops.last()).run()
    assert answer.response.text() == "Shipped.", answer
"""


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    environment.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environment, timeout=120
    )


def test_without_opentelemetry_nothing_is_imported_and_everything_works() -> None:
    code = "import sys\nsys.modules['opentelemetry'] = None  # as if not installed: any import fails\n" + SCENARIO + """
loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry") and sys.modules[name] is not None)
assert loaded == [], loaded
print("ok")
"""
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_with_a_global_provider_spans_appear_with_no_call_to_rxllm() -> None:
    code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
""" + SCENARIO + """
print(sorted({span.name for span in exporter.get_finished_spans()}))
"""
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "['chat gpt-x', 'execute_tool get_order', 'invoke_agent AiService', 'invoke_agent support']"
    )


def test_the_environment_switch_turns_every_span_off() -> None:
    code = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
""" + SCENARIO + """
print(len(exporter.get_finished_spans()))
"""
    done = run(code, RXLLM_TELEMETRY="off")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def test_with_no_provider_set_nothing_is_built_and_one_set_later_is_picked_up() -> None:
    code = """
from rxllm._telemetry import otel as _telemetry
from rxllm._core.types import LlmRequest
made = []
real = _telemetry.ModelCallTelemetry
class Counting(real):
    def __init__(self, *args, **kwargs):
        made.append(1)
        super().__init__(*args, **kwargs)
_telemetry.ModelCallTelemetry = Counting
""" + SCENARIO + """
assert made == [], "telemetry objects were built with no provider to record into"
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
""" + SCENARIO + """
assert made, "a provider set later was not picked up"
print(sorted({span.name for span in exporter.get_finished_spans()}))
"""
    done = run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "['chat gpt-x', 'execute_tool get_order', 'invoke_agent AiService', 'invoke_agent support']"
    )
