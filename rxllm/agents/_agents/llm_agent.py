"""``LlmAgent``: an agent driven by a model, with an instruction and tools (ADK's ``LlmAgent``).

As in ADK Java, the agent holds its flow: :meth:`LlmAgent._run_async_impl` runs the LLM flow
(``rxllm.agents._flows.flow``), which sees the agent only through the ``FlowAgent`` protocol, so
imports go one way: this module imports the flow, never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import reactivex
from pydantic import BaseModel

from ..._core.errors import ConfigurationError
from ..._core.types import GenerateContentConfig
from ..._models.base_llm import BaseLlm
from ..._tools import BaseTool, ToolLike, tools_by_name
from ..._tools._toolset import BaseToolset, ToolGroup, expand_tool_groups, expand_tools
from .._flows.contents import IncludeContents
from .._flows.flow import run_llm_flow
from .._flows.flow_agent import (
    AfterModelCallback,
    AfterToolCallback,
    BeforeModelCallback,
    BeforeToolCallback,
    OnModelErrorCallback,
    OnToolErrorCallback,
)
from .._flows.instructions import InstructionProvider
from .._flows.output_schema import SET_MODEL_RESPONSE
from .._invocation.base import AgentCallback, BaseAgent, InvocationContext
from .._invocation.callbacks import as_callbacks
from .._sessions.event import Event
from .registry import LlmRegistry

__all__ = ["LlmAgent"]


class LlmAgent(BaseAgent):
    """An agent driven by a model: ADK's ``LlmAgent``.

    Args:
        name: the agent's name (a Python identifier).
        model: the model it asks: a :class:`~rxllm.BaseLlm`, a model name resolved by
            :class:`LlmRegistry` (``"gemini-2.0-flash"``), or None to use the nearest ancestor's.
        instruction: the system instruction. ``{key}`` is replaced by the session state's value
            (``{key?}`` by ``""`` when absent); or a function of a :class:`ReadonlyContext`
            returning the instruction, called before every model call.
        global_instruction: an instruction for every agent of the tree: the root agent's is put
            before each agent's own instruction (same templating).
        tools: tools the model may call: :class:`BaseTool` instances or plain functions (wrapped
            in :class:`FunctionTool`), and toolsets (``McpToolset``: expanded into their tools
            before every model call, see :meth:`canonical_tools`). Names must be unique.
        description: what the agent does (other agents read it when choosing whom to transfer to).
        sub_agents: agents this one may transfer to (ADK's transfer: see ``_transfer``).
        disallow_transfer_to_parent: never offer the parent as a transfer target.
        disallow_transfer_to_peers: never offer the parent's other sub-agents.
        output_key: the state key the agent's final text (or validated object, with
            ``output_schema``) is written to, through its final event's ``state_delta``.
        output_schema: a pydantic model class: the model is asked for JSON of its schema and the
            reply is validated against it. With tools, the model answers by calling the
            ``set_model_response`` tool instead (ADK Java's ``SetModelResponseTool``: its
            arguments, validated, are the answer; see ``rxllm.agents._flows.output_schema``).
            The agent transfers as any other (ADK Java's ``AutoFlow``).
        input_schema: a pydantic model class: what the agent takes when another agent calls it
            through :class:`AgentTool` (the tool's parameters; the arguments, validated, are its
            user message as JSON). Used by ``AgentTool`` only, as in ADK Java.
        include_contents: ``"default"``: the history (``_contents`` rules); ``"none"``: only the
            current turn.
        generate_content_config: generation options (temperature, ...). Its ``system_instruction``
            and ``tools`` must be unset: the agent sets them from ``instruction`` and ``tools``.
        before_agent_callback, after_agent_callback: see :class:`BaseAgent`.
        before_model_callback: one callback or several (see ``BeforeModelCallback``); the first
            that returns a response wins.
        after_model_callback: one callback or several (see ``AfterModelCallback``), called for
            every response, partials included; the first that returns a replacement wins, and the
            replacement keeps the replaced response's ``partial`` flag.
        on_model_error_callback: one or several (see ``OnModelErrorCallback``): a model call failed.
        before_tool_callback, after_tool_callback, on_tool_error_callback: one or several (see
            ``BeforeToolCallback``, ``AfterToolCallback``, ``OnToolErrorCallback``).

    Every callback may return None (go on), its answer, an Observable of zero or one answer, or be
    an ``async def``; the runner's plugins run before them.

    >>> from rxllm.testing import ScriptedLlm
    >>> def get_order(order_id: str) -> dict[str, str]:
    ...     '''Look an order up.'''
    ...     return {"status": "shipped"}
    >>> agent = LlmAgent("support", ScriptedLlm([]), instruction="Be brief.", tools=[get_order])
    >>> [tool.name for tool in agent.tools]
    ['get_order']
    """

    def __init__(
        self,
        name: str,
        model: BaseLlm | str | None = None,
        *,
        instruction: str | InstructionProvider = "",
        global_instruction: str | InstructionProvider = "",
        tools: Sequence[ToolLike | BaseToolset] = (),
        description: str = "",
        sub_agents: Sequence[BaseAgent] = (),
        disallow_transfer_to_parent: bool = False,
        disallow_transfer_to_peers: bool = False,
        output_key: str | None = None,
        output_schema: type[BaseModel] | None = None,
        input_schema: type[BaseModel] | None = None,
        include_contents: IncludeContents = "default",
        generate_content_config: GenerateContentConfig | None = None,
        before_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
        after_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
        before_model_callback: BeforeModelCallback | Sequence[BeforeModelCallback] | None = None,
        after_model_callback: AfterModelCallback | Sequence[AfterModelCallback] | None = None,
        on_model_error_callback: OnModelErrorCallback | Sequence[OnModelErrorCallback] | None = None,
        before_tool_callback: BeforeToolCallback | Sequence[BeforeToolCallback] | None = None,
        after_tool_callback: AfterToolCallback | Sequence[AfterToolCallback] | None = None,
        on_tool_error_callback: OnToolErrorCallback | Sequence[OnToolErrorCallback] | None = None,
    ) -> None:
        super().__init__(
            name,
            description=description,
            sub_agents=sub_agents,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
        if model is not None and not isinstance(model, (BaseLlm, str)):
            raise ConfigurationError(f"LlmAgent {name!r} needs a BaseLlm or a model name, got {type(model).__name__}")
        for label, value in (("instruction", instruction), ("global_instruction", global_instruction)):
            if not isinstance(value, str) and not callable(value):
                raise ConfigurationError(f"{label} must be a str or a callable, got {type(value).__name__}")
        if include_contents not in ("default", "none"):
            raise ConfigurationError(f"include_contents must be 'default' or 'none', got {include_contents!r}")
        config = generate_content_config or GenerateContentConfig()
        if config.system_instruction is not None:
            raise ConfigurationError(
                f"LlmAgent {name!r}: set the system instruction with instruction=, not in generate_content_config"
            )
        if config.tools:
            raise ConfigurationError(
                f"LlmAgent {name!r}: pass tools with tools=, not in generate_content_config (a provider's built-in "
                "tool as an entry: GoogleSearchTool(), BuiltInTool(Tool(...)))"
            )
        if output_schema is not None and not (isinstance(output_schema, type) and issubclass(output_schema, BaseModel)):
            raise ConfigurationError(f"LlmAgent {name!r}: output_schema must be a pydantic model class")
        if input_schema is not None and not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
            raise ConfigurationError(f"LlmAgent {name!r}: input_schema must be a pydantic model class")
        self._model = model
        self._resolved: BaseLlm | None = model if isinstance(model, BaseLlm) else None
        self._instruction = instruction
        self._global_instruction = global_instruction
        self._toolsets = tuple(t for t in tools if isinstance(t, BaseToolset))
        self._tools_by_name = tools_by_name([t for t in tools if not isinstance(t, BaseToolset)], f"LlmAgent {name!r}")
        self._tools = tuple(self._tools_by_name.values())
        wrapped = iter(self._tools)  # ADK Java's toolsUnion: tools and toolsets in the order given
        self._tools_union: tuple[BaseTool | BaseToolset, ...] = tuple(
            t if isinstance(t, BaseToolset) else next(wrapped) for t in tools
        )
        if output_schema is not None and SET_MODEL_RESPONSE in self._tools_by_name:
            raise ConfigurationError(
                f"LlmAgent {name!r} has an output_schema and a tool named {SET_MODEL_RESPONSE!r}, the name of the "
                "tool ADK adds for the structured answer of an agent with tools: rename the tool"
            )
        self._config = config
        self._disallow_transfer_to_parent = disallow_transfer_to_parent
        self._disallow_transfer_to_peers = disallow_transfer_to_peers
        self._output_key = output_key
        self._output_schema = output_schema
        self._input_schema = input_schema
        self._include_contents: IncludeContents = include_contents
        self._before: tuple[BeforeModelCallback, ...] = as_callbacks(before_model_callback, "before_model_callback")
        self._after: tuple[AfterModelCallback, ...] = as_callbacks(after_model_callback, "after_model_callback")
        self._on_model_error: tuple[OnModelErrorCallback, ...] = as_callbacks(
            on_model_error_callback, "on_model_error_callback"
        )
        self._before_tool: tuple[BeforeToolCallback, ...] = as_callbacks(before_tool_callback, "before_tool_callback")
        self._after_tool: tuple[AfterToolCallback, ...] = as_callbacks(after_tool_callback, "after_tool_callback")
        self._on_tool_error: tuple[OnToolErrorCallback, ...] = as_callbacks(
            on_tool_error_callback, "on_tool_error_callback"
        )

    @property
    def model(self) -> BaseLlm:
        """The model the agent asks: its own (a name resolved by :class:`LlmRegistry`), else its
        nearest ancestor's (ADK's ``resolvedModel``).

        Raises:
            ConfigurationError: no model on the agent nor any ``LlmAgent`` ancestor; an unknown name.
        """
        if self._resolved is not None:
            return self._resolved
        if isinstance(self._model, str):
            self._resolved = LlmRegistry.get_llm(self._model)
            return self._resolved
        ancestor = self.parent_agent
        while ancestor is not None:
            if isinstance(ancestor, LlmAgent) and ancestor._model is not None:
                return ancestor.model
            ancestor = ancestor.parent_agent
        raise ConfigurationError(f"LlmAgent {self.name!r} has no model, and no LlmAgent ancestor has one")

    @property
    def instruction(self) -> str | InstructionProvider:
        """The instruction (template or provider)."""
        return self._instruction

    @property
    def global_instruction(self) -> str | InstructionProvider:
        """The global instruction (used when this agent is the root of its tree)."""
        return self._global_instruction

    @property
    def tools(self) -> tuple[BaseTool, ...]:
        """The agent's tools, callables already wrapped."""
        return self._tools

    @property
    def tools_by_name(self) -> Mapping[str, BaseTool]:
        """The tools by the name the model calls them (toolsets' tools not included)."""
        return self._tools_by_name

    @property
    def toolsets(self) -> tuple[BaseToolset, ...]:
        """The toolsets given in ``tools``."""
        return self._toolsets

    @property
    def tools_union(self) -> tuple[BaseTool | BaseToolset, ...]:
        """The tools and toolsets in the order given (ADK Java's ``toolsUnion``), callables wrapped."""
        return self._tools_union

    def canonical_tools(self, readonly_context: Any = None) -> reactivex.Observable[tuple[BaseTool, ...]]:
        """The agent's tools with each toolset's tools in its place, as one tuple (ADK Java's ``canonicalTools``).

        Emitted during subscribe when the agent has no toolsets; a toolset whose listing fails is
        left out with a warning (see ``rxllm._tools._toolset``).
        """
        return expand_tools(self._tools_union, f"LlmAgent {self.name!r}", readonly_context)

    def canonical_tool_groups(self, readonly_context: Any = None) -> reactivex.Observable[tuple[ToolGroup, ...]]:
        """:meth:`canonical_tools` with where each came from: ``(tool, (tool,))`` or ``(toolset, its tools)``
        for each entry of :attr:`tools_union`, in order (the flow calls ``process_llm_request`` so)."""
        union = self._tools_union
        static: tuple[object, reactivex.Observable[tuple[ToolGroup, ...]]] | None = getattr(
            self, "_static_groups", None
        )  # (a subclass may skip __init__)
        if static is not None and static[0] is union:
            return static[1]
        groups = expand_tool_groups(union, f"LlmAgent {self.name!r}", readonly_context)
        if not any(isinstance(entry, BaseToolset) for entry in union):
            # no toolset: the same groups every step, emitted during subscribe (one Observable kept)
            self._static_groups = (union, groups)
        return groups

    @property
    def generate_content_config(self) -> GenerateContentConfig:
        """The generation options every request starts from."""
        return self._config

    @property
    def disallow_transfer_to_parent(self) -> bool:
        """Whether the parent is never a transfer target."""
        return self._disallow_transfer_to_parent

    @property
    def disallow_transfer_to_peers(self) -> bool:
        """Whether the parent's other sub-agents are never transfer targets."""
        return self._disallow_transfer_to_peers

    @property
    def output_key(self) -> str | None:
        """The state key the final output is written to."""
        return self._output_key

    @property
    def output_schema(self) -> type[BaseModel] | None:
        """The pydantic model the reply must validate against."""
        return self._output_schema

    @property
    def input_schema(self) -> type[BaseModel] | None:
        """The pydantic model of what the agent takes as an :class:`AgentTool`."""
        return self._input_schema

    @property
    def include_contents(self) -> IncludeContents:
        """``"default"`` or ``"none"``."""
        return self._include_contents

    @property
    def before_model_callbacks(self) -> tuple[BeforeModelCallback, ...]:
        """The before-model callbacks, in order."""
        return self._before

    @property
    def after_model_callbacks(self) -> tuple[AfterModelCallback, ...]:
        """The after-model callbacks, in order."""
        return self._after

    @property
    def on_model_error_callbacks(self) -> tuple[OnModelErrorCallback, ...]:
        """The on-model-error callbacks, in order."""
        return self._on_model_error

    @property
    def before_tool_callbacks(self) -> tuple[BeforeToolCallback, ...]:
        """The before-tool callbacks, in order."""
        return self._before_tool

    @property
    def after_tool_callbacks(self) -> tuple[AfterToolCallback, ...]:
        """The after-tool callbacks, in order."""
        return self._after_tool

    @property
    def on_tool_error_callbacks(self) -> tuple[OnToolErrorCallback, ...]:
        """The on-tool-error callbacks, in order."""
        return self._on_tool_error

    def _stores_its_events(self) -> bool:
        # the flow stores every non-partial event before it emits it; a subclass with its own run may not
        return type(self)._run_async_impl is LlmAgent._run_async_impl

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        """Run the LLM flow (see ``rxllm.agents._flows.flow``): cold; disposing cancels the model call and
        runs no further tools or model calls."""
        return run_llm_flow(self, ctx)
