"""Agents: ``BaseAgent`` and ``LlmAgent``, a model with an instruction and tools."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence

import reactivex

from .._aio import AwaitableObservable, awaitable
from .._base_llm import BaseLlm
from .._errors import ConfigurationError
from .._tools import BaseTool, Named, ToolLike, tools_by_name
from .._types import GenerateContentConfig
from ._context import InvocationContext, ReadonlyContext
from ._event import Event
from ._flow import AfterModelCallback, BeforeModelCallback, as_callbacks, run_llm_flow

__all__ = ["BaseAgent", "InstructionProvider", "LlmAgent"]

InstructionProvider = Callable[[ReadonlyContext], str]
"""A dynamic instruction: called before every model call with a read-only view of the run."""


class BaseAgent(Named, abc.ABC):
    """An agent the :class:`Runner` can run.

    Args:
        name: a Python identifier, unique among agents; ``"user"`` is reserved for user events.
        description: what the agent does (for other agents choosing whom to hand over to).

    The contract of :meth:`run_async`, which the runtime and the seed's persist-before-next-step
    rule rely on: the Observable emits every event of the run; a non-partial event is stored
    with ``ctx.append_event`` *before* it is emitted (the stored event is what is emitted), and
    anything the agent builds from the session afterwards is built after that store completed.
    """

    def __init__(self, name: str, *, description: str = "") -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ConfigurationError(f"agent name must be a Python identifier, got {name!r}")
        if name == "user":
            raise ConfigurationError("agent name 'user' is reserved for the user's events")
        super().__init__(name, description)

    @abc.abstractmethod
    def run_async(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        """Run the agent for one invocation. Cold: subscribing starts it; disposing stops it."""


class LlmAgent(BaseAgent):
    """An agent driven by a model: ADK's ``LlmAgent``.

    Args:
        name: the agent's name (a Python identifier).
        model: the model it asks.
        instruction: the system instruction. ``{key}`` is replaced by the session state's value
            (``{key?}`` by ``""`` when absent); or a function of a :class:`ReadonlyContext`
            returning the instruction, called before every model call.
        tools: tools the model may call: :class:`BaseTool` instances or plain functions (wrapped
            in :class:`FunctionTool`). Names must be unique.
        description: what the agent does.
        generate_content_config: generation options (temperature, ...). Its ``system_instruction``
            and ``tools`` must be unset: the agent sets them from ``instruction`` and ``tools``.
        before_model_callback: one callback or several (see ``BeforeModelCallback``); the first
            that returns a response wins.
        after_model_callback: one callback or several (see ``AfterModelCallback``), called for
            every response, partials included; the first that returns a replacement wins, and the
            replacement keeps the replaced response's ``partial`` flag.

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
        model: BaseLlm,
        *,
        instruction: str | InstructionProvider = "",
        tools: Sequence[ToolLike] = (),
        description: str = "",
        generate_content_config: GenerateContentConfig | None = None,
        before_model_callback: BeforeModelCallback | Sequence[BeforeModelCallback] | None = None,
        after_model_callback: AfterModelCallback | Sequence[AfterModelCallback] | None = None,
    ) -> None:
        super().__init__(name, description=description)
        if not isinstance(model, BaseLlm):
            raise ConfigurationError(f"LlmAgent {name!r} needs a BaseLlm model, got {type(model).__name__}")
        if not isinstance(instruction, str) and not callable(instruction):
            raise ConfigurationError(f"instruction must be a str or a callable, got {type(instruction).__name__}")
        config = generate_content_config or GenerateContentConfig()
        if config.system_instruction is not None:
            raise ConfigurationError(
                f"LlmAgent {name!r}: set the system instruction with instruction=, not in generate_content_config"
            )
        if config.tools:
            raise ConfigurationError(f"LlmAgent {name!r}: pass tools with tools=, not in generate_content_config")
        self._model = model
        self._instruction = instruction
        self._tools_by_name = tools_by_name(tools, f"LlmAgent {name!r}")
        self._tools = tuple(self._tools_by_name.values())
        self._config = config
        self._before: tuple[BeforeModelCallback, ...] = as_callbacks(before_model_callback, "before_model_callback")
        self._after: tuple[AfterModelCallback, ...] = as_callbacks(after_model_callback, "after_model_callback")

    @property
    def model(self) -> BaseLlm:
        """The model the agent asks."""
        return self._model

    @property
    def instruction(self) -> str | InstructionProvider:
        """The instruction (template or provider)."""
        return self._instruction

    @property
    def tools(self) -> tuple[BaseTool, ...]:
        """The agent's tools, callables already wrapped."""
        return self._tools

    @property
    def tools_by_name(self) -> Mapping[str, BaseTool]:
        """The tools by the name the model calls them."""
        return self._tools_by_name

    @property
    def generate_content_config(self) -> GenerateContentConfig:
        """The generation options every request starts from."""
        return self._config

    @property
    def before_model_callbacks(self) -> tuple[BeforeModelCallback, ...]:
        """The before-model callbacks, in order."""
        return self._before

    @property
    def after_model_callbacks(self) -> tuple[AfterModelCallback, ...]:
        """The after-model callbacks, in order."""
        return self._after

    def run_async(self, ctx: InvocationContext) -> AwaitableObservable[Event]:
        """Run the LLM flow (see ``rxllm.agents._flow``): cold; disposing cancels the model call and
        runs no further tools or model calls."""
        return awaitable(run_llm_flow(self, ctx))
