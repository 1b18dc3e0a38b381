"""One invocation's three types, which refer to one another: ``InvocationContext``, ``BaseAgent``, ``BasePlugin``.

An invocation context names the agent being run and the runner's plugins; an agent runs in an
invocation context; a plugin's hooks get both. As in ADK Java (``InvocationContext``,
``BaseAgent``, ``Plugin``), each needs the others' types, so they live in one module, with the
before- and after-agent callbacks that ``BaseAgent.run_async`` wraps around every agent's run
(ADK's ``BaseAgent.run`` / ``callCallback``):

- Plugins' hooks run first, then the agent's own callbacks, until one answers (``callbacks``).
- A before-agent answer (a :class:`~rxllm.Content`) replaces the agent's run: one event authored by
  the agent with that content (and the state the callbacks set) is stored and emitted, and the
  agent does not run.
- Without an answer, state the before callbacks set is stored in an event of its own (no content)
  before the agent runs, so the agent sees it.
- After the agent's events, the after-agent callbacks run the same way: an answer adds one
  event; state set without an answer is stored in an event of its own.

The views callbacks and tools get of a run (``CallbackContext``, ``ToolContext``...) live in the
tool layer (``rxllm._tools``), below both runtimes.

>>> from rxllm import Content, Part
>>> class Polite(BasePlugin):
...     def on_user_message_callback(self, invocation_context, user_message):
...         return Content(role="user", parts=(*user_message.parts, Part.from_text("Please.")))
>>> Polite("polite").name
'polite'
"""

from __future__ import annotations

import abc
import copy
import inspect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import reactivex
from pydantic import JsonValue
from reactivex import operators as ops

from ..._core.errors import ConfigurationError, LimitExceededError
from ..._core.types import Content, LlmRequest, LlmResponse, UsageMetadata
from ..._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ..._rx.direct import (
    call_then,
    collect_then,
    concat_map_now,
    defer_now,
    emit_now,
    fail_now,
    ignore_items,
    nothing_now,
    tap_next,
    then_now,
)
from ..._telemetry.otel import add_usage
from ..._tools import BaseTool, CallbackContext, Named, ToolContext, ToolRuntime, new_invocation_id
from ..._tools._scope import ToolsetScopes
from .._sessions.base import BaseSessionService, Session, append_now, get_now, session_key
from .._sessions.event import Event, EventActions
from .._sessions.state import STATE_REMOVED, TEMP_PREFIX, State
from .callbacks import PLUGIN_HOOK_PARAMETERS, Call, as_callbacks, callback_chain, keyword_adapter
from .live_request_queue import LiveRequestQueue
from .run_config import RunConfig

if TYPE_CHECKING:
    from .._artifacts.service import BaseArtifactService
    from .._memory.service import BaseMemoryService

__all__ = [
    "AgentCallback",
    "BaseAgent",
    "BasePlugin",
    "InvocationContext",
    "RequestCompactor",
    "run_with_agent_callbacks",
]


T = TypeVar("T")


class RequestCompactor(Protocol):
    """What compacts a session before a model call (``TailRetentionEventCompactor`` is one)."""

    def compact(self, session: Session, session_service: BaseSessionService) -> reactivex.Observable[Event]:
        """Append a compaction event to ``session`` when one is due; emit the stored event, or nothing."""
        ...


class _Shared:
    """What every agent's context of one invocation shares."""

    __slots__ = ("cancelled", "llm_calls", "lock", "stored_ids", "temp_state", "usage")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.llm_calls = 0
        self.usage: UsageMetadata | None = None
        self.cancelled = False  # set once, never cleared: a plain flag (read ~15 times a turn), no Event
        self.temp_state: dict[str, JsonValue] = {}  # the invocation's ``temp:`` keys (never stored)
        self.stored_ids: set[str] = set()  # the ids of the events this invocation stored


class InvocationContext:
    """Everything one run (invocation) of an agent needs: built by the :class:`Runner`.

    Attributes:
        invocation_id: the run's id, stamped on every event it produces.
        agent: the agent being run.
        session: the session as it was when the run started (a snapshot; the flow fetches a fresh
            one before every model call).
        session_service: where the run's events are stored.
        run_config: the run's options.
        user_content: the user message that started the run.
        branch: the agent branch (``agent_1.agent_2``), None for a root agent. A
            :class:`ParallelAgent` gives each sub-agent its own branch; a model call sees only the
            events of its branch and its ancestors'.
        tool_runtime: where the run's tools run and their default timeout (see
            ``rxllm._tools._execution``).
        artifact_service: where tools' artifacts are kept (None: the run has none).
        memory_service: what ``ToolContext.search_memory`` searches (None: the run has none).
        plugins: the runner's plugins (they run before the agents' own callbacks).
        live_request_queue: what the caller sends into a live (BIDI) run (``Runner.run_live``);
            None for other runs.
        end_invocation: set by a before-agent callback that answered: the agent's own run is skipped.
        request_compactor: what compacts the session before each model call of an ``LlmAgent``
            (ADK Java's ``Compaction`` request processor; the runner sets it from its
            ``EventsCompactionConfig`` with tail retention); None: no compaction there.
        toolset_scopes: where toolsets keep what they open (an MCP session): the runner's scope
            and this invocation's (see ``rxllm._tools._scope``); None outside a runner.

    ``temp:`` state: a ``temp:`` key written during the invocation (by a tool, a callback, an
    agent's event) is kept in the invocation, never in the store: :meth:`session_now` shows it
    in the session's state for the rest of the invocation, to every agent of the tree, as ADK
    Java's tools write into the invocation's in-memory ``Session`` whose ``temp:`` keys the
    session service does not persist. The next invocation starts without them.

    Cancellation: the runner calls :meth:`cancel` when the run's subscription is disposed. Rx
    disposal already stops everything that has subscribed; the flag also stops work that a
    synchronous source would otherwise start before the disposal could reach it (a tool call or
    store triggered from inside the same ``on_next`` chain that disposed).
    """

    def __init__(
        self,
        *,
        agent: BaseAgent,
        session: Session,
        session_service: BaseSessionService,
        run_config: RunConfig | None = None,
        user_content: Content | None = None,
        invocation_id: str | None = None,
        branch: str | None = None,
        tool_runtime: ToolRuntime | None = None,
        artifact_service: BaseArtifactService | None = None,
        memory_service: BaseMemoryService | None = None,
        plugins: Sequence[BasePlugin] = (),
        live_request_queue: LiveRequestQueue | None = None,
        request_compactor: RequestCompactor | None = None,
        toolset_scopes: ToolsetScopes | None = None,
    ) -> None:
        self.toolset_scopes = toolset_scopes
        self.live_request_queue = live_request_queue
        self.request_compactor = request_compactor
        self.invocation_id: str = invocation_id or new_invocation_id()
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.agent = agent
        self.session = session
        self.session_service = session_service
        self.run_config: RunConfig = run_config or RunConfig()
        self.user_content = user_content
        self.branch = branch
        self.tool_runtime: ToolRuntime = tool_runtime or ToolRuntime()
        self.plugins: tuple[BasePlugin, ...] = tuple(plugins)
        self.end_invocation = False
        self._shared = _Shared()
        self.telemetry_context: object = None  # OpenTelemetry: what this agent's work nests under (None: off)

    def for_agent(self, agent: BaseAgent, *, branch: str | None) -> InvocationContext:
        """A context for ``agent`` within the same invocation (ADK's ``toBuilder().agent(...)``).

        The copy shares the invocation: its id, session, services, run config, plugins, model-call
        count and cancellation; it has its own agent, branch and ``end_invocation`` flag.
        """
        if type(self) is InvocationContext:  # copy.copy, without its reduce protocol (once per agent run)
            child = object.__new__(InvocationContext)
            child.__dict__.update(self.__dict__)
        else:
            child = copy.copy(self)
        child.agent = agent
        child.branch = branch
        child.end_invocation = False
        return child

    @property
    def is_cancelled(self) -> bool:
        """Whether the run was disposed: no further model calls, tools or stores may start."""
        return self._shared.cancelled

    def cancel(self) -> None:
        """Mark the run disposed (idempotent)."""
        self._shared.cancelled = True

    @property
    def app_name(self) -> str:
        """The session's app name."""
        return self.session.app_name

    @property
    def user_id(self) -> str:
        """The session's user id."""
        return self.session.user_id

    @property
    def llm_call_count(self) -> int:
        """How many model calls this run has made."""
        with self._shared.lock:
            return self._shared.llm_calls

    def increment_llm_call_count(self) -> None:
        """Count one model call.

        Raises:
            LimitExceededError: when the count goes past ``run_config.max_llm_calls`` (if positive).
        """
        limit = self.run_config.max_llm_calls
        with self._shared.lock:
            self._shared.llm_calls += 1
            count = self._shared.llm_calls
        if 0 < limit < count:
            raise LimitExceededError(
                f"max_llm_calls limit of {limit} exceeded: agent {self.agent.name!r} asked for model call "
                f"#{count} in invocation {self.invocation_id} (raise RunConfig.max_llm_calls if this is expected)"
            )

    @property
    def total_usage_metadata(self) -> UsageMetadata | None:
        """The token usage summed over every model call of this run so far (None before any usage)."""
        with self._shared.lock:
            return self._shared.usage

    def add_usage(self, usage: UsageMetadata | None) -> None:
        """Count one model call's usage in :attr:`total_usage_metadata`."""
        if usage is None:
            return
        with self._shared.lock:
            self._shared.usage = add_usage(self._shared.usage, usage)

    def current_session(self) -> MaybeObservable[Session]:
        """The session as stored now (empty when it was deleted meanwhile; ``await`` gives ``None`` then)."""
        return MaybeObservable(
            self.session_service.get_session(self.session.app_name, self.session.user_id, self.session.id)
        )

    def session_now(self) -> AwaitableObservable[Session]:
        """The session as stored now, with this invocation's ``temp:`` keys in its state; fails with
        :class:`~rxllm.ConfigurationError` when it was deleted.

        Emits (or fails) the moment the store answers: nothing is scheduled on the trampoline.
        """
        return awaitable(self._with_session_now(emit_now))

    def _with_session_now(self, then: Callable[[Session], reactivex.Observable[T]]) -> reactivex.Observable[T]:
        """``session_now()`` and, the moment it emits, the Observable ``then(session)`` returns, in one
        subscription (what the runtimes do before every model call); fails as :meth:`session_now` does,
        and with what ``then`` raises."""
        session = self.session

        def pick(sessions: list[Session]) -> reactivex.Observable[T]:
            if sessions:
                return then(self._with_temp_state(sessions[-1]))
            return fail_now(
                ConfigurationError(
                    f"session {session.id!r} (app {session.app_name!r}, user {session.user_id!r}) no longer exists"
                )
            )

        get = get_now(self.session_service)
        if get is not None:  # an in-memory store answers during subscribe: no Observable to collect

            def fetched() -> reactivex.Observable[T]:
                found = get(session.app_name, session.user_id, session.id)
                return pick([found] if found is not None else [])

            return defer_now(fetched)
        return collect_then(self.session_service.get_session(session.app_name, session.user_id, session.id), pick)

    def _with_session_made_now(self, then: Callable[[Session], reactivex.Observable[T]]) -> reactivex.Observable[T]:
        """:meth:`_with_session_now` for an Observable its caller subscribes the moment it is made (a
        flow's step, pulled by ``concat_now``): a store that answers in place
        (:func:`~rxllm.agents._sessions.base.get_now`) is read now and ``then(session)`` called now,
        an exception either raises delivered as ``on_error`` on subscribe, as there; another store
        is read on subscribe, as there."""
        get = get_now(self.session_service)
        if get is None:
            return self._with_session_now(then)
        session = self.session
        try:
            found = get(*session_key(session))
            if found is not None:
                return then(self._with_temp_state(found))
        except Exception as exc:
            return fail_now(exc)
        return fail_now(
            ConfigurationError(
                f"session {session.id!r} (app {session.app_name!r}, user {session.user_id!r}) no longer exists"
            )
        )

    def _with_temp_state(self, session: Session) -> Session:
        with self._shared.lock:
            if not self._shared.temp_state:
                return session
            temp = copy.deepcopy(self._shared.temp_state)
        return session.model_copy(update={"state": {**session.state, **temp}})

    def _keep_temp_state(self, event: Event) -> None:
        delta = event.actions.state_delta
        if event.partial or not delta or not any(key.startswith(TEMP_PREFIX) for key in delta):
            return
        self._keep_temp_delta(delta)

    def _keep_temp_delta(self, delta: Mapping[str, Any]) -> None:
        """Keep the ``temp:`` keys of a stored event's ``delta`` in the invocation (see :meth:`_keep_temp_state`)."""
        with self._shared.lock:
            for key, value in delta.items():
                if not key.startswith(TEMP_PREFIX):
                    continue
                if value == STATE_REMOVED:
                    self._shared.temp_state.pop(key, None)
                else:
                    self._shared.temp_state[key] = copy.deepcopy(value)

    def append_event(self, event: Event) -> AwaitableObservable[Event]:
        """Store ``event`` in this run's session (partials are passed through unstored); emit the stored event.

        The event's ``temp:`` state keys are kept in the invocation (see the class docstring) and
        left out of the stored event and state; the emitted event keeps them in its
        ``state_delta``, as ADK Java's does (its session service never trims the event it emits;
        ADK Python's does)."""
        return awaitable(self._store(event))

    def _store(self, event: Event, on_stored: Callable[[Event], None] | None = None) -> reactivex.Observable[Event]:
        """:meth:`append_event`, with ``on_stored(stored)`` called before the stored event is passed on
        (an exception it raises is delivered as ``on_error``): one operator for the runtimes' stores."""
        self._keep_temp_state(event)
        if event.partial:
            stored_partial = self.session_service.append_event(self.session, event)
            return stored_partial if on_stored is None else tap_next(stored_partial, on_stored)
        shared = self._shared
        delta = event.actions.state_delta
        with_temp = bool(delta) and any(key.startswith(TEMP_PREFIX) for key in delta)

        def note(stored: Event) -> None:
            with shared.lock:
                shared.stored_ids.add(stored.id)
            if on_stored is not None and not with_temp:
                on_stored(stored)

        with shared.lock:
            shared.stored_ids.add(event.id)
        stored = tap_next(self.session_service.append_event(self.session, event), note)
        if not with_temp:
            return stored

        emitted = concat_map_now(stored, lambda e: emit_now(_with_temp_keys(delta, e)))
        return emitted if on_stored is None else tap_next(emitted, on_stored)

    def _store_then(
        self,
        event: Event,
        on_stored: Callable[[Event], None] | None,
        follow: Callable[[], reactivex.Observable[Event]],
        *,
        emit: bool = True,
    ) -> reactivex.Observable[Event]:
        """``then_now(self._store(event, on_stored), follow)`` (the stored event not passed on with
        ``emit=False``): the runtimes' store-then-go-on. With a store that answers during subscribe
        (:func:`~rxllm.agents._sessions.base.append_now`) one plain call stores the event, where
        :meth:`_store` builds an Observable per step of it; what happens, and in what order, is the same.
        """
        append = append_now(self.session_service)
        if append is None:
            stored = self._store(event, on_stored)
            return then_now(stored if emit else ignore_items(stored), follow)
        fields = event.__dict__  # (read once: each attribute read of a pydantic model is a slow lookup)
        with_temp = False
        if not fields["partial"]:
            delta = fields["actions"].state_delta
            with_temp = bool(delta) and any(key.startswith(TEMP_PREFIX) for key in delta)
            if with_temp:  # what _store does when called (_keep_temp_state), before anything is subscribed
                self._keep_temp_delta(delta)
            shared = self._shared
            with shared.lock:
                shared.stored_ids.add(fields["id"])
        return call_then(partial(self._stored_now, append, event, with_temp, on_stored), follow, emit=emit)

    def _stored_now(
        self,
        append: Callable[[Session, Event], Event],
        event: Event,
        with_temp: bool,
        on_stored: Callable[[Event], None] | None,
    ) -> Event:
        """The event of :meth:`_store`, stored now through ``append`` (see :meth:`_store_then`)."""
        stored = append(self.session, event)
        if not event.partial:
            if stored is not event:  # (the very event: its id is among them already, _store_then added it)
                shared = self._shared
                with shared.lock:
                    shared.stored_ids.add(stored.id)
            if with_temp:
                stored = _with_temp_keys(event.actions.state_delta, stored)
        if on_stored is not None:
            on_stored(stored)
        return stored

    def is_stored(self, event: Event) -> bool:
        """Whether ``event`` (by its id) was stored by :meth:`append_event` in this invocation."""
        with self._shared.lock:
            return event.id in self._shared.stored_ids

    def store_unstored(self, events: reactivex.Observable[Event]) -> reactivex.Observable[Event]:
        """``events`` with every non-partial event not stored yet in this invocation stored, in
        order, before it is passed on (the stored event is); partial and stored events pass as they are.

        ADK Java's ``Runner`` appends every non-partial event an agent emits; here each agent's
        run goes through this (:meth:`BaseAgent.run_async`), so an agent that stores its own
        events (``LlmAgent``, the workflow agents, a custom agent calling ``append_event``) is not
        stored twice, and a custom agent ported literally from Java, which only emits, has its
        events stored (and their state applied) before its next event or the next agent runs.
        """

        def store(event: Event) -> reactivex.Observable[Event]:
            if event.partial or self.is_stored(event):
                return emit_now(event)
            return self._store(event)

        return concat_map_now(events, store)


def _with_temp_keys(delta: dict[str, JsonValue], stored: Event) -> Event:
    """The stored event with the ``temp:`` keys of the delta it was appended with put back."""
    kept = stored.actions.state_delta
    merged = {k: (v if k.startswith(TEMP_PREFIX) else kept[k]) for k, v in delta.items() if k in kept
              or k.startswith(TEMP_PREFIX)}
    merged.update({k: v for k, v in kept.items() if k not in merged})
    return stored.model_copy(update={"actions": stored.actions.model_copy(update={"state_delta": merged})})


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

    Subclasses implement :meth:`_run_async_impl`: the Observable emits every event of the run.
    As ADK Java's ``Runner`` appends every non-partial event an agent emits, :meth:`run_async`
    stores each non-partial event the agent did not store itself, before passing it on (see
    :meth:`InvocationContext.store_unstored`): a port of a Java agent that only emits its events
    works as is. An agent that builds something from the session after an event (the
    persist-before-next-step rule the runtime keeps) stores it itself with ``ctx.append_event``
    before it goes on, and emits the stored event; such an event is not stored twice.

    >>> from rxllm.agents import LlmAgent
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
            run = defer_now(partial(self._run_async_impl, ctx))
            # (both a Direct: no awaitable() check, an ABC's isinstance)
            return AwaitableObservable(run if self._stores_its_events() else ctx.store_unstored(run))
        return awaitable(run_with_agent_callbacks(self, ctx, self._run_and_store))

    def _run_and_store(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        run = self._run_async_impl(ctx)
        return run if self._stores_its_events() else ctx.store_unstored(run)

    def _stores_its_events(self) -> bool:
        """Whether :meth:`_run_async_impl` stores every non-partial event it emits (``ctx.append_event``)
        before emitting it, so :meth:`run_async` has nothing to store (``LlmAgent``'s own run does)."""
        return False

    @abc.abstractmethod
    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        """The agent's own run in ``ctx`` (which already names this agent). Cold."""


class BasePlugin:
    """A plugin: override the hooks you need; every hook answers None by default.

    Args:
        name: the plugin's name (for error messages and logs).

    A hook may be written as ADK Java's (positional parameters, in the order below) or as ADK
    Python's, with keyword-only parameters of the same names (``async def
    before_model_callback(self, *, callback_context, llm_request)``): such a method, the
    subclass's own or one it inherits from a mixin, is wrapped once, when the subclass is
    defined, so the runtime calls both kinds the same way.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for hook, names in PLUGIN_HOOK_PARAMETERS.items():
            # the hook the class resolves to: its own, a mixin's (``class P(PythonHooks, BasePlugin)``)
            # or a plugin base class's (already adapted when that class was defined)
            method = next((klass.__dict__[hook] for klass in cls.__mro__ if hook in klass.__dict__), None)
            if inspect.isfunction(method):
                adapted = keyword_adapter(method, ("self", *names), f"plugin hook {hook}")
                if adapted is not method:
                    setattr(cls, hook, adapted)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def on_user_message_callback(self, invocation_context: InvocationContext, user_message: Content) -> object:
        """Before the user's message is stored: answer a :class:`~rxllm.Content` to store that instead."""
        return None

    def before_run_callback(self, invocation_context: InvocationContext) -> object:
        """Before the agent runs: answer a :class:`~rxllm.Content` to skip the run; it is emitted as the
        run's only event (authored ``"model"``, not stored, as in ADK)."""
        return None

    def on_event_callback(self, invocation_context: InvocationContext, event: Event) -> object:
        """For every event the run emits (after it was stored): answer an :class:`Event` to emit instead."""
        return None

    def after_run_callback(self, invocation_context: InvocationContext) -> object:
        """After the run's last event; an Observable or awaitable returned is waited for. No answer."""
        return None

    def before_agent_callback(self, agent: BaseAgent, callback_context: CallbackContext) -> object:
        """Before each agent: answer a :class:`~rxllm.Content` to skip the agent (see ``AgentCallback``)."""
        return None

    def after_agent_callback(self, agent: BaseAgent, callback_context: CallbackContext) -> object:
        """After each agent: answer a :class:`~rxllm.Content` to add an event."""
        return None

    def before_model_callback(self, callback_context: CallbackContext, llm_request: LlmRequest) -> object:
        """Before each model call: answer an :class:`~rxllm.LlmResponse` to skip the call, or an
        :class:`~rxllm.LlmRequest` to replace the request."""
        return None

    def after_model_callback(self, callback_context: CallbackContext, llm_response: LlmResponse) -> object:
        """For each model response: answer an :class:`~rxllm.LlmResponse` to replace it."""
        return None

    def on_model_error_callback(
        self, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> object:
        """When a model call fails: answer an :class:`~rxllm.LlmResponse` to use instead of the error."""
        return None

    def before_tool_callback(self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext) -> object:
        """Before each tool call: answer a dict to use as the tool's result without calling it."""
        return None

    def after_tool_callback(
        self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> object:
        """After each tool call: answer a dict to replace the tool's result."""
        return None

    def on_tool_error_callback(
        self, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> object:
        """When a tool fails: answer a dict to use as its result instead of the error response."""
        return None


def _content_answer(kind: str) -> Callable[[object], Content | None]:
    def accept(answer: object) -> Content | None:
        if isinstance(answer, Content):
            return answer if answer.role is not None else answer.model_copy(update={"role": "model"})
        raise ConfigurationError(f"{kind} returned {type(answer).__name__}; expected None or a Content")

    return accept


def _agent_step(
    agent: BaseAgent, ctx: InvocationContext, kind: str, callbacks: tuple[AgentCallback, ...], *, before: bool
) -> Callable[[list[bool]], reactivex.Observable[Event]]:
    """The Observable of one callback phase: at most one stored event; ``answered[0]`` tells whether one answered."""

    def phase(answered: list[bool]) -> reactivex.Observable[Event]:
        def with_session(session: Session) -> reactivex.Observable[Event]:
            state = State(session.state)
            callback_ctx = CallbackContext(ctx, state)
            calls: list[tuple[object, Call]] = []
            for plugin in ctx.plugins:
                hook = plugin.before_agent_callback if before else plugin.after_agent_callback
                calls.append((hook, partial(hook, agent, callback_ctx)))
            for callback in callbacks:
                calls.append((callback, partial(callback, callback_ctx)))

            def store(content: Content | None) -> reactivex.Observable[Event]:
                if content is None and not state.has_delta():
                    return nothing_now()
                answered[0] = content is not None
                event = Event(
                    invocation_id=ctx.invocation_id,
                    author=agent.name,
                    branch=ctx.branch,
                    content=content,
                    actions=EventActions(state_delta=state.take_delta()),
                )
                return ctx.append_event(event)

            def store_first(answers: list[Content]) -> reactivex.Observable[Event]:
                return store(answers[0] if answers else None)

            answers = callback_chain(
                kind, f"agent {agent.name!r}", calls, _content_answer(kind), loop=ctx.tool_runtime.loop
            )
            return answers.pipe(ops.to_list(), ops.flat_map(store_first))

        return ctx.session_now().pipe(ops.flat_map(with_session))

    return phase


def run_with_agent_callbacks(
    agent: BaseAgent, ctx: InvocationContext, run: Callable[[InvocationContext], reactivex.Observable[Event]]
) -> reactivex.Observable[Event]:
    """``run(ctx)`` between the before- and after-agent callbacks (see the module docstring). Cold."""
    before = _agent_step(agent, ctx, "before_agent_callback", agent.before_agent_callbacks, before=True)
    after = _agent_step(agent, ctx, "after_agent_callback", agent.after_agent_callbacks, before=False)

    def start(_: object) -> reactivex.Observable[Event]:
        answered = [False]

        def main() -> reactivex.Observable[Event]:
            if answered[0] or ctx.is_cancelled:
                ctx.end_invocation = answered[0]
                return nothing_now()
            return then_now(run(ctx), lambda: after([False]))

        return then_now(before(answered), main)

    return reactivex.defer(start)
