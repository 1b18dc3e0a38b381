"""Running one tool call for the service: the shared tools, a standalone tool context, their outcome.

Outcomes are those of the tool layer both runtimes share (``rxllm._tools._calls``): a tool that raises, whose
arguments fail validation, that returns something that is not JSON, or that the model named but
the service does not have, does not fail the interaction. Its :class:`~rxllm.FunctionResponse` is
``{"error": "<message>"}`` so the model can recover, and the error is logged (logger
``rxllm.service``, level WARNING).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reactivex.scheduler import ThreadPoolScheduler

from .._telemetry import within
from .._tools import BaseTool, State, ToolCallOutcome, ToolContext, call_tool, new_invocation_id
from .._types import Content, FunctionCall, FunctionResponse

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


class ToolEnvironment:
    """What the tools of one interaction share: an invocation id, the user message and a state.

    The state lives for the interaction only (a service keeps no sessions): a key a tool sets is
    seen by the tools that run after it in the same interaction, and then forgotten.
    """

    AGENT_NAME = "ai_service"
    """What a service's tools see as :attr:`~rxllm.agents.ToolContext.agent_name`."""

    def __init__(self, tools_by_name: Mapping[str, BaseTool], user_content: Content) -> None:
        self.tools_by_name = tools_by_name
        self.user_content = user_content
        self.state = State()
        self.invocation_id = new_invocation_id()

    def context_for(self, call: FunctionCall) -> ToolContext:
        """A tool context for ``call``."""
        return ToolContext.standalone(
            state=self.state,
            function_call_id=call.id,
            invocation_id=self.invocation_id,
            agent_name=self.AGENT_NAME,
            user_content=self.user_content,
        )


def execute_tool(
    environment: ToolEnvironment,
    call: FunctionCall,
    done: Callable[[FunctionResponse, bool], None],
    *,
    telemetry_context: Any = None,
) -> None:
    """Run ``call``'s tool and call ``done(result, failed)`` once, on the thread the result arrives on.

    A synchronous tool runs on the calling thread; a tool returning an asynchronous Observable
    reports on its thread. The outcomes are the tool layer's (see ``rxllm._tools._calls``).
    Its ``execute_tool`` span is a child of ``telemetry_context``'s span (the service turn's).
    """

    def report(outcome: ToolCallOutcome) -> None:
        outcome.log_failure(_log)
        done(outcome.response, outcome.failed)

    # call_tool never fails: on_error is reached only when ``done`` raised, and re-raises to the caller.
    outcome = call_tool(environment.tools_by_name, call, environment.context_for(call))
    within(telemetry_context, outcome).subscribe(report)
