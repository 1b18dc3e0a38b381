"""``Runner``: runs an agent on a session, one run at a time per session."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Self

import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops

from ..._core.errors import ConfigurationError, RxLlmError
from ..._core.types import Content
from ..._models.prompt import as_user_content
from ..._rx.aio import AwaitableObservable, awaitable
from ..._rx.direct import Direct, collect_then, defer_now, emit_now, fail_now, ignore_items, on_dispose, then_now
from ..._telemetry.otel import current_context, within
from ..._tools import ToolRuntime, check_timeout
from ..._tools._scope import ResourceScope, ToolsetScopes, closing_after
from .._agents.llm_agent import LlmAgent
from .._artifacts.service import BaseArtifactService, InMemoryArtifactService
from .._invocation.base import BaseAgent, BasePlugin, InvocationContext
from .._invocation.live_request_queue import LiveRequestQueue
from .._invocation.plugins import after_run, before_run, on_event, on_user_message
from .._invocation.run_config import RunConfig, StreamingMode
from .._memory.service import BaseMemoryService, InMemoryMemoryService
from .._sessions.base import BaseSessionService, InMemorySessionService, Session, get_now
from .._sessions.event import Event, prevalidated_event
from .._sessions.run_lanes import SessionKey, SessionLanes, session_lanes
from .compaction import (
    EventsCompactionConfig,
    LlmEventSummarizer,
    SlidingWindowEventCompactor,
    TailRetentionEventCompactor,
)

__all__ = ["InMemoryRunner", "Runner", "agent_to_run"]

logger = logging.getLogger("rxllm.agents")


def run_invocation(ctx: InvocationContext, message: Content, history: Sequence[Event]) -> reactivex.Observable[Event]:
    """One invocation of ``ctx.agent``'s tree on the user's ``message`` (ADK's ``Runner.runAsync`` body).

    The plugins' ``on_user_message_callback`` may replace the message; it is stored as a user
    event (not emitted); a plugin's ``before_run_callback`` answer replaces the run; otherwise the
    agent that answers the turn runs (:func:`agent_to_run`: the agent that last answered, or the
    one whose long-running call the message answers); every event goes through the plugins'
    ``on_event_callback``; then their ``after_run_callback``.
    """
    root = ctx.agent

    def store_and_run(content: Content) -> reactivex.Observable[Event]:
        ctx.user_content = content
        user_event = (  # a Content instance is what validation would keep as it is
            prevalidated_event({"invocation_id": ctx.invocation_id, "author": "user", "content": content})
            if type(content) is Content
            else Event(invocation_id=ctx.invocation_id, author="user", content=content)
        )

        def run_agent() -> reactivex.Observable[Event]:
            if not ctx.plugins:
                return agent_to_run(root, (*history, user_event)).run_async(ctx)

            def agent_unless_answered(answers: list[Event]) -> reactivex.Observable[Event]:
                if answers:
                    return emit_now(answers[0])
                return agent_to_run(root, (*history, user_event)).run_async(ctx)

            events = collect_then(before_run(ctx), agent_unless_answered)
            return then_now(on_event(ctx, events), lambda: after_run(ctx))

        return ctx._store_then(user_event, None, run_agent, emit=False)

    if not ctx.plugins:
        return store_and_run(message)
    return on_user_message(ctx, message).pipe(ops.flat_map(store_and_run))


class Runner:
    """Runs an agent on sessions of one app, as ADK's ``Runner``.

    Args:
        agent: the root agent of the tree to run.
        app_name: the app the sessions belong to.
        session_service: where sessions and their events are stored.
        artifact_service: where tools keep artifacts (``ToolContext.save_artifact`` ...) and where
            ``{artifact.name}`` in an instruction is read from; None: the runs have none.
        memory_service: what ``ToolContext.search_memory`` and the ``load_memory`` tool search;
            None: the runs have none. Add a finished session with its ``add_session_to_memory``.
        plugins: :class:`BasePlugin` instances applied to every agent, model and tool call of
            every run, before the agents' own callbacks.

        tool_scheduler: where synchronous tools run (default: the process-wide tool pool,
            ``rxllm-tool_N`` threads, ``DEFAULT_TOOL_WORKERS`` = 32 or ``RXLLM_TOOL_WORKERS``).
            Never the thread that delivered the model's response.
        tool_timeout: seconds a tool call may take when its tool sets no ``timeout``; past it the
            model gets an error result for the call. None (the default): no limit.
        events_compaction_config: compact long sessions (ADK's ``EventsCompactionConfig``): with
            a sliding window, after every invocation, inside the session's run lane, a
            :class:`SlidingWindowEventCompactor` may summarise older invocations into one
            compaction event (a summarizer failure then fails the run, after its events were
            delivered); with tail retention, before every model call of an ``LlmAgent`` a
            :class:`TailRetentionEventCompactor` may summarise all but the latest events (a
            summarizer failure fails that step). See ``rxllm.agents._runners.compaction``.

    Toolset sessions: an MCP toolset opens one session per runner (or per invocation, see
    ``McpToolset(session_scope=...)``) on first use; :meth:`close` (or ``await``
    :meth:`aclose`) ends the ones this runner opened, a stdio server's process reaped. A runner
    is also a context manager (``with Runner(...) as runner:``, ``async with``).

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
        plugins: Sequence[BasePlugin] = (),
        tool_scheduler: rx_abc.SchedulerBase | None = None,
        tool_timeout: float | None = None,
        events_compaction_config: EventsCompactionConfig | None = None,
    ) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"Runner needs a BaseAgent, got {type(agent).__name__}")
        if not isinstance(session_service, BaseSessionService):
            raise ConfigurationError(f"Runner needs a BaseSessionService, got {type(session_service).__name__}")
        for plugin in plugins:
            if not isinstance(plugin, BasePlugin):
                raise ConfigurationError(f"plugins must be BasePlugin instances, got {type(plugin).__name__}")
        self._plugins = tuple(plugins)
        self._agent = agent
        self._app_name = app_name
        self._session_service = session_service
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        check_timeout(tool_timeout, "tool_timeout")
        self._tool_scheduler = tool_scheduler
        self._tool_timeout = tool_timeout
        compaction = _compaction_config(agent, events_compaction_config)
        self._compactor = _compactor(compaction)
        self._request_compactor = _request_compactor(compaction)
        self._toolset_scope = ResourceScope(f"Runner {app_name!r}")

    def close(self) -> None:
        """End every toolset session this runner opened (an MCP stdio server stopped and reaped), and wait.

        Runs already going lose their sessions; a later run opens new ones. Idempotent.
        """
        self._toolset_scope.close()

    async def aclose(self) -> None:
        """:meth:`close`, awaited from any event loop."""
        await self._toolset_scope.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    @property
    def agent(self) -> BaseAgent:
        """The agent this runner runs."""
        return self._agent

    @property
    def plugins(self) -> tuple[BasePlugin, ...]:
        """The runner's plugins, in order."""
        return self._plugins

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
        new_message: Content | str,
        run_config: RunConfig | None = None,
    ) -> AwaitableObservable[Event]:
        """Run the agent on the session with a new user message.

        Returns a cold Observable. Subscribing waits for any earlier run on the same session,
        then stores ``new_message`` as a user event (not emitted, as in ADK), then runs the agent
        that answers the turn -- the root, or the agent of its tree that answered last (ADK's
        ``findAgentToRun``, see :func:`run_invocation`), with the plugins' hooks around it -- and
        emits every event it produces: partial events as they stream (never stored), and
        every non-partial event after it was stored. It completes when the agent's turn is over
        and fails with the run's error (a model or transport error,
        :class:`~rxllm.LimitExceededError`, :class:`~rxllm.UnsupportedOperationError` for a BIDI
        run on a model without live sessions, :class:`~rxllm.ConfigurationError` for a missing
        session). Disposing cancels the in-flight model call (its subscription is disposed, which
        closes the connection), runs no further tools or model calls, and lets the next queued
        run on the session start. A synchronous tool already running finishes; its result is
        dropped.

        >>> from reactivex import operators as ops
        >>> from rxllm import Chunk
        >>> from rxllm.agents import InMemoryRunner, LlmAgent
        >>> from rxllm.testing import ScriptedLlm, scripted_turn
        >>> runner = InMemoryRunner(LlmAgent("bot", ScriptedLlm([scripted_turn(Chunk(text_delta="Hi!"))])))
        >>> _ = runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
        >>> events = runner.run_async("u1", "s1", "Hello").pipe(ops.to_list()).run()  # or a Content
        >>> [(e.author, e.text(), e.is_final_response()) for e in events]
        [('bot', 'Hi!', True)]
        """
        if not isinstance(new_message, Content | str):
            raise ConfigurationError(f"new_message must be a Content or a str, got {type(new_message).__name__}")
        message = as_user_content(new_message)  # a str is one user text part; a role-less Content is the user's

        def body(ctx: InvocationContext, session: Session) -> reactivex.Observable[Event]:
            ctx.user_content = message
            run = run_invocation(ctx, message, session.events)
            if self._compactor is not None:  # ADK's Runner: compactEvents after the run
                run = then_now(run, partial(_compact, ctx, self._compactor))
            return run

        return self._run(user_id, session_id, run_config or RunConfig(), None, body)

    def run_live(
        self,
        *,
        user_id: str,
        session_id: str,
        live_request_queue: LiveRequestQueue,
        run_config: RunConfig | None = None,
    ) -> AwaitableObservable[Event]:
        """Run the agent live (BIDI) on the session, as ADK Java's ``Runner.runLive``.

        Returns a cold Observable. Subscribing waits for any earlier run on the session (a live
        run holds the session's run lane until it ends), then runs the agent that answers the
        session (:func:`agent_to_run`) with ``streaming_mode`` set to ``BIDI``, with the plugins'
        ``before_run`` / ``on_event`` / ``after_run`` hooks around it: the agent opens
        ``model.connect(request)`` with the run's live options (``run_config``'s
        ``response_modalities``, ``speech_config``, transcription and session resumption), and
        every request put on ``live_request_queue`` goes over the connection. It emits every
        event: partials (text and audio deltas, transcription pieces) as they come, never
        stored; and after it was stored, every non-partial one: each turn's text and its end,
        finished transcriptions, function calls and their responses (the tools run through the
        same tool layer as :meth:`run_async`; their responses go back over the connection).

        It completes when the session ends (``live_request_queue.close()``, or the server ends it)
        and fails with the session's error. Disposing closes the connection at once and starts
        no tool. ``docs/live.md`` has the rules of what a live session emits.

        Raises:
            ConfigurationError: (at once) ``live_request_queue`` is not a :class:`LiveRequestQueue`.
        """
        if not isinstance(live_request_queue, LiveRequestQueue):
            raise ConfigurationError(
                f"live_request_queue must be a LiveRequestQueue, got {type(live_request_queue).__name__}"
            )
        config = (run_config or RunConfig()).model_copy(update={"streaming_mode": StreamingMode.BIDI})

        def body(ctx: InvocationContext, session: Session) -> reactivex.Observable[Event]:
            agent = agent_to_run(ctx.agent, session.events)
            if not ctx.plugins:
                return agent.run_async(ctx)

            def agent_unless_answered(answers: list[Event]) -> reactivex.Observable[Event]:
                return emit_now(answers[0]) if answers else agent.run_async(ctx)

            events = collect_then(before_run(ctx), agent_unless_answered)
            return then_now(on_event(ctx, events), lambda: after_run(ctx))

        return self._run(user_id, session_id, config, live_request_queue, body)

    def _run(
        self,
        user_id: str,
        session_id: str,
        config: RunConfig,
        live_request_queue: LiveRequestQueue | None,
        body: Callable[[InvocationContext, Session], reactivex.Observable[Event]],
    ) -> AwaitableObservable[Event]:
        """One run on the session, in its run lane: the session fetched, a context built, ``body`` run."""
        app_name = self._app_name
        service = self._session_service
        agent = self._agent
        plugins = self._plugins

        def open_run(
            sessions: list[Session], contexts: list[InvocationContext], parent: object, runtime: ToolRuntime
        ) -> tuple[reactivex.Observable[Event], ResourceScope | None]:
            """The run on the session fetched (``sessions``: it, or nothing) and the scope its
            per-invocation toolset sessions live in (None: no session, the run fails at once)."""
            if not sessions:
                return fail_now(
                    ConfigurationError(
                        f"session {session_id!r} not found for app {app_name!r} and user {user_id!r} "
                        "(create it with the session service first)"
                    )
                ), None
            invocation_scope = ResourceScope(f"invocation of {agent.name!r}")
            ctx = InvocationContext(
                agent=agent,
                session=sessions[-1],
                session_service=service,
                run_config=config,
                artifact_service=self.artifact_service,
                memory_service=self.memory_service,
                plugins=plugins,
                tool_runtime=runtime,
                live_request_queue=live_request_queue,
                request_compactor=self._request_compactor,
                toolset_scopes=ToolsetScopes(self._toolset_scope, invocation_scope),
            )
            contexts.append(ctx)
            # the agent's span is a child of the span current when the user subscribed, whichever
            # thread (a session store's, a run queued before this one) gets to start the agent
            ctx.telemetry_context = parent  # the span current when the user subscribed
            return within(parent, body(ctx, sessions[-1])), invocation_scope

        def run_on(
            sessions: list[Session], contexts: list[InvocationContext], parent: object, runtime: ToolRuntime
        ) -> reactivex.Observable[Event]:
            run, scope = open_run(sessions, contexts, parent, runtime)
            # per-invocation toolset sessions close before the run's completion (or error) passes
            return run if scope is None else closing_after(run, scope)

        def start(parent: object, runtime: ToolRuntime) -> reactivex.Observable[Event]:
            contexts: list[InvocationContext] = []

            def cancel() -> None:
                for ctx in contexts:
                    ctx.cancel()

            def run_on_session(sessions: list[Session]) -> reactivex.Observable[Event]:
                return run_on(sessions, contexts, parent, runtime)

            run = collect_then(service.get_session(app_name, user_id, session_id), run_on_session)
            return on_dispose(run, cancel)

        if type(service).serialize_run is BaseSessionService.serialize_run:  # the default lanes: one layer
            lanes = session_lanes(service)
            key = (app_name, user_id, session_id)

            def subscribe_on_lane(
                observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
            ) -> rx_abc.DisposableBase:
                parent = current_context()
                runtime = ToolRuntime.capture(scheduler=self._tool_scheduler, timeout=self._tool_timeout)
                run = _LaneRun(lanes, key, observer, scheduler, partial(open_run, parent=parent, runtime=runtime))
                run.enter(service)
                return run

            return AwaitableObservable(Direct(subscribe_on_lane))

        def subscribe(
            observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
        ) -> rx_abc.DisposableBase:
            # Captured now, on the subscribing thread: the span current when the user subscribed
            # parents the agent's span, and async tools run on the subscriber's loop.
            parent = current_context()
            runtime = ToolRuntime.capture(scheduler=self._tool_scheduler, timeout=self._tool_timeout)

            def on_error(error: Exception) -> None:
                observer.on_error(_as_rxllm_error(error))

            run = service.serialize_run(app_name, user_id, session_id, defer_now(partial(start, parent, runtime)))
            return run.subscribe(observer.on_next, on_error, observer.on_completed, scheduler=scheduler)

        return awaitable(reactivex.create(subscribe))


OpenRun = Callable[[list[Session], list[InvocationContext]], tuple[reactivex.Observable[Event], ResourceScope | None]]


class _LaneRun(rx_abc.DisposableBase):
    """One run on the service's default run lanes (``rxllm.agents._sessions.run_lanes``), in one
    layer: what ``serialize_run`` of a run that fetches the session, cancels its contexts on
    dispose (``on_dispose``) and closes its invocation's scope before passing its end on
    (``closing_after``) does, with one observer between the run's events and the subscriber's
    instead of three.

    The order is theirs: the run starts when its turn on the lane comes; its completion or
    (``RxLlmError``-mapped) error passes once the scope is closed, and then the lane is left.
    Disposing cancels the run's contexts, disposes what is running, starts closing the scope of
    a run that had not ended, and leaves the lane (or the queue, when the run had not started).
    """

    __slots__ = (
        "_body",
        "_contexts",
        "_disposed",
        "_done",
        "_fetch",
        "_key",
        "_lanes",
        "_lock",
        "_observer",
        "_open_run",
        "_released",
        "_scheduler",
        "_scope",
        "_service",
        "_started",
    )

    def __init__(
        self,
        lanes: SessionLanes,
        key: SessionKey,
        observer: rx_abc.ObserverBase[Event],
        scheduler: rx_abc.SchedulerBase | None,
        open_run: OpenRun,
    ) -> None:
        self._lanes = lanes
        self._key = key
        self._observer = observer
        self._scheduler = scheduler
        self._open_run = open_run
        self._lock = threading.Lock()
        self._started = False
        self._disposed = False
        self._released = False
        self._done = False  # the run's events ended (its scope closes without close_soon)
        # the session's fetch (when the store answers later) and the run: held as Slots hold them
        self._fetch: rx_abc.DisposableBase | None = None
        self._body: rx_abc.DisposableBase | None = None
        self._contexts: list[InvocationContext] = []
        self._scope: ResourceScope | None = None
        self._service: BaseSessionService | None = None

    def enter(self, service: BaseSessionService) -> None:
        """Queue on the lane (started at once when it is free)."""
        self._service = service
        self._lanes.enter(self._key, self)  # (its own turn: a ticket holding its start would be a cycle)

    def start(self) -> None:
        """The lane's turn: fetch the session, then run on it."""
        with self._lock:
            disposed = self._disposed
            if not disposed:
                self._started = True
        if disposed:  # taken off the queue while being disposed: pass the turn on
            self._release()
            return
        service = self._service
        assert service is not None
        app_name, user_id, session_id = self._key
        get = get_now(service)
        if get is not None:
            try:
                found = get(app_name, user_id, session_id)
            except Exception as exc:
                self._fail(exc)
                return
            self._open([found] if found is not None else [])
            return
        sessions: list[Session] = []
        fetch = service.get_session(app_name, user_id, session_id).subscribe(
            sessions.append, self._fail, partial(self._open, sessions), scheduler=self._scheduler
        )
        if self._disposed:
            fetch.dispose()
        else:
            self._fetch = fetch
            if self._disposed:  # disposed on another thread meanwhile
                fetch.dispose()

    def _open(self, sessions: list[Session]) -> None:
        if self._disposed:
            return
        try:
            run, scope = self._open_run(sessions, self._contexts)
        except Exception as exc:
            self._fail(exc)
            return
        if scope is None:  # no session: the run fails at once, outside any scope
            body = run.subscribe(self._observer.on_next, self._fail, self._complete, scheduler=self._scheduler)
        else:
            self._scope = scope
            body = run.subscribe(self._observer.on_next, self._ended_with, self._ended, scheduler=self._scheduler)
        if self._disposed:
            body.dispose()
        else:
            self._body = body
            if self._disposed:  # disposed on another thread meanwhile
                body.dispose()

    def _ended(self) -> None:
        self._finish(self._complete)

    def _ended_with(self, error: Exception) -> None:
        self._finish(partial(self._fail, error))

    def _finish(self, terminal: Callable[[], None]) -> None:
        """``closing_after``: the invocation's scope closed, then ``terminal``."""
        self._done = True
        scope = self._scope
        if scope is None:
            terminal()
        else:
            scope.close_then(terminal)

    def _fail(self, error: Exception) -> None:
        try:
            self._observer.on_error(_as_rxllm_error(error))
        finally:
            self._release()

    def _complete(self) -> None:
        try:
            self._observer.on_completed()
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._lanes.leave(self._key)

    def dispose(self) -> None:
        with self._lock:
            self._disposed = True
            started = self._started
        for ctx in self._contexts:
            ctx.cancel()
        fetch, self._fetch = self._fetch, None
        if fetch is not None:
            fetch.dispose()
        body, self._body = self._body, None
        if body is not None:
            body.dispose()
        scope = self._scope
        if scope is not None and not self._done:
            scope.close_soon()
        if started:
            self._release()
        else:
            self._lanes.withdraw(self._key, self)  # if already taken off the queue, start() releases


def _compaction_config(agent: BaseAgent, config: EventsCompactionConfig | None) -> EventsCompactionConfig | None:
    """The runner's config; without a summarizer, one on the root agent's model (ADK Java's Runner)."""
    if config is None:
        return None
    if not isinstance(config, EventsCompactionConfig):
        raise ConfigurationError(
            f"events_compaction_config must be an EventsCompactionConfig, got {type(config).__name__}"
        )
    if config.summarizer is None:
        if not isinstance(agent, LlmAgent):
            raise ConfigurationError(
                f"events compaction without a summarizer needs an LlmAgent root (its model summarises); "
                f"{agent.name!r} is a {type(agent).__name__}: give EventsCompactionConfig(summarizer=...)"
            )
        config = dataclasses.replace(config, summarizer=LlmEventSummarizer(agent.model))
    return config


def _compactor(config: EventsCompactionConfig | None) -> SlidingWindowEventCompactor | None:
    """What compacts after every invocation: the sliding window, when configured."""
    return SlidingWindowEventCompactor(config) if config is not None and config.has_sliding_window else None


def _request_compactor(config: EventsCompactionConfig | None) -> TailRetentionEventCompactor | None:
    """What compacts before every model call: tail retention, when configured (ADK Java's ``Compaction``)."""
    if config is None or config.summarizer is None or config.token_threshold is None:
        return None
    if config.event_retention_size is None:
        return None
    return TailRetentionEventCompactor(config.summarizer, config.event_retention_size, config.token_threshold)


def _compact(ctx: InvocationContext, compactor: SlidingWindowEventCompactor) -> reactivex.Observable[Event]:
    """Compact the session as stored now; emits nothing (the compaction event is stored, not streamed)."""
    if ctx.is_cancelled:
        return reactivex.never()

    def compact(session: Session) -> reactivex.Observable[Event]:
        return ignore_items(compactor.compact(session, ctx.session_service))

    return ctx.session_now().pipe(ops.flat_map(compact))


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
        plugins: Sequence[BasePlugin] = (),
        tool_scheduler: rx_abc.SchedulerBase | None = None,
        tool_timeout: float | None = None,
        events_compaction_config: EventsCompactionConfig | None = None,
    ) -> None:
        super().__init__(
            agent,
            app_name,
            InMemorySessionService(),
            artifact_service=InMemoryArtifactService(),
            memory_service=InMemoryMemoryService(),
            plugins=plugins,
            tool_scheduler=tool_scheduler,
            tool_timeout=tool_timeout,
            events_compaction_config=events_compaction_config,
        )


def _transferable_across_tree(agent: BaseAgent) -> bool:
    current: BaseAgent | None = agent
    while current is not None:
        if not isinstance(current, LlmAgent) or current.disallow_transfer_to_parent:
            return False
        current = current.parent_agent
    return True


def agent_to_run(root: BaseAgent, events: Sequence[Event]) -> BaseAgent:
    """The agent that answers a new user message (ADK's ``Runner.findAgentToRun``).

    A user message that answers a function call (a long-running tool's response) goes to the
    agent that made the call. Otherwise the author of the latest agent event, when it is the root
    or an agent from which transfer back up to the root is possible (an ``LlmAgent`` chain that
    allows transfer to the parent); else the root.
    """
    answered = _last_user_function_response_ids(events)
    if answered:
        for event in reversed(events):
            if {c.id for c in event.function_calls()} & answered:
                found = root.find_agent(event.author)
                if found is not None:
                    return found
                break
    for event in reversed(events):
        if event.author == "user":
            continue
        if event.author == root.name:
            return root
        agent = root.find_sub_agent(event.author)
        if agent is not None and _transferable_across_tree(agent):
            return agent
    return root


def _last_user_function_response_ids(events: Sequence[Event]) -> set[str]:
    if not events or events[-1].author != "user":
        return set()
    return {r.id for r in events[-1].function_responses() if r.id}
