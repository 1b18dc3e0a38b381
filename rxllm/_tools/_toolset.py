"""Toolsets: a source of tools listed when a run needs them (ADK Java's ``BaseToolset``).

A toolset goes into ``LlmAgent(tools=[...])`` next to tools. Before every model call the agent
expands its toolsets into tools (:func:`expand_tools`, ADK Java's ``LlmAgent.canonicalTools``):
each toolset's :meth:`BaseToolset.get_tools` is subscribed and its tools join the agent's own. A
toolset whose listing fails is left out of that step with a warning (logger ``rxllm.agents``):
the run goes on with the other tools, and the next step asks the toolset again.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Sequence
from typing import Any

import reactivex

from .._core.errors import ConfigurationError
from .._core.types import LlmRequest
from .._rx.direct import Direct, collect_then, emit_now
from ._context import ToolContext
from ._tool import BaseTool

__all__ = ["BaseToolset", "ToolFilter", "ToolGroup", "expand_tool_groups", "expand_tools", "group_tools"]

_log = logging.getLogger("rxllm.agents")

ToolFilter = Sequence[str] | Callable[[BaseTool], bool]
"""Which of a toolset's tools an agent gets: their names, or a predicate on each tool (ADK's ``toolFilter``)."""


class BaseToolset(abc.ABC):
    """Tools that are listed at run time (ADK Java's ``BaseToolset``), e.g. an MCP server's.

    Args:
        tool_filter: the names of the tools to keep, or a predicate on each tool; None keeps all.
    """

    def __init__(self, *, tool_filter: ToolFilter | None = None) -> None:
        if tool_filter is not None and not callable(tool_filter):
            if isinstance(tool_filter, str) or not all(isinstance(name, str) for name in tool_filter):
                raise ConfigurationError("tool_filter must be a sequence of tool names or a predicate on a tool")
            tool_filter = tuple(tool_filter)
        self._tool_filter = tool_filter

    @property
    def tool_filter(self) -> ToolFilter | None:
        """The filter given (names as a tuple), or None."""
        return self._tool_filter

    def is_selected(self, tool: BaseTool) -> bool:
        """Whether ``tool`` passes :attr:`tool_filter` (ADK's ``isToolSelected``)."""
        if self._tool_filter is None:
            return True
        if callable(self._tool_filter):
            return bool(self._tool_filter(tool))
        return tool.name in self._tool_filter

    @abc.abstractmethod
    def get_tools(self, readonly_context: Any = None) -> reactivex.Observable[list[BaseTool]]:
        """A cold Observable of the filtered tools (one list), then completion.

        It can be awaited (``await toolset.get_tools()``) or run (``toolset.get_tools().run()``).
        """

    def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> object:
        """Edit the request the agent is about to send (ADK Java's ``BaseToolset.processLlmRequest``).

        Called before every model call of an agent that has the toolset, in the agent's order of
        tools and toolsets: the toolset's own hook first, then its tools' (ADK Java's
        ``BaseLlmFlow.getRequestProcessorFromTools``). Answers as
        :meth:`BaseTool.process_llm_request` does: None to leave the request as it is, a new
        :class:`~rxllm.LlmRequest`, an Observable of zero or one request, or an ``async def``'s.
        The default changes nothing.
        """
        return None

    def close(self) -> None:  # noqa: B027 (a toolset that holds nothing needs no close)
        """Release what the toolset holds (a session, a process). The default holds nothing."""

    def __enter__(self) -> BaseToolset:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


ToolGroup = tuple[BaseTool | BaseToolset, tuple[BaseTool, ...]]
"""One entry of an agent's ``tools``, expanded: a tool and ``(tool,)``, or a toolset and the tools it listed."""


def expand_tool_groups(
    union: Sequence[BaseTool | BaseToolset], owner: str, readonly_context: Any = None
) -> reactivex.Observable[tuple[ToolGroup, ...]]:
    """Every entry of ``union`` (an agent's tools and toolsets, in its order) with its tools: one
    tuple, then completion (ADK Java's ``LlmAgent.canonicalTools`` keeps that order).

    Without toolsets the tuple is emitted during subscribe. A toolset whose listing fails is
    skipped with a warning (its group has no tools); a listed tool whose name another tool
    already has fails the Observable with :class:`~rxllm.ConfigurationError`.
    """
    if not any(isinstance(entry, BaseToolset) for entry in union):
        return emit_now(tuple((entry, (entry,)) for entry in union if isinstance(entry, BaseTool)))

    def listed(toolset: BaseToolset) -> reactivex.Observable[list[BaseTool]]:
        def subscribe(observer: Any, scheduler: Any = None) -> Any:
            def failed(error: Exception) -> None:
                _log.warning("%s: toolset %r listed no tools: %s", owner, toolset, error)
                observer.on_next([])
                observer.on_completed()

            return toolset.get_tools(readonly_context).subscribe(observer.on_next, failed, observer.on_completed)

        return Direct(subscribe)

    def gather(index: int, found: tuple[ToolGroup, ...]) -> reactivex.Observable[tuple[ToolGroup, ...]]:
        if index == len(union):
            names: set[str] = set()
            for _, tools in found:
                for tool in tools:
                    if tool.name in names:
                        raise ConfigurationError(f"{owner} has two tools named {tool.name!r} (one from a toolset)")
                    names.add(tool.name)
            return emit_now(found)
        entry = union[index]
        if isinstance(entry, BaseTool):
            return gather(index + 1, (*found, (entry, (entry,))))

        def then(lists: list[list[BaseTool]]) -> reactivex.Observable[tuple[ToolGroup, ...]]:
            return gather(index + 1, (*found, (entry, tuple(lists[-1] if lists else ()))))

        return collect_then(listed(entry), then)

    return gather(0, ())


def group_tools(groups: Sequence[ToolGroup]) -> tuple[BaseTool, ...]:
    """The tools of ``groups``, in order."""
    return tuple(tool for _, tools in groups for tool in tools)


def expand_tools(
    union: Sequence[BaseTool | BaseToolset], owner: str, readonly_context: Any = None
) -> reactivex.Observable[tuple[BaseTool, ...]]:
    """The tools of :func:`expand_tool_groups`, as one tuple, in the order of ``union``."""
    groups = expand_tool_groups(union, owner, readonly_context)
    return collect_then(groups, lambda found: emit_now(group_tools(found[-1])))
