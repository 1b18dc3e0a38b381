"""The invocation context (one run); the views callbacks and tools get of it live in ``rxllm._tools``."""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import reactivex

from ..._core.errors import ConfigurationError, LimitExceededError
from ..._core.types import Content, UsageMetadata
from ..._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ..._rx.direct import collect_then, emit_now, fail_now
from ..._telemetry.otel import add_usage
from ..._tools import CallbackContext, ReadonlyContext, ToolActions, ToolContext, ToolRuntime, new_invocation_id
from .._sessions.base import BaseSessionService, Session
from .._sessions.event import Event
from .run_config import RunConfig

if TYPE_CHECKING:
    from .._artifacts.service import BaseArtifactService
    from .._memory.service import BaseMemoryService
    from .agent import BaseAgent
    from .plugins import BasePlugin

__all__ = [
    "CallbackContext",
    "InvocationContext",
    "ReadonlyContext",
    "ToolActions",
    "ToolContext",
    "new_invocation_id",
]


class _Shared:
    """What every agent's context of one invocation shares."""

    __slots__ = ("cancelled", "llm_calls", "lock", "usage")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.llm_calls = 0
        self.usage: UsageMetadata | None = None
        self.cancelled = threading.Event()


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
        end_invocation: set by a before-agent callback that answered: the agent's own run is skipped.

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
    ) -> None:
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
        child = copy.copy(self)
        child.agent = agent
        child.branch = branch
        child.end_invocation = False
        return child

    @property
    def is_cancelled(self) -> bool:
        """Whether the run was disposed: no further model calls, tools or stores may start."""
        return self._shared.cancelled.is_set()

    def cancel(self) -> None:
        """Mark the run disposed (idempotent)."""
        self._shared.cancelled.set()

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
        """The session as stored now; fails with :class:`~rxllm.ConfigurationError` when it was deleted.

        Emits (or fails) the moment the store answers: nothing is scheduled on the trampoline.
        """

        def pick(sessions: list[Session]) -> reactivex.Observable[Session]:
            if sessions:
                return emit_now(sessions[-1])
            return fail_now(
                ConfigurationError(
                    f"session {self.session.id!r} (app {self.session.app_name!r}, user {self.session.user_id!r}) "
                    "no longer exists"
                )
            )

        return awaitable(collect_then(self.current_session(), pick))

    def append_event(self, event: Event) -> AwaitableObservable[Event]:
        """Store ``event`` in this run's session (partials are passed through unstored); emit the stored event."""
        return awaitable(self.session_service.append_event(self.session, event))
