"""A module app: ``root_agent`` rolls dice with a ``roll_die`` tool.

Without ``RXLLM_EXAMPLE_MODEL`` the model is a local stub: a loopback server on 127.0.0.1 speaking
OpenAI's chat-completions wire format (as ``rxllm demo`` does), which first calls ``roll_die`` and
then answers with the result. No network, no key. With ``RXLLM_EXAMPLE_MODEL=gpt-4o-mini`` (and
``OPENAI_API_KEY`` set) the same agent talks to OpenAI.
"""

from __future__ import annotations

import json
import os
import random

from rxllm.agents import LlmAgent, ToolContext
from rxllm.providers.openai import OpenAiChatModel
from rxllm.testing import Delay, RecordedRequest, StubResponse, StubServer, ToolCallScript, complete_json, sse_turn


def roll_die(sides: int, tool_context: ToolContext) -> dict[str, int]:
    """Roll a die.

    Args:
        sides: how many sides the die has, e.g. 6.
    """
    result = random.randint(1, max(1, sides))
    previous = tool_context.state.get("rolls")
    tool_context.state["rolls"] = [*previous, result] if isinstance(previous, list) else [result]
    return {"sides": sides, "result": result}


PACE = 0.03  # seconds between the answer's streamed words, so a browser shows it arrive


def _paced(events: list[bytes]) -> list[bytes | Delay]:
    paced: list[bytes | Delay] = []
    for event in events:
        paced += [Delay(PACE), event]
    return paced


def _stub_turn(request: RecordedRequest) -> StubResponse:
    """The stub model: a ``roll_die`` call for a new question, the answer once the result is in
    (streamed for a streaming request, one JSON body otherwise)."""
    body = request.json()
    messages = body.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        result = json.loads(messages[-1]["content"]).get("result")
        words = ["You", " rolled", f" a {result}."]
        if not body.get("stream"):
            return StubResponse.json(200, complete_json("openai-chat", "".join(words), usage=(40, 6)))
        return StubResponse(body=_paced(sse_turn("openai-chat", text=words, usage=(40, 6))))
    if not body.get("stream"):
        answer = complete_json("openai-chat", "Rolling.", usage=(30, 8))
        answer["choices"][0]["message"]["tool_calls"] = [
            {"id": "call_roll", "type": "function", "function": {"name": "roll_die", "arguments": '{"sides": 6}'}}]
        answer["choices"][0]["finish_reason"] = "tool_calls"
        return StubResponse.json(200, answer)
    call = ToolCallScript("call_roll", "roll_die", ['{"sid', 'es": 6}'])
    return StubResponse.sse(sse_turn("openai-chat", text=["Rolling."], tool_calls=[call], usage=(30, 8)))


def _model() -> OpenAiChatModel:
    name = os.environ.get("RXLLM_EXAMPLE_MODEL")
    if name:
        return OpenAiChatModel(name)
    stub = StubServer(responder=_stub_turn).start()  # lives as long as the process (daemon threads)
    return OpenAiChatModel("gpt-4o-mini", base_url=f"{stub.url}/v1", api_key="sk-local-stub")


root_agent = LlmAgent(
    "dice",
    _model(),
    description="rolls dice",
    instruction="You roll dice with the roll_die tool and say what came up.",
    tools=[roll_die],
)
