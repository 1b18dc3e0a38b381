"""Contexts: the invocation (one run), and the views callbacks and tools get of it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import reactivex
from pydantic import JsonValue

from .._errors import LimitExceededError
from .._types import Content
from ._event import Event
from ._run_config import RunConfig
from ._sessions import BaseSessionService, Session
from ._state import State

if TYPE_CHECKING:
    from ._agent import BaseAgent

__all__ = ["CallbackContext", "InvocationContext", "ReadonlyContext", "ToolActions", "ToolContext"]


def new_invocation_id() -> str:
    """A fresh invocation id (``e-`` + a UUID4, as ADK)."""
    return "e-" + str(uuid.uuid4())


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
        branch: the agent branch (``agent_1.agent_2``), None for a root agent.

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
    ) -> None:
        self.invocation_id: str = invocation_id or new_invocation_id()
        self.agent = agent
        self.session = session
        self.session_service = session_service
        self.run_config: RunConfig = run_config or RunConfig()
        self.user_content = user_content
        self.branch = branch
        self._lock = threading.Lock()
        self._llm_calls = 0
        self._cancelled = threading.Event()

    @property
    def is_cancelled(self) -> bool:
        """Whether the run was disposed: no further model calls, tools or stores may start."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Mark the run disposed (idempotent)."""
        self._cancelled.set()

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
        with self._lock:
            return self._llm_calls

    def increment_llm_call_count(self) -> None:
        """Count one model call.

        Raises:
            LimitExceededError: when the count goes past ``run_config.max_llm_calls`` (if positive).
        """
        limit = self.run_config.max_llm_calls
        with self._lock:
            self._llm_calls += 1
            count = self._llm_calls
        if 0 < limit < count:
            raise LimitExceededError(
                f"max_llm_calls limit of {limit} exceeded: agent {self.agent.name!r} asked for model call "
                f"#{count} in invocation {self.invocation_id} (raise RunConfig.max_llm_calls if this is expected)"
            )

    def current_session(self) -> reactivex.Observable[Session]:
        """The session as stored now (empty when it was deleted meanwhile)."""
        return self.session_service.get_session(self.session.app_name, self.session.user_id, self.session.id)

    def append_event(self, event: Event) -> reactivex.Observable[Event]:
        """Store ``event`` in this run's session (partials are passed through unstored); emit the stored event."""
        return self.session_service.append_event(self.session, event)


class ReadonlyContext:
    """A read-only view of the run, given to dynamic instructions."""

    def __init__(self, invocation: InvocationContext, state: State) -> None:
        agent_name = invocation.agent.name
        self._set_view(invocation.invocation_id, agent_name, invocation.user_content, invocation.session, state)

    def _set_view(
        self, invocation_id: str, agent_name: str, user_content: Content | None, session: Session, state: State
    ) -> None:
        self._invocation_id = invocation_id
        self._agent_name = agent_name
        self._user_content = user_content
        self._session = session
        self._state = state

    @property
    def invocation_id(self) -> str:
        """The run's invocation id."""
        return self._invocation_id

    @property
    def agent_name(self) -> str:
        """The name of the agent being run."""
        return self._agent_name

    @property
    def user_content(self) -> Content | None:
        """The user message that started the run."""
        return self._user_content

    @property
    def session(self) -> Session:
        """The session as it was when the run started."""
        return self._session

    @property
    def state(self) -> Mapping[str, JsonValue]:
        """The session state (read only here)."""
        return self._state


class CallbackContext(ReadonlyContext):
    """What a model callback gets: the run, and the session state to read and change.

    Changes made through :attr:`state` are attached as ``actions.state_delta`` to the next
    stored event of the step (the model's final event, or the function-response event).
    """

    @property
    def state(self) -> State:
        """The session state; setting keys records a state delta."""
        return self._state


@dataclass
class ToolActions:
    """What a tool may ask for, ADK's ``tool_context.actions`` (mutable while the tool runs).

    Attributes:
        skip_summarization: end the turn with the tool's response: no further model call.
        transfer_to_agent: the agent to hand over to (recorded on the event, not acted on).
        escalate: escalate to the parent agent (recorded on the event, not acted on).
    """

    skip_summarization: bool = False
    transfer_to_agent: str | None = None
    escalate: bool = False


class ToolContext(CallbackContext):
    """What a tool gets: the run, the call it answers, the session state and its actions.

    The runtime builds one per call from the run's :class:`InvocationContext`. A tool called with
    no agent run around it (by :class:`rxllm.service.AiService`, or directly in a test) gets one
    from :meth:`standalone`.
    """

    def __init__(self, invocation: InvocationContext, state: State, function_call_id: str | None) -> None:
        super().__init__(invocation, state)
        self.function_call_id = function_call_id
        self.actions: ToolActions = ToolActions()

    @classmethod
    def standalone(
        cls,
        *,
        state: State | None = None,
        function_call_id: str | None = None,
        invocation_id: str | None = None,
        agent_name: str = "",
        user_content: Content | None = None,
    ) -> ToolContext:
        """A context for a tool called outside an agent run: no agent, no session service.

        Args:
            state: the state the tool reads and changes (a fresh empty :class:`State` by default);
                pass one ``State`` to several calls to let later calls see what earlier ones set.
                Nothing is persisted: the caller keeps the state, and its changes, as it likes.
            function_call_id: the id of the call the tool answers.
            invocation_id: what :attr:`invocation_id` reports (a fresh id by default).
            agent_name: what :attr:`agent_name` reports: the name of whatever called the tool.
            user_content: the user message the call answers, if any.

        There is no session: :attr:`session` is an empty snapshot (empty id, app and user, no
        events, no state); the tool's state is :attr:`state`. ``actions`` are recorded as usual;
        it is up to the caller to act on them.

        >>> context = ToolContext.standalone(function_call_id="call_1")
        >>> context.state["seen"] = True
        >>> context.function_call_id, context.state.delta(), context.actions.skip_summarization
        ('call_1', {'seen': True}, False)
        """
        context = cls.__new__(cls)
        run_id = invocation_id or new_invocation_id()
        no_session = Session(id="", app_name="", user_id="")  # its own: a snapshot's state dict is mutable
        context._set_view(run_id, agent_name, user_content, no_session, state if state is not None else State())
        context.function_call_id = function_call_id
        context.actions = ToolActions()
        return context
