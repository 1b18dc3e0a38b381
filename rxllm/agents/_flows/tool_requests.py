"""The tools' turn at the request: each tool's ``process_llm_request`` before the model call
(ADK Java's ``BaseLlmFlow.getRequestProcessorFromTools``).

Java runs it after the other request processors (instructions, contents, transfer) and before the
before-model callbacks; so does the flow here. It goes through the agent's tools and toolsets in
the order given: a tool's hook, or a toolset's own hook and then its tools' (Java's order). Only
the tools and toolsets that override ``process_llm_request`` are called.
"""

from __future__ import annotations

import asyncio
from functools import partial

import reactivex

from ..._core.errors import ConfigurationError
from ..._core.types import LlmRequest
from ..._rx.direct import collect_then, emit_now
from ..._tools import BaseTool, ToolContext
from ..._tools._toolset import BaseToolset, ToolGroup
from .._invocation.callbacks import Call, callback_chain

__all__ = ["edits_requests", "process_request_by_tools"]


def _edits_requests(entry: BaseTool | BaseToolset) -> bool:
    base = BaseToolset if isinstance(entry, BaseToolset) else BaseTool
    return type(entry).process_llm_request is not base.process_llm_request


def _editors(groups: tuple[ToolGroup, ...]) -> list[BaseTool | BaseToolset]:
    """Who edits the request, in Java's order: each tool, or each toolset then its tools."""
    found: list[BaseTool | BaseToolset] = []
    for entry, tools in groups:
        if isinstance(entry, BaseToolset):
            found.append(entry)
            found.extend(tools)
        else:
            found.append(entry)
    return [e for e in found if _edits_requests(e)]


def edits_requests(groups: tuple[ToolGroup, ...]) -> bool:
    """Whether a tool or toolset of ``groups`` edits the request (else :func:`process_request_by_tools`
    emits it unchanged)."""
    return bool(_editors(groups))


def process_request_by_tools(
    groups: tuple[ToolGroup, ...],
    request: LlmRequest,
    tool_context: ToolContext,
    owner: str,
    loop: asyncio.AbstractEventLoop | None = None,
) -> reactivex.Observable[LlmRequest]:
    """Emit ``request`` as the tools that edit requests leave it (at once when none does), then complete.

    Args:
        groups: the step's tools by where they came from (``canonical_tool_groups``), in order.
        request: the request built for the step.
        tool_context: the context every tool gets (the step's state, no function call).
        owner: whose tools, for error messages (``"agent 'support'"``).
        loop: where ``async def`` hooks run (the run's ``ToolRuntime.loop``), as callbacks do.

    A tool or toolset that raises, or answers something that is not an ``LlmRequest``, fails the
    step with an :class:`~rxllm.RxLlmError` naming it.
    """
    editors = _editors(groups)
    if not editors:
        return emit_now(request)
    current = [request]
    calling = [""]  # the name of the tool whose answer comes next (the tools are called one by one)

    def process(entry: BaseTool | BaseToolset) -> object:
        calling[0] = f"tool {entry.name!r}" if isinstance(entry, BaseTool) else f"toolset {type(entry).__name__}"
        return entry.process_llm_request(tool_context=tool_context, llm_request=current[0])

    def accept(answer: object) -> LlmRequest | None:
        if not isinstance(answer, LlmRequest):
            raise ConfigurationError(
                f"process_llm_request of {calling[0]} of {owner} returned {type(answer).__name__}; "
                "expected None or an LlmRequest"
            )
        current[0] = answer  # not an answer that stops the chain: the next tool sees it
        return None

    calls: list[tuple[object, Call]] = [(e.process_llm_request, partial(process, e)) for e in editors]
    chain: reactivex.Observable[LlmRequest] = callback_chain("process_llm_request", owner, calls, accept, loop=loop)
    return collect_then(chain, lambda _: emit_now(current[0]))
