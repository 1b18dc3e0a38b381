"""The tools' turn at the request: each tool's ``process_llm_request`` before the model call
(ADK Java's ``BaseLlmFlow.getRequestProcessorFromTools``).

Java runs it after the other request processors (instructions, contents, transfer) and before the
before-model callbacks; so does the flow here. Only tools that override
``BaseTool.process_llm_request`` are called, in the order of the step's tools.
"""

from __future__ import annotations

import asyncio
from functools import partial

import reactivex

from ..._core.errors import ConfigurationError
from ..._core.types import LlmRequest
from ..._rx.direct import collect_then, emit_now
from ..._tools import BaseTool, ToolContext
from .._invocation.callbacks import Call, callback_chain

__all__ = ["process_request_by_tools"]


def _edits_requests(tool: BaseTool) -> bool:
    return type(tool).process_llm_request is not BaseTool.process_llm_request


def process_request_by_tools(
    tools: tuple[BaseTool, ...],
    request: LlmRequest,
    tool_context: ToolContext,
    owner: str,
    loop: asyncio.AbstractEventLoop | None = None,
) -> reactivex.Observable[LlmRequest]:
    """Emit ``request`` as the tools that edit requests leave it (at once when none does), then complete.

    Args:
        tools: the step's tools, in order.
        request: the request built for the step.
        tool_context: the context every tool gets (the step's state, no function call).
        owner: whose tools, for error messages (``"agent 'support'"``).
        loop: where ``async def`` hooks run (the run's ``ToolRuntime.loop``), as callbacks do.

    A tool that raises, or answers something that is not an ``LlmRequest``, fails the step with an
    :class:`~rxllm.RxLlmError` naming the tool.
    """
    editors = [tool for tool in tools if _edits_requests(tool)]
    if not editors:
        return emit_now(request)
    current = [request]
    calling = [""]  # the name of the tool whose answer comes next (the tools are called one by one)

    def process(tool: BaseTool) -> object:
        calling[0] = tool.name
        return tool.process_llm_request(tool_context=tool_context, llm_request=current[0])

    def accept(answer: object) -> LlmRequest | None:
        if not isinstance(answer, LlmRequest):
            raise ConfigurationError(
                f"process_llm_request of tool {calling[0]!r} of {owner} returned {type(answer).__name__}; "
                "expected None or an LlmRequest"
            )
        current[0] = answer  # not an answer that stops the chain: the next tool sees it
        return None

    calls: list[tuple[object, Call]] = [(tool.process_llm_request, partial(process, tool)) for tool in editors]
    chain: reactivex.Observable[LlmRequest] = callback_chain("process_llm_request", owner, calls, accept, loop=loop)
    return collect_then(chain, lambda _: emit_now(current[0]))
