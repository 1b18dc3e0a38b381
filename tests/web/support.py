"""Shared by the web tests: an agents folder whose apps talk to a loopback stub model, and a real
uvicorn server on 127.0.0.1 serving ``rxllm.web.create_app``."""

from __future__ import annotations

import json
import socket
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from rxllm.testing import Hold, RecordedRequest, StubResponse, ToolCallScript, sse_turn

MODEL_URL_ENV = "RXLLM_WEB_TEST_MODEL_URL"

ORDER_APP = textwrap.dedent('''
    import os

    from rxllm.agents import LlmAgent, ToolContext
    from rxllm.providers.openai import OpenAiChatModel


    def get_order(order_id: str, tool_context: ToolContext) -> dict:
        """Look an order up by its id."""
        tool_context.state["last_order"] = order_id
        return {"order_id": order_id, "status": "shipped Tuesday"}


    model = OpenAiChatModel("gpt-4o-mini", base_url=os.environ["RXLLM_WEB_TEST_MODEL_URL"] + "/v1",
                            api_key="sk-web-test")
    root_agent = LlmAgent("support", model, description="answers order questions", tools=[get_order])
''')

BROKEN_APP = "import no_such_module_anywhere  # the app fails to load\n"

RAISING_APP = textwrap.dedent('''
    from rxllm.agents import LlmAgent


    class Boom(Exception):
        pass


    class Exploding(LlmAgent):
        def run_async(self, ctx):  # the agent raises when it runs
            raise Boom("the agent exploded")


    from rxllm.testing import ScriptedLlm

    root_agent = Exploding("exploding", ScriptedLlm([]))
''')


def write_agents_dir(root: Path) -> Path:
    """``root/agents`` with the apps ``order`` (a package), ``broken`` (fails to import) and
    ``raising`` (a module whose agent raises)."""
    agents = root / "agents"
    (agents / "order").mkdir(parents=True)
    (agents / "order" / "__init__.py").write_text("from . import agent\n")
    (agents / "order" / "agent.py").write_text(ORDER_APP)
    (agents / "broken").mkdir()
    (agents / "broken" / "agent.py").write_text(BROKEN_APP)
    (agents / "raising.py").write_text(RAISING_APP)
    (agents / "__pycache__").mkdir()
    (agents / ".hidden").mkdir()
    return agents


class OrderModel:
    """The stub model's responder: a ``get_order`` call first, the answer once the tool result is in.

    With ``hold`` given and ``hold_when`` in the conversation, the answer is ``answer_words`` words
    that stall after the first text events until ``hold`` is set (only the client can then end the
    connection).
    """

    def __init__(self, hold: threading.Event | None = None, answer_words: int = 4, hold_when: str = "") -> None:
        self.hold = hold
        self.answer_words = answer_words
        self.hold_when = hold_when

    def __call__(self, request: RecordedRequest) -> StubResponse:
        body: dict[str, Any] = request.json()
        messages = body.get("messages", [])
        answering = bool(messages) and messages[-1].get("role") == "tool"
        if not body.get("stream"):
            return StubResponse.json(200, _completion(answering))
        if answering:
            held = self.hold is not None and self.hold_when in json.dumps(messages)
            words = ["It shipped", " Tuesday."] if not held else [f" word{i}" for i in range(self.answer_words)]
            events = sse_turn("openai-chat", text=words, usage=(9, 4))
            if self.hold is None or not held:
                return StubResponse.sse(events)
            return StubResponse(body=[*events[:3], Hold(self.hold), *events[3:]])
        call = ToolCallScript("call_1", "get_order", ['{"order_', 'id": "A17"}'])
        return StubResponse.sse(sse_turn("openai-chat", text=["Let me check."], tool_calls=[call], usage=(5, 3)))


def _completion(answering: bool) -> dict[str, Any]:
    """A non-streamed OpenAI chat completion: the tool call, or the answer."""
    message: dict[str, Any] = {"role": "assistant", "content": "It shipped Tuesday." if answering else "Let me check."}
    if not answering:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "get_order", "arguments": '{"order_id": "A17"}'}}]
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop" if answering else "tool_calls"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}


class LiveServer:
    """uvicorn serving an ASGI app on 127.0.0.1 in a thread (the socket listens before it starts,
    so a client may connect at once: the connection waits in the backlog)."""

    def __init__(self, app: Any) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def start(self) -> LiveServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()


@contextmanager
def serving(app: Any) -> Iterator[LiveServer]:
    server = LiveServer(app).start()
    try:
        yield server
    finally:
        server.stop()
