"""The order-status agent of ``rxllm demo``, as an app of an agents folder.

The model is a local stub on 127.0.0.1 speaking OpenAI's wire format unless
``RXLLM_EXAMPLE_MODEL`` names a real model (``OPENAI_API_KEY`` then needed).
"""

from __future__ import annotations

import os

from rxllm.agents import LlmAgent, ToolContext
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import RecordedRequest, StubResponse, StubServer, ToolCallScript, sse_turn

from .orders import ORDERS

ANSWER = "Order A17 shipped with DHL on Monday and arrives Tuesday."


def get_order(order_id: str, tool_context: ToolContext) -> dict[str, str]:
    """Look an order up by its id.

    Args:
        order_id: the order's id, e.g. "A17".
    """
    tool_context.state["last_order"] = order_id
    return ORDERS.get(order_id, {"order_id": order_id, "status": "unknown"})


def _stub_turn(request: RecordedRequest) -> StubResponse:
    messages = request.json().get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        words = [w if i == 0 else " " + w for i, w in enumerate(ANSWER.split(" "))]
        return StubResponse.sse(sse_turn("openai-chat", text=words, usage=(96, 21)))
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
