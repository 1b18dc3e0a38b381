"""``rxllm demo``: the order-status worked example ("Where is order A17?"), live, against an embedded local provider.

A loopback stub server speaks the chosen provider's real wire format (OpenAI chat completions,
Anthropic Messages or Gemini); an ``LlmAgent`` with a ``get_order`` tool runs in SSE mode through
a ``Runner``. The answer streams token by token, the tool call and its result show as they
happen, then the stored session history and each model call's usage are printed. No network,
no key, deterministic output.
"""

from __future__ import annotations

import json
import threading
from typing import Any, TextIO

from .._core.types import Content, Part
from .._models.base_llm import BaseLlm
from ..agents import Event, InMemoryRunner, LlmAgent, RunConfig, StreamingMode
from ..providers.anthropic import AnthropicModel
from ..providers.gemini import GeminiModel
from ..providers.openai import OpenAiChatModel
from ..testing import Delay, RecordedRequest, StubResponse, StubServer, ToolCallScript, sse_turn
from ._style import Style

__all__ = ["ORDERS", "get_order", "run_demo"]

PROVIDERS = {"openai": "openai-chat", "anthropic": "anthropic", "gemini": "gemini"}
QUESTION = "Where is order A17?"
FIRST_ROUND = "Let me look that order up for you."
ANSWER = "Order A17 shipped with DHL on Monday and arrives Tuesday, well before the weekend."

ORDERS: dict[str, dict[str, str]] = {
    "A17": {"order_id": "A17", "status": "shipped", "carrier": "DHL", "eta": "Tuesday"},
}


def get_order(order_id: str) -> dict[str, str]:
    """Look an order up by its id.

    Args:
        order_id: the order's id, e.g. "A17".
    """
    return ORDERS.get(order_id, {"order_id": order_id, "status": "unknown"})


def _words(text: str) -> list[str]:
    """Split text the way a model streams it: word by word, spaces kept."""
    pieces = text.split(" ")
    return [p if i == 0 else " " + p for i, p in enumerate(pieces)]


def _has_tool_result(body: bytes) -> bool:
    return any(marker in body for marker in (b'"role":"tool"', b"tool_result", b"functionResponse"))


def _responder(protocol: str, pace: float) -> Any:
    def respond(request: RecordedRequest) -> StubResponse:
        if _has_tool_result(request.body):
            events = sse_turn(protocol, text=_words(ANSWER), usage=(96, 21))
        else:
            call = ToolCallScript("call_A17", "get_order", ['{"order_', 'id": "A', '17"}'])
            events = sse_turn(protocol, text=_words(FIRST_ROUND), tool_calls=[call], usage=(61, 24))
        body: list[Any] = []
        for event in events:
            if pace > 0:
                body.append(Delay(pace))
            body.append(event)
        return StubResponse(body=body)

    return respond


def _model(provider: str, url: str) -> BaseLlm:
    if provider == "anthropic":
        return AnthropicModel("claude-sonnet-4-5", base_url=url)
    if provider == "gemini":
        return GeminiModel("gemini-2.5-flash", base_url=url)
    return OpenAiChatModel("gpt-4o-mini", base_url=f"{url}/v1")


def run_demo(*, provider: str = "openai", pace: float = 0.04, out: TextIO, style: Style) -> int:
    """Run the order-A17 demo, writing to ``out``; returns the exit code."""
    protocol = PROVIDERS[provider]
    with StubServer(responder=_responder(protocol, pace)) as server:
        agent = LlmAgent(
            "support",
            _model(provider, server.url),
            instruction="You are a shop's support agent. Use get_order to look orders up.",
            tools=[get_order],
        )
        runner = InMemoryRunner(agent, app_name="shop")
        runner.session_service.create_session("shop", "demo-user", session_id="demo").run()
        out.write(style.dim(f"rxllm demo: an agent with a get_order tool, streaming over the {provider} wire format\n"
                            "from a local stub server on 127.0.0.1 (no network, no API key).\n\n"))
        out.write(f"{style.bold('user')}    › {QUESTION}\n")
        printer = _EventPrinter(out, style)
        done = threading.Event()
        errors: list[Exception] = []

        def on_error(error: Exception) -> None:
            errors.append(error)
            done.set()

        question = Content(role="user", parts=(Part.from_text(QUESTION),))
        run_config = RunConfig(streaming_mode=StreamingMode.SSE)
        runner.run_async("demo-user", "demo", question, run_config).subscribe(printer.on_event, on_error, done.set)
        if not done.wait(60):
            out.write("\nthe demo did not finish within 60 s\n")
            return 1
        if errors:
            out.write(f"\nerror: {errors[0]}\n")
            return 1
        session = runner.session_service.get_session("shop", "demo-user", "demo").run()
        _print_history(session.events, out, style)
        _print_usage(session.events, out, style)
    return 0


class _EventPrinter:
    """Prints a run's events as they arrive: partial text inline, tool calls and results on their own lines."""

    def __init__(self, out: TextIO, style: Style) -> None:
        self._out = out
        self._style = style
        self._streaming = False

    def on_event(self, event: Event) -> None:
        out, style = self._out, self._style
        if event.partial:
            if not self._streaming:
                out.write(f"{style.bold(event.author)} › ")
                self._streaming = True
            out.write(event.text())
            out.flush()
            return
        if self._streaming:
            out.write("\n")
            self._streaming = False
        for call in event.function_calls():
            out.write(style.dim(f"          → {call.name}({json.dumps(call.args)})\n"))
        for response in event.function_responses():
            out.write(style.dim(f"          ← {response.name}: {json.dumps(response.response)}\n"))
        out.flush()


def _print_history(events: tuple[Event, ...], out: TextIO, style: Style) -> None:
    out.write("\n" + style.bold("Session history") + " (what the next turn's request is built from):\n")
    for number, event in enumerate(events, 1):
        pieces = []
        if event.text():
            pieces.append(f"text {event.text()!r}")
        pieces += [f"call {c.name}({json.dumps(c.args)})" for c in event.function_calls()]
        pieces += [f"result {r.name} → {json.dumps(r.response)}" for r in event.function_responses()]
        out.write(f"  {number}. {event.author:<8} {'; '.join(pieces)}\n")


def _print_usage(events: tuple[Event, ...], out: TextIO, style: Style) -> None:
    out.write("\n" + style.bold("Usage per model call") + ":\n")
    calls = [e for e in events if e.usage_metadata is not None]
    for number, event in enumerate(calls, 1):
        usage = event.usage_metadata
        assert usage is not None
        out.write(f"  call {number}: {usage.prompt_token_count} prompt + {usage.candidates_token_count} output "
                  f"= {usage.total_token_count} tokens ({event.finish_reason.value if event.finish_reason else '-'})\n")
    total = sum(e.usage_metadata.total_token_count or 0 for e in calls if e.usage_metadata is not None)
    out.write(f"  total: {total} tokens over {len(calls)} model calls\n")
