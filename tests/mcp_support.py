"""Helpers shared by the MCP tests: the fixture server's parameters, uvicorn in a thread, latches."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import uvicorn
from reactivex import operators as ops

from rxllm import Chunk, Content, Part, ToolCallFragment
from rxllm._tools import ToolContext, ToolRuntime, execute_tool
from rxllm.agents import McpToolset, Runner, StdioServerParameters
from rxllm.testing import scripted_turn

HERE = Path(__file__).resolve().parent
SERVER = str(HERE / "mcp_fixture_server.py")


def stdio(mode: str = "stdio", **kwargs: Any) -> StdioServerParameters:
    return StdioServerParameters(sys.executable, [SERVER, mode], **kwargs)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def call(toolset_tool: Any, args: dict[str, Any], runtime: ToolRuntime | None = None) -> Any:
    return execute_tool(toolset_tool, args, ToolContext.standalone(), runtime).run()


def tools_of(toolset: McpToolset) -> dict[str, Any]:
    return {tool.name: tool for tool in toolset.get_tools().run()}


class _Started(uvicorn.Server):
    """uvicorn with a latch set once it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.listening.set()


class Uvicorn:
    def __init__(self, app: Any, path: str = "/mcp") -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
        self.server = _Started(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        assert self.server.listening.wait(15), "uvicorn did not start"
        self._sock = sock

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)
        self._sock.close()


class LogLatch(logging.Handler):
    """Set when a record containing ``text`` reaches the rxllm.mcp logger."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.INFO)
        self.text = text
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()

    def __enter__(self) -> LogLatch:
        logger = logging.getLogger("rxllm.mcp")
        logger.addHandler(self)
        self._level = logger.level
        logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *_: object) -> None:
        logger = logging.getLogger("rxllm.mcp")
        logger.removeHandler(self)
        logger.setLevel(self._level)


def scripted_calls(*calls: tuple[str, str, dict[str, Any]]) -> Any:
    """A scripted model turn that calls the tools ``(call id, name, arguments)``."""
    return scripted_turn(*(
        Chunk(tool_call_fragments=(ToolCallFragment(i, cid, name, json.dumps(args)),))
        for i, (cid, name, args) in enumerate(calls)
    ))


def function_responses(runner: Runner, text: str, session_id: str = "s") -> dict[str, Any]:
    """Run one invocation on a new session ``session_id``; the function responses by call id."""
    runner.session_service.create_session(runner.app_name, "u", session_id=session_id).run()
    question = Content(role="user", parts=(Part.from_text(text),))
    runner.run_async("u", session_id, question).pipe(ops.to_list()).run()
    events = runner.session_service.get_session(runner.app_name, "u", session_id).run().events
    return {r.id: r.response for e in events for r in e.function_responses()}
