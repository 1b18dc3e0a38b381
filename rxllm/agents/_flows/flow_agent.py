"""What the LLM flow reads of the agent it runs: the ``FlowAgent`` protocol (``LlmAgent`` is one),
and the model and tool callbacks an ``LlmAgent`` is given.

As in ADK Java, ``LlmAgent`` holds its flow and the flow reads the agent (there through a cast of
``InvocationContext.agent()`` to ``LlmAgent``). Here the flow sees the agent only through this
protocol, so ``rxllm.agents._agents.llm_agent`` imports the flow and the flow never imports it.

Two questions are asked of the *other* agents of the tree: the root's global instruction, and
whether the parent takes part in agent transfer. Both are asked with ``isinstance`` against
:class:`TreeLlmAgent`, the part of the protocol a workflow agent (``SequentialAgent``...) lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeGuard, runtime_checkable

import reactivex
from pydantic import BaseModel

from ..._core.types import GenerateContentConfig, LlmRequest, LlmResponse
from ..._models.base_llm import BaseLlm
from ..._tools import BaseTool, CallbackContext, ToolContext
from ..._tools._toolset import BaseToolset, ToolGroup
from .._invocation.base import BaseAgent
from .contents import IncludeContents
from .instructions import InstructionProvider

__all__ = [
    "AfterModelCallback",
    "AfterToolCallback",
    "BeforeModelCallback",
    "BeforeToolCallback",
    "FlowAgent",
    "OnModelErrorCallback",
    "OnToolErrorCallback",
    "TreeLlmAgent",
]

BeforeModelCallback = Callable[[CallbackContext, LlmRequest], object]
"""Called before each model call. Return None to go on, an ``LlmRequest`` to replace the request
(requests are immutable: ``request.model_copy(update=...)``; the next callback sees the
replacement), or an ``LlmResponse`` to skip the model call and use it as the model's answer (not
counted as a model call); or an Observable of zero or one of those, or be ``async def``."""

AfterModelCallback = Callable[[CallbackContext, LlmResponse], object]
"""Called for every response of the model, partials included. Return None to keep it or an
``LlmResponse`` to replace it (the replacement keeps the ``partial`` flag of what it replaces); or
an Observable of zero or one, or be ``async def``."""

OnModelErrorCallback = Callable[[CallbackContext, LlmRequest, Exception], object]
"""Called when a model call fails (the error it failed with). Return None to let the run fail, or
an ``LlmResponse`` to use as the model's answer instead; or an Observable of zero or one, or be
``async def``."""

BeforeToolCallback = Callable[[BaseTool, dict[str, Any], ToolContext], object]
"""Called before each tool call with the tool, the model's arguments and the tool's context.
Return None to call the tool, or a dict to use as the tool's result without calling it; or an
Observable of zero or one, or be ``async def``."""

AfterToolCallback = Callable[[BaseTool, dict[str, Any], ToolContext, dict[str, Any]], object]
"""Called after each successful tool call with its result. Return None to keep the result, or a
dict to replace it; or an Observable of zero or one, or be ``async def``."""

OnToolErrorCallback = Callable[[BaseTool, dict[str, Any], ToolContext, Exception], object]
"""Called when a tool fails (raises, bad arguments, non-JSON result). Return None to answer the
model with ``{"error": ...}`` as usual, or a dict to use as the tool's result; or an Observable of
zero or one, or be ``async def``."""


@runtime_checkable
class TreeLlmAgent(Protocol):
    """What the flow reads of another LLM agent of the tree (its root, its parent); ``LlmAgent`` is one.

    Only plain properties, so an ``isinstance`` check reads nothing that can fail.
    """

    @property
    def global_instruction(self) -> str | InstructionProvider: ...

    @property
    def disallow_transfer_to_parent(self) -> bool: ...

    @property
    def disallow_transfer_to_peers(self) -> bool: ...


_TREE_LLM_TYPES: dict[type, bool] = {}


def is_tree_llm_agent(agent: object) -> TypeGuard[TreeLlmAgent]:
    """``isinstance(agent, TreeLlmAgent)``, remembered per type.

    A runtime-checkable Protocol's ``isinstance`` walks the protocol's members on every call (about
    20 µs on CPython 3.11, for ``None`` too), and the flow asks it several times per model call. The
    members are plain properties, so the answer is the same for every instance of a type.
    """
    if agent is None:
        return False
    kind = type(agent)
    known = _TREE_LLM_TYPES.get(kind)
    if known is None:
        known = _TREE_LLM_TYPES[kind] = isinstance(agent, TreeLlmAgent)
    return known


class FlowAgent(TreeLlmAgent, Protocol):
    """What the LLM flow reads of the agent it runs (``rxllm.agents.LlmAgent`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def sub_agents(self) -> tuple[BaseAgent, ...]: ...

    @property
    def parent_agent(self) -> BaseAgent | None: ...

    @property
    def root_agent(self) -> BaseAgent: ...

    @property
    def model(self) -> BaseLlm: ...

    @property
    def instruction(self) -> str | InstructionProvider: ...

    @property
    def tools(self) -> tuple[BaseTool, ...]: ...

    @property
    def tools_by_name(self) -> Mapping[str, BaseTool]: ...

    @property
    def tools_union(self) -> tuple[BaseTool | BaseToolset, ...]: ...

    def canonical_tools(self, readonly_context: Any = None) -> reactivex.Observable[tuple[BaseTool, ...]]: ...

    def canonical_tool_groups(self, readonly_context: Any = None) -> reactivex.Observable[tuple[ToolGroup, ...]]: ...

    @property
    def generate_content_config(self) -> GenerateContentConfig: ...

    @property
    def output_key(self) -> str | None: ...

    @property
    def output_schema(self) -> type[BaseModel] | None: ...

    @property
    def include_contents(self) -> IncludeContents: ...

    @property
    def before_model_callbacks(self) -> tuple[BeforeModelCallback, ...]: ...

    @property
    def after_model_callbacks(self) -> tuple[AfterModelCallback, ...]: ...

    @property
    def on_model_error_callbacks(self) -> tuple[OnModelErrorCallback, ...]: ...

    @property
    def before_tool_callbacks(self) -> tuple[BeforeToolCallback, ...]: ...

    @property
    def after_tool_callbacks(self) -> tuple[AfterToolCallback, ...]: ...

    @property
    def on_tool_error_callbacks(self) -> tuple[OnToolErrorCallback, ...]: ...
