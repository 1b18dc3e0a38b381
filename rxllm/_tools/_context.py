"""The views of a run that callbacks and tools get: ``ReadonlyContext``, ``CallbackContext``, ``ToolContext``.

They live below both runtimes (``rxllm.agents`` builds them from its ``InvocationContext``;
``rxllm.service`` builds standalone tool contexts), so a tool written once runs under either.
They see the run only through :class:`InvocationView` and :class:`SessionView`, two protocols
``rxllm.agents``' ``InvocationContext`` and ``Session`` satisfy, and its services through
``ArtifactStore`` and ``MemorySearch`` (``._services``).
"""

from __future__ import annotations

import os as _os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

from pydantic import JsonValue
from reactivex import operators as ops

from .._core.errors import ConfigurationError
from .._core.types import Content, Part
from .._rx.aio import AwaitableObservable, MaybeObservable, awaitable
from ._confirmation import ToolConfirmation
from ._services import ArtifactStore, MemorySearch, SearchMemoryResponse
from ._state import State

__all__ = [
    "CallbackContext",
    "InvocationView",
    "ReadonlyContext",
    "SessionKey",
    "SessionView",
    "ToolActions",
    "ToolContext",
    "new_invocation_id",
]


_BATCH = 64  # ids made per read of the OS's random source
_UUID_BYTES = 16
# per 16 bytes of a batch: the version nibble (4) and the RFC 4122 variant bits (10) set...
_VERSION_BITS = sum(((0x4 << 76) | (0x8 << 60)) << (128 * i) for i in range(_BATCH))
# ...over whatever the random bits held there
_KEPT_BITS = sum((~((0xF << 76) | (0xC << 60)) & ((1 << 128) - 1)) << (128 * i) for i in range(_BATCH))
_ready: list[str] = []
_urandom = _os.urandom


# a batch's 32 hex digits per id cut as 8-4-4-4-12, and each id of those groups joined by "-"
_GROUPS = itemgetter(
    *(
        slice(at + lo, at + hi)
        for at in range(0, 32 * _BATCH, 32)
        for lo, hi in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))
    )
)
_IDS = itemgetter(*(slice(at, at + 36) for at in range(0, 37 * _BATCH, 37)))


def _refill() -> None:
    """Add a batch of ids to ``_ready``: one ``os.urandom`` read (as ``uuid.uuid4``'s) for ``_BATCH`` ids,
    formatted as a whole (no Python step per id)."""
    value = (int.from_bytes(_urandom(_UUID_BYTES * _BATCH), "big") & _KEPT_BITS) | _VERSION_BITS
    _ready.extend(_IDS("-".join(_GROUPS(f"{value:0{32 * _BATCH}x}"))))


def random_uuid4() -> str:
    """A random UUID4 string, as ``str(uuid.uuid4())`` gives, in a fraction of its time.

    The bits come from ``os.urandom`` as ``uuid.uuid4``'s do, read for a batch of ids at a time;
    a forked child drops the ids its parent had made ready (it reads its own), and seeding
    :mod:`random` changes nothing here. ``list.pop`` and ``list.extend`` are atomic, so threads
    never share an id.

    >>> import uuid
    >>> uuid.UUID(random_uuid4()).version
    4
    """
    while True:  # (another thread may take the batch this one just made)
        try:
            return _ready.pop()
        except IndexError:
            _refill()


if hasattr(_os, "register_at_fork"):  # (every POSIX Python; Windows has no fork)
    _os.register_at_fork(after_in_child=_ready.clear)


def new_invocation_id() -> str:
    """A fresh invocation id (``e-`` + a UUID4, as ADK)."""
    return "e-" + random_uuid4()


class SessionKey(Protocol):
    """Which session: its id, app and user (``rxllm.agents.Session`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def app_name(self) -> str: ...

    @property
    def user_id(self) -> str: ...


class SessionView(SessionKey, Protocol):
    """What a context shows of the session (``rxllm.agents.Session`` is one)."""

    @property
    def state(self) -> dict[str, JsonValue]: ...

    @property
    def events(self) -> Sequence[Any]: ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class InvocationView(Protocol):
    """What a context reads of the run (``rxllm.agents.InvocationContext`` is one)."""

    @property
    def invocation_id(self) -> str: ...

    @property
    def agent(self) -> _Named: ...

    @property
    def user_content(self) -> Content | None: ...

    @property
    def session(self) -> SessionView: ...


@dataclass(frozen=True)
class _NoSession:
    """The session of a standalone context: empty ids, no events, an empty state."""

    id: str = ""
    app_name: str = ""
    user_id: str = ""
    state: dict[str, JsonValue] = field(default_factory=dict)
    events: tuple[Any, ...] = ()


class ReadonlyContext:
    """A read-only view of the run, given to dynamic instructions."""

    _artifact_service: ArtifactStore | None = None
    _memory_service: MemorySearch | None = None
    _invocation_plugins: tuple[object, ...] = ()  # the run's plugins (AgentTool(include_plugins=True) reads them)
    _toolset_scopes: Any = None  # the run's ToolsetScopes (._scope): where toolsets keep their sessions
    _invocation_agent: Any = None  # the agent being run (an MCP toolset's sampling asks its model)

    def __init__(self, invocation: InvocationView, state: State) -> None:
        self._invocation_id = invocation.invocation_id  # (what _set_view sets, without its call per context)
        self._agent_name = invocation.agent.name
        self._user_content = invocation.user_content
        self._session = invocation.session
        self._state = state
        # the run's optional services (rxllm.agents' InvocationContext has both; None when not configured)
        self._artifact_service = getattr(invocation, "artifact_service", None)
        self._memory_service = getattr(invocation, "memory_service", None)
        self._invocation_plugins = tuple(getattr(invocation, "plugins", ()))
        self._toolset_scopes = getattr(invocation, "toolset_scopes", None)
        self._invocation_agent = invocation.agent

    def _set_view(
        self, invocation_id: str, agent_name: str, user_content: Content | None, session: SessionView, state: State
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
    def session(self) -> SessionView:
        """The session as it was when the run started (an ``rxllm.agents.Session`` under a runner)."""
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

    def _artifacts(self) -> ArtifactStore:
        if self._artifact_service is None:
            raise ConfigurationError(
                "no artifact service: give the Runner one (Runner(..., artifact_service=InMemoryArtifactService()))"
            )
        return self._artifact_service

    def save_artifact(self, filename: str, artifact: Part) -> AwaitableObservable[int]:
        """Save a new version of the artifact ``filename`` in this session (``user:`` names: the user's).

        Returns a cold Observable: subscribing saves and emits the version (0 for the first); from a
        synchronous tool, call ``.run()``. In a tool, the version is also recorded in the
        function-response event's ``actions.artifact_delta``. Fails with
        :class:`~rxllm.ConfigurationError` without an artifact service or for a bad name.
        """
        session = self._session
        return self._artifacts().save_artifact(session.app_name, session.user_id, session.id, filename, artifact)

    def load_artifact(self, filename: str, version: int | None = None) -> MaybeObservable[Part]:
        """Emit the artifact (the latest version when ``version`` is None), or complete empty when there is none."""
        session = self._session
        return self._artifacts().load_artifact(session.app_name, session.user_id, session.id, filename, version)

    def list_artifacts(self) -> AwaitableObservable[list[str]]:
        """Emit the names of the artifacts this session sees (its own and the user's ``user:`` ones), sorted."""
        session = self._session
        return self._artifacts().list_artifact_keys(session.app_name, session.user_id, session.id)


@dataclass
class ToolActions:
    """What a tool may ask for, ADK's ``tool_context.actions`` (mutable while the tool runs).

    Attributes:
        skip_summarization: end the turn with the tool's response: no further model call.
        transfer_to_agent: the agent to hand over to (an agent run continues with it; recorded on the
            event).
        escalate: escalate to the parent agent (a ``LoopAgent`` stops; recorded on the event).
        artifact_delta: artifact name to the version the tool saved (filled by ``save_artifact``).
        end_invocation: make no further model call in this agent's flow after this step (ADK
            Java's ``actions().setEndInvocation(true)``; recorded on the event).
        requested_tool_confirmations: function-call id to the confirmation asked for it (filled by
            ``ToolContext.request_confirmation``; ADK's ``requestedToolConfirmations``).
    """

    skip_summarization: bool = False
    transfer_to_agent: str | None = None
    escalate: bool = False
    artifact_delta: dict[str, int] = field(default_factory=dict)
    end_invocation: bool = False
    requested_tool_confirmations: dict[str, ToolConfirmation] = field(default_factory=dict)


class ToolContext(CallbackContext):
    """What a tool gets: the run, the call it answers, the session state and its actions.

    The agent runtime builds one per call from the run's ``InvocationContext``. A tool called with
    no agent run around it (by :class:`rxllm.service.AiService`, or directly in a test) gets one
    from :meth:`standalone`.
    """

    def __init__(
        self,
        invocation: InvocationView,
        state: State,
        function_call_id: str | None,
        tool_confirmation: ToolConfirmation | None = None,
    ) -> None:
        super().__init__(invocation, state)
        self.function_call_id = function_call_id
        self.actions: ToolActions = ToolActions()
        self.tool_confirmation: ToolConfirmation | None = tool_confirmation
        """The client's answer when this call runs again after a confirmation request (ADK's
        ``toolConfirmation()``); None on the first run."""

    def request_confirmation(self, hint: str | None = None, payload: JsonValue | None = None) -> None:
        """Ask the client to confirm this call before it runs (ADK's ``requestConfirmation``).

        Records the request in ``actions.requested_tool_confirmations``; the tool then returns
        what the model should see meanwhile (for example ``{"error": "waiting for approval"}``).
        The runtime emits an ``adk_request_confirmation`` call for the client (see
        ``rxllm._tools._confirmation``); when the client answers, the call runs again with
        :attr:`tool_confirmation` set.

        Raises:
            ConfigurationError: when the context answers no function call.
        """
        if not self.function_call_id:
            raise ConfigurationError("request_confirmation needs the id of the function call the tool answers")
        self.actions.requested_tool_confirmations[self.function_call_id] = ToolConfirmation(
            hint=hint or "", payload=payload
        )

    def save_artifact(self, filename: str, artifact: Part) -> AwaitableObservable[int]:
        """Save an artifact version, recorded in ``actions.artifact_delta``; see ``CallbackContext.save_artifact``."""

        def record(version: int) -> None:
            self.actions.artifact_delta[filename] = version

        return awaitable(super().save_artifact(filename, artifact).pipe(ops.do_action(on_next=record)))

    def search_memory(self, query: str) -> AwaitableObservable[SearchMemoryResponse]:
        """Search the user's memory (the run's memory service) for ``query``; emit the response.

        Returns a cold Observable (from a synchronous tool, call ``.run()``). Fails with
        :class:`~rxllm.ConfigurationError` when the run has no memory service.
        """
        if self._memory_service is None:
            raise ConfigurationError(
                "no memory service: give the Runner one (Runner(..., memory_service=InMemoryMemoryService()))"
            )
        session = self._session
        return self._memory_service.search_memory(session.app_name, session.user_id, query)

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
        context._set_view(run_id, agent_name, user_content, _NoSession(), state if state is not None else State())
        context.function_call_id = function_call_id
        context.actions = ToolActions()
        context.tool_confirmation = None
        return context
