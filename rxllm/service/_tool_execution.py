"""Running one tool call for the service: the agent runtime's tools, their context, their outcome.

Outcomes are the agent runtime's: a tool that raises, whose arguments fail validation, that
returns something that is not JSON, or that the model named but the service does not have, does
not fail the interaction. Its :class:`~rxllm.FunctionResponse` is ``{"error": "<message>"}`` so
the model can recover, and the error is logged (logger ``rxllm.service``, level WARNING).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import reactivex
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python
from reactivex.scheduler import ThreadPoolScheduler

from .._errors import ToolError
from .._types import FunctionCall, FunctionResponse
from ..agents import BaseAgent, BaseTool, Event, InMemorySessionService, InvocationContext, Session, State, ToolContext

__all__ = ["ToolEnvironment", "default_tool_scheduler", "execute_tool"]

_log = logging.getLogger("rxllm.service")

DEFAULT_TOOL_WORKERS = 8
"""Workers of the process-wide default tool scheduler."""

_default_scheduler: ThreadPoolScheduler | None = None
_default_lock = threading.Lock()


class _NamedThreadPoolScheduler(ThreadPoolScheduler):
    """A ``ThreadPoolScheduler`` whose threads are named (``rxllm-tool_0``...), for thread dumps and logs."""

    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        super().__init__(max_workers)
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)


def default_tool_scheduler() -> ThreadPoolScheduler:
    """The process-wide scheduler tools and retrievers run on when a service is given none.

    A small dedicated pool (:data:`DEFAULT_TOOL_WORKERS` threads named ``rxllm-tool_N``), created
    on first use; never the models' I/O pool, so a slow tool cannot starve the streams.
    """
    global _default_scheduler
    with _default_lock:
        if _default_scheduler is None:
            _default_scheduler = _NamedThreadPoolScheduler(DEFAULT_TOOL_WORKERS, "rxllm-tool")
        return _default_scheduler


class _ServiceAgent(BaseAgent):
    """The agent a service's tools see in their :class:`~rxllm.agents.ToolContext` (never run)."""

    def run_async(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        return reactivex.empty()


class ToolEnvironment:
    """What the tools of one interaction share: an invocation context and a session state.

    The state lives for the interaction only (a service keeps no sessions): a key a tool sets is
    seen by the tools that run after it in the same interaction, and then forgotten.
    """

    APP_NAME = "ai_service"

    def __init__(self, tools_by_name: Mapping[str, BaseTool]) -> None:
        self.tools_by_name = tools_by_name
        self.state = State()
        session = Session(id=str(uuid.uuid4()), app_name=self.APP_NAME, user_id="user")
        self.invocation = InvocationContext(
            agent=_ServiceAgent(self.APP_NAME), session=session, session_service=InMemorySessionService()
        )

    def context_for(self, call: FunctionCall) -> ToolContext:
        """A tool context for ``call``."""
        return ToolContext(self.invocation, self.state, call.id)


def execute_tool(
    environment: ToolEnvironment, call: FunctionCall, done: Callable[[FunctionResponse, bool], None]
) -> None:
    """Run ``call``'s tool and call ``done(result, failed)`` exactly once, on the thread the result arrives on.

    A synchronous tool runs on the calling thread; a tool returning an asynchronous Observable
    reports on its thread. Never raises.
    """
    reported = threading.Event()

    def report(result: FunctionResponse, failed: bool) -> None:
        if not reported.is_set():
            reported.set()
            done(result, failed)

    def fail(message: str, error: BaseException | None) -> None:
        _log.warning("tool call %r (id %s) answered with an error: %s", call.name, call.id, message, exc_info=error)
        report(FunctionResponse(id=call.id, name=call.name, response={"error": message}), True)

    tool = environment.tools_by_name.get(call.name)
    if tool is None:
        known = ", ".join(sorted(environment.tools_by_name)) or "none"
        fail(f"tool {call.name!r} is not available (available tools: {known})", None)
        return
    results: list[Any] = []

    def on_error(error: Exception) -> None:
        if isinstance(error, ToolError):
            fail(str(error), error)
        else:
            fail(f"tool {tool.name!r} failed with {type(error).__name__}: {error}", error)

    def on_completed() -> None:
        if not results:
            fail(f"tool {tool.name!r} completed without a result", None)
            return
        result = results[-1]
        if not isinstance(result, dict):
            result = {"result": result}
        try:
            response = FunctionResponse(id=call.id, name=call.name, response=to_jsonable_python(result))
        except (PydanticSerializationError, ValidationError, ValueError, TypeError) as exc:
            fail(f"tool {tool.name!r} returned a value that is not JSON: {exc}", exc)
            return
        report(response, False)

    try:
        source = tool.run(dict(call.args), environment.context_for(call))
        source.subscribe(results.append, on_error, on_completed)
    except Exception as exc:  # a tool that raises instead of failing its Observable
        on_error(exc)
