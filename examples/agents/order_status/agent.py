"""The order-status agent of ``rxllm demo``, as an app of an agents folder.

The model is a local stub on 127.0.0.1 speaking OpenAI's wire format unless
``RXLLM_EXAMPLE_MODEL`` names a real model (``OPENAI_API_KEY`` then needed).
"""

from __future__ import annotations

import os

from rxllm.agents import LlmAgent, ToolContext
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Delay, RecordedRequest, StubResponse, StubServer, ToolCallScript, complete_json, sse_turn

from .orders import ORDERS

ANSWER = "Order A17 shipped with DHL on Monday and arrives Tuesday."


def get_order(order_id: str, tool_context: ToolContext) -> dict[str, str]:
    """Look an order up by its id.

    Args:
        order_id: the order's id, e.g. "A17".
    """
    tool_context.state["last_order"] = order_id
    return ORDERS.get(order_id, {"order_id": order_id, "status": "unknown"})


PACE = 0.03  # seconds between the answer's streamed words, so a browser shows it arrive


def _paced(events: list[bytes]) -> list[bytes | Delay]:
    paced: list[bytes | Delay] = []
    for event in events:
        paced += [Delay(PACE), event]
    return paced


def _stub_turn(request: RecordedRequest) -> StubResponse:
    """The stub model: a ``get_order`` call for a new question, the answer once the result is in
    (streamed for a streaming request, one JSON body otherwise)."""
    body = request.json()
    messages = body.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        if not body.get("stream"):
            return StubResponse.json(200, complete_json("openai-chat", ANSWER, usage=(96, 21)))
        words = [w if i == 0 else " " + w for i, w in enumerate(ANSWER.split(" "))]
        return StubResponse(body=_paced(sse_turn("openai-chat", text=words, usage=(96, 21))))
    if not body.get("stream"):
        answer = complete_json("openai-chat", "Let me look that up.", usage=(61, 24))
        answer["choices"][0]["message"]["tool_calls"] = [
            {"id": "call_A17", "type": "function",
             "function": {"name": "get_order", "arguments": '{"order_id": "A17"}'}}]
        answer["choices"][0]["finish_reason"] = "tool_calls"
        return StubResponse.json(200, answer)
    call = ToolCallScript("call_A17", "get_order", ['{"order_', 'id": "A', '17"}'])
    return StubResponse.sse(sse_turn("openai-chat", text=["Let me look that up."], tool_calls=[call], usage=(61, 24)))


def _model() -> OpenAiChatModel:
    name = os.environ.get("RXLLM_EXAMPLE_MODEL")
    if name:
        return OpenAiChatModel(name)
    stub = StubServer(responder=_stub_turn).start()
    return OpenAiChatModel("gpt-4o-mini", base_url=f"{stub.url}/v1", api_key="sk-local-stub")


root_agent = LlmAgent(
    "support",
    _model(),
    description="answers questions about orders",
    instruction="You are a shop's support agent. Use get_order to look orders up.",
    tools=[get_order],
)
