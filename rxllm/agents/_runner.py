"""``Runner``: runs an agent on a session, one run at a time per session."""

from __future__ import annotations

import logging

import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops

from .._aio import AwaitableObservable, awaitable
from .._artifacts import BaseArtifactService, InMemoryArtifactService
from .._errors import ConfigurationError, RxLlmError
from .._memory import BaseMemoryService, InMemoryMemoryService
from .._tools import ToolRuntime, check_timeout
from .._types import Content
from ._agent import BaseAgent
from ._context import InvocationContext
from ._event import Event
from ._run_config import RunConfig
from ._rx import fail_now, on_dispose
from ._sessions import BaseSessionService, InMemorySessionService, Session

__all__ = ["InMemoryRunner", "Runner"]

logger = logging.getLogger("rxllm.agents")

class Runner:
    """Runs an agent on sessions of one app, as ADK's ``Runner``.

    Args:
        agent: the agent to run.
        app_name: the app the sessions belong to.
        session_service: where sessions and their events are stored.
        artifact_service: where tools keep artifacts (``ToolContext.save_artifact`` ...) and where
            ``{artifact.name}`` in an instruction is read from; None: the runs have none.
        memory_service: what ``ToolContext.search_memory`` and the ``load_memory`` tool search;
            None: the runs have none. Add a finished session with its ``add_session_to_memory``.

        tool_scheduler: where synchronous tools run (default: the process-wide tool pool,
            ``rxllm-tool_N`` threads, ``DEFAULT_TOOL_WORKERS`` = 32 or ``RXLLM_TOOL_WORKERS``).
            Never the thread that delivered the model's response.
        tool_timeout: seconds a tool call may take when its tool sets no ``timeout``; past it the
            model gets an error result for the call. None (the default): no limit.

    One writer per session: runs on one session never interleave. A run starts only after every
    earlier run on that session terminated or was disposed, whichever ``Runner`` (sharing this
    session service) started it (:meth:`BaseSessionService.serialize_run`); so a request never
    holds a tool call without its result.
    """

    def __init__(
        self,
        agent: BaseAgent,
        app_name: str,
        session_service: BaseSessionService,
        *,
        artifact_service: BaseArtifactService | None = None,
        memory_service: BaseMemoryService | None = None,
        tool_scheduler: rx_abc.SchedulerBase | None = None,
        tool_timeout: float | None = None,
    ) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"Runner needs a BaseAgent, got {type(agent).__name__}")
        if not isinstance(session_service, BaseSessionService):
            raise ConfigurationError(f"Runner needs a BaseSessionService, got {type(session_service).__name__}")
        self._agent = agent
        self._app_name = app_name
        self._session_service = session_service
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        check_timeout(tool_timeout, "tool_timeout")
        self._tool_scheduler = tool_scheduler
        self._tool_timeout = tool_timeout

    @property
    def agent(self) -> BaseAgent:
        """The agent this runner runs."""
        return self._agent

    @property
    def app_name(self) -> str:
        """The app the sessions belong to."""
        return self._app_name

    @property
    def session_service(self) -> BaseSessionService:
        """Where sessions are stored."""
        return self._session_service

    def run_async(
        self,
        user_id: str,
        session_id: str,
        new_message: Content,
        run_config: RunConfig | None = None,
    ) -> AwaitableObservable[Event]:
        """Run the agent on the session with a new user message.

        Returns a cold Observable. Subscribing waits for any earlier run on the same session,
        then stores ``new_message`` as a user event (not emitted, as in ADK), then runs the agent
        and emits every event it produces: partial events as they stream (never stored), and
        every non-partial event after it was stored. It completes when the agent's turn is over
        and fails with the run's error (a model or transport error,
        :class:`~rxllm.LimitExceededError`, :class:`~rxllm.UnsupportedOperationError` for a BIDI
        run on a model without live sessions, :class:`~rxllm.ConfigurationError` for a missing
        session). Disposing cancels the in-flight model call (its subscription is disposed, which
        closes the connection), runs no further tools or model calls, and lets the next queued
        run on the session start. A synchronous tool already running finishes; its result is
        dropped.

        >>> from reactivex import operators as ops
        >>> from rxllm import Chunk, Content, Part
        >>> from rxllm.agents import InMemoryRunner, LlmAgent
        >>> from rxllm.testing import ScriptedLlm, scripted_turn
        >>> runner = InMemoryRunner(LlmAgent("bot", ScriptedLlm([scripted_turn(Chunk(text_delta="Hi!"))])))
        >>> _ = runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
        >>> events = runner.run_async("u1", "s1", Content(role="user", parts=(Part.from_text("Hello"),))).pipe(
        ...     ops.to_list()).run()
        >>> [(e.author, e.text(), e.is_final_response()) for e in events]
        [('bot', 'Hi!', True)]
        """
        if not isinstance(new_message, Content):
            raise ConfigurationError(f"new_message must be a Content, got {type(new_message).__name__}")
        message = new_message if new_message.role is not None else new_message.model_copy(update={"role": "user"})
        config = run_config or RunConfig()
        app_name = self._app_name
        service = self._session_service
        agent = self._agent

        def run_on(
            sessions: list[Session], contexts: list[InvocationContext], runtime: ToolRuntime
        ) -> reactivex.Observable[Event]:
            if not sessions:
                return fail_now(
                    ConfigurationError(
                        f"session {session_id!r} not found for app {app_name!r} and user {user_id!r} "
                        "(create it with the session service first)"
                    )
                )
            ctx = InvocationContext(
                agent=agent,
                session=sessions[-1],
                session_service=service,
                run_config=config,
                user_content=message,
                artifact_service=self.artifact_service,
                memory_service=self.memory_service,
                tool_runtime=runtime,
            )
            contexts.append(ctx)
            user_event = Event(invocation_id=ctx.invocation_id, author="user", content=message)

            def run_agent(_: object) -> reactivex.Observable[Event]:
                return agent.run_async(ctx)

            store_user_event = ctx.append_event(user_event).pipe(ops.ignore_elements())
            return reactivex.concat(store_user_event, reactivex.defer(run_agent))

        def start(runtime: ToolRuntime) -> reactivex.Observable[Event]:
            contexts: list[InvocationContext] = []

            def cancel() -> None:
                for ctx in contexts:
                    ctx.cancel()

            def run_on_session(sessions: list[Session]) -> reactivex.Observable[Event]:
                return run_on(sessions, contexts, runtime)

            run = service.get_session(app_name, user_id, session_id).pipe(ops.to_list(), ops.flat_map(run_on_session))
            return on_dispose(run, cancel)

        def subscribe(
            observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            # Captured now, on the subscribing thread: async tools run on the subscriber's loop.
            runtime = ToolRuntime.capture(scheduler=self._tool_scheduler, timeout=self._tool_timeout)

            def begin(_: object) -> reactivex.Observable[Event]:
                return start(runtime)

            def on_error(error: Exception) -> None:
                observer.on_error(_as_rxllm_error(error))

            run = service.serialize_run(app_name, user_id, session_id, reactivex.defer(begin))
            return run.subscribe(observer.on_next, on_error, observer.on_completed, scheduler=scheduler)

        return awaitable(reactivex.create(subscribe))


def _as_rxllm_error(error: Exception) -> RxLlmError:
    """Every failure reaching a subscriber is an ``RxLlmError``: a foreign one (a custom session
    service's, a custom model's, a bare json or pydantic error) is wrapped, chained as ``__cause__``."""
    if isinstance(error, RxLlmError):
        return error
    mapped = RxLlmError(f"the run failed with {type(error).__name__}: {error}")
    mapped.__cause__ = error
    return mapped


class InMemoryRunner(Runner):
    """A :class:`Runner` with its own :class:`InMemorySessionService` (tests, demos), as ADK's.

    Args:
        agent: the agent to run.
        app_name: the app name; ``"InMemoryRunner"`` by default, as in ADK.

    As ADK's, it also has an :class:`InMemoryArtifactService` and an :class:`InMemoryMemoryService`.
    """

    def __init__(
        self,
        agent: BaseAgent,
        *,
        app_name: str = "InMemoryRunner",
        tool_scheduler: rx_abc.SchedulerBase | None = None,
        tool_timeout: float | None = None,
    ) -> None:
        super().__init__(
            agent,
            app_name,
            InMemorySessionService(),
            artifact_service=InMemoryArtifactService(),
            memory_service=InMemoryMemoryService(),
            tool_scheduler=tool_scheduler,
            tool_timeout=tool_timeout,
        )
