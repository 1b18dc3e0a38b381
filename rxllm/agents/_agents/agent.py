"""Agents: ``BaseAgent`` and ``LlmAgent``, a model with an instruction and tools."""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial

import reactivex
from pydantic import BaseModel

from ..._core.errors import ConfigurationError
from ..._core.types import GenerateContentConfig
from ..._models.base_llm import BaseLlm
from ..._rx.aio import AwaitableObservable, awaitable
from ..._rx.direct import defer_now
from ..._tools import BaseTool, Named, ToolLike, tools_by_name
from ..._tools._toolset import BaseToolset, expand_tools
from .._flows.contents import IncludeContents
from .._flows.flow import (
    AfterModelCallback,
    AfterToolCallback,
    BeforeModelCallback,
    BeforeToolCallback,
    OnModelErrorCallback,
    OnToolErrorCallback,
    run_llm_flow,
)
from .._sessions.event import Event
from .agent_run import run_with_agent_callbacks
from .callbacks import as_callbacks
from .context import CallbackContext, InvocationContext, ReadonlyContext
from .registry import LlmRegistry

__all__ = ["AgentCallback", "BaseAgent", "InstructionProvider", "LlmAgent"]

InstructionProvider = Callable[[ReadonlyContext], str]
"""A dynamic instruction: called before every model call with a read-only view of the run."""


AgentCallback = Callable[[CallbackContext], object]
"""A before- or after-agent callback (ADK's ``BeforeAgentCallback`` / ``AfterAgentCallback``).

It gets a :class:`CallbackContext` (state changes are recorded) and returns None to go on, a
:class:`~rxllm.Content` to answer -- before: the agent does not run and an event authored by the
agent with that content is stored and emitted instead; after: that event is added after the
agent's own -- or an Observable (ADK Java's ``Maybe``) / awaitable of either."""


class BaseAgent(Named, abc.ABC):
    """An agent the :class:`Runner` can run, and a node of an agent tree (ADK's ``BaseAgent``).

    Args:
        name: a Python identifier, unique in its agent tree; ``"user"`` is reserved for user events.
        description: what the agent does (for other agents choosing whom to hand over to).
        sub_agents: its children; each becomes this agent's (their ``parent_agent`` is set). An
            agent can have one parent only.
        before_agent_callback: one callback or several (:data:`AgentCallback`), run before the
            agent (after the runner's plugins); the first that answers skips the agent.
        after_agent_callback: one callback or several, run after the agent; the first that answers
            adds an event.

    Subclasses implement :meth:`_run_async_impl`. The contract, which the runtime and its
    persist-before-next-step rule (as in ADK Java's ``Runner``) rely on: the Observable emits every event of the run; a
    non-partial event is stored with ``ctx.append_event`` *before* it is emitted (the stored
    event is what is emitted), and anything the agent builds from the session afterwards is built
    after that store completed.

    >>> from rxllm.testing import ScriptedLlm
    >>> leaf = LlmAgent("leaf", ScriptedLlm([]))
    >>> root = LlmAgent("root", ScriptedLlm([]), sub_agents=[LlmAgent("middle", ScriptedLlm([]), sub_agents=[leaf])])
    >>> leaf.parent_agent.name, leaf.root_agent.name, root.find_agent("leaf") is leaf, root.find_agent("nobody")
    ('middle', 'root', True, None)
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        sub_agents: Sequence[BaseAgent] = (),
        before_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
        after_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigurationError(f"agent name must be a Python identifier, got {name!r}")
        if name == "user":
            raise ConfigurationError("agent name 'user' is reserved for the user's events")
        super().__init__(name, description)
        self._parent: BaseAgent | None = None
        children = tuple(sub_agents)
        seen: set[str] = {name}
        for child in children:
            if not isinstance(child, BaseAgent):
                raise ConfigurationError(f"agent {name!r}: sub_agents must be agents, got {type(child).__name__}")
            if child._parent is not None:
                raise ConfigurationError(
                    f"agent {child.name!r} already has the parent {child._parent.name!r}; it cannot also be a "
                    f"sub-agent of {name!r}"
                )
            for descendant in child._walk():
                if descendant.name in seen:
                    raise ConfigurationError(f"agent tree of {name!r} has two agents named {descendant.name!r}")
                seen.add(descendant.name)
        for child in children:
            child._parent = self
        self._sub_agents = children
        self._before_agent: tuple[AgentCallback, ...] = as_callbacks(before_agent_callback, "before_agent_callback")
        self._after_agent: tuple[AgentCallback, ...] = as_callbacks(after_agent_callback, "after_agent_callback")

    def _walk(self) -> Iterator[BaseAgent]:
        yield self
        for child in self._sub_agents:
            yield from child._walk()

    @property
    def sub_agents(self) -> tuple[BaseAgent, ...]:
        """The agent's children, in order."""
        return self._sub_agents

    @property
    def parent_agent(self) -> BaseAgent | None:
        """The agent this one is a sub-agent of; None for a root."""
        return self._parent

    @property
    def root_agent(self) -> BaseAgent:
        """The root of the agent's tree."""
        agent = self
        while agent._parent is not None:
            agent = agent._parent
        return agent

    def find_agent(self, name: str) -> BaseAgent | None:
        """This agent or a descendant named ``name`` (depth first), or None."""
        return self if self.name == name else self.find_sub_agent(name)

    def find_sub_agent(self, name: str) -> BaseAgent | None:
        """A descendant named ``name`` (depth first), or None."""
        for child in self._sub_agents:
            found = child.find_agent(name)
            if found is not None:
                return found
        return None

    @property
    def before_agent_callbacks(self) -> tuple[AgentCallback, ...]:
        """The before-agent callbacks, in order."""
        return self._before_agent

    @property
    def after_agent_callbacks(self) -> tuple[AgentCallback, ...]:
        """The after-agent callbacks, in order."""
        return self._after_agent

    def run_async(self, parent_context: InvocationContext) -> AwaitableObservable[Event]:
        """Run the agent for one invocation (ADK's ``BaseAgent.runAsync``).

        ``parent_context`` is the caller's context (the runner's, or the parent agent's); the agent
        runs in a copy naming it, in the branch ``parent_branch.name`` when the parent has a branch.
        Plugins' and the agent's before-agent callbacks run first (one that answers replaces the
        run), then :meth:`_run_async_impl`, then the after-agent callbacks. Cold: subscribing
        starts it; disposing stops it.
        """
        branch = f"{parent_context.branch}.{self.name}" if parent_context.branch else parent_context.branch
        ctx = parent_context.for_agent(self, branch=branch)
        if not (self._before_agent or self._after_agent or ctx.plugins):
            return awaitable(defer_now(partial(self._run_async_impl, ctx)))
        return awaitable(run_with_agent_callbacks(self, ctx, self._run_async_impl))

    @abc.abstractmethod
    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        """The agent's own run in ``ctx`` (which already names this agent). Cold."""


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
            reply is validated against it. Such an agent cannot have tools or sub-agents, and
            never transfers (as in ADK).
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
            raise ConfigurationError(f"LlmAgent {name!r}: pass tools with tools=, not in generate_content_config")
        if output_schema is not None:
            if not (isinstance(output_schema, type) and issubclass(output_schema, BaseModel)):
                raise ConfigurationError(f"LlmAgent {name!r}: output_schema must be a pydantic model class")
            if tools or sub_agents:
                raise ConfigurationError(
                    f"LlmAgent {name!r}: an agent with output_schema can only reply: no tools, no sub_agents (as ADK)"
                )
            disallow_transfer_to_parent = disallow_transfer_to_peers = True
        self._model = model
        self._resolved: BaseLlm | None = model if isinstance(model, BaseLlm) else None
        self._instruction = instruction
        self._global_instruction = global_instruction
        self._toolsets = tuple(t for t in tools if isinstance(t, BaseToolset))
        self._tools_by_name = tools_by_name([t for t in tools if not isinstance(t, BaseToolset)], f"LlmAgent {name!r}")
        self._tools = tuple(self._tools_by_name.values())
        self._config = config
        self._disallow_transfer_to_parent = disallow_transfer_to_parent
        self._disallow_transfer_to_peers = disallow_transfer_to_peers
        self._output_key = output_key
        self._output_schema = output_schema
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

    def canonical_tools(
        self, readonly_context: ReadonlyContext | None = None
    ) -> reactivex.Observable[tuple[BaseTool, ...]]:
        """The agent's tools followed by its toolsets' tools, as one tuple (ADK Java's ``canonicalTools``).

        Emitted during subscribe when the agent has no toolsets; a toolset whose listing fails is
        left out with a warning (see ``rxllm._tools._toolset``).
        """
        return expand_tools(self._tools, self._toolsets, f"LlmAgent {self.name!r}", readonly_context)

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

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        """Run the LLM flow (see ``rxllm.agents._flows.flow``): cold; disposing cancels the model call and
        runs no further tools or model calls."""
        return run_llm_flow(self, ctx)
