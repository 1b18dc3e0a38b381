"""Running one tool call for the service: the shared tools, a standalone tool context, their outcome.

Outcomes are those of the tool layer both runtimes share (``rxllm._tools._calls``): a tool that
raises, whose arguments fail validation, that returns something JSON cannot carry, that runs past
its timeout, or that the model named but the service does not have, does not fail the
interaction. Its :class:`~rxllm.FunctionResponse` is ``{"error": "<message>"}`` so the model can
recover, and the error is logged (logger ``rxllm.service``, level WARNING).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from reactivex import abc as rx_abc
from reactivex.scheduler import ImmediateScheduler

from .._core.types import Content, FunctionCall, FunctionResponse
from .._telemetry.otel import within
from .._tools import (
    BaseTool,
    State,
    ToolCallOutcome,
    ToolContext,
    ToolRuntime,
    call_tool,
    default_tool_scheduler,
    new_invocation_id,
)

__all__ = ["ToolEnvironment", "default_tool_scheduler", "execute_tool"]

_log = logging.getLogger("rxllm.service")
_INLINE = ImmediateScheduler.singleton()  # (the one there is: its class keeps it)


class ToolEnvironment:
    """What the tools of one interaction share: an invocation id, the user message, a state, a runtime.

    The state lives for the interaction only (a service keeps no sessions): a key a tool sets is
    seen by the tools that run after it in the same interaction, and then forgotten. The runtime
    runs tools inline (the interaction already calls them on its tool scheduler), ``async def``
    tools on the loop the interaction was subscribed from (else rxllm's tool loop), with the
    service's default timeout.
    """

    AGENT_NAME = "ai_service"
    """What a service's tools see as :attr:`~rxllm.agents.ToolContext.agent_name`."""

    def __init__(
        self, tools_by_name: Mapping[str, BaseTool], user_content: Content, *, timeout: float | None = None
    ) -> None:
        self.tools_by_name = tools_by_name
        self.user_content = user_content
        self.state = State()
        self.invocation_id = new_invocation_id()
        self.runtime = ToolRuntime.capture(scheduler=_INLINE, timeout=timeout)

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
    fail: Callable[[Exception], None] | None = None,
) -> rx_abc.DisposableBase:
    """Run ``call``'s tool and call ``done(result, failed)`` once, on the thread the result arrives on.

    A synchronous tool runs on the calling thread (a tool-scheduler worker); an ``async def`` tool
    on the environment's loop. Disposing the returned disposable drops the result and cancels an
    ``async def`` tool. The outcomes are the tool layer's (see ``rxllm._tools._calls``).
    Its ``execute_tool`` span is a child of ``telemetry_context``'s span (the service turn's).
    ``fail`` is called instead of ``done`` when the call ends the turn (a tool that raised
    ``KeyboardInterrupt``).
    """

    def report(outcome: ToolCallOutcome) -> None:
        outcome.log_failure(_log)
        done(outcome.response, outcome.failed)

    # call_tool fails only for a KeyboardInterrupt in the tool: that ends the turn through ``fail``.
    outcome = call_tool(environment.tools_by_name, call, environment.context_for(call), runtime=environment.runtime)
    if telemetry_context is not None:
        outcome = within(telemetry_context, outcome)
    return outcome.subscribe(report, fail)
