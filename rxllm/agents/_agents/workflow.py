"""Workflow agents: ``SequentialAgent``, ``ParallelAgent``, ``LoopAgent`` (ADK's ``agents/*Agent.java``).

They run their sub-agents, not a model. Every sub-agent runs in the same invocation (one
invocation id, one model-call budget, one cancellation) and stores its events before emitting
them, so the next sub-agent's requests see them (as user-role context: ``_contents``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import reactivex
from reactivex import abc as rx_abc
from reactivex import operators as ops
from reactivex.abc.scheduler import ScheduledAction
from reactivex.disposable import CompositeDisposable, Disposable, SingleAssignmentDisposable

from ..._core.errors import ConfigurationError
from ..._core.threads import thread_pool_scheduler
from ..._rx.direct import concat_now, nothing_now
from .._invocation.base import AgentCallback, BaseAgent, InvocationContext
from .._sessions.event import Event

__all__ = ["PARALLEL_WORKERS", "LoopAgent", "ParallelAgent", "SequentialAgent"]


def _escalates(event: Event) -> bool:
    return bool(event.actions.escalate)


def _not_escalated(event: Event) -> bool:
    return not event.actions.escalate


class SequentialAgent(BaseAgent):
    """Runs its sub-agents one after the other, each once (ADK's ``SequentialAgent``).

    Sub-agent *n + 1* starts when sub-agent *n* completed (its events stored). Cold: subscribing
    starts the first; disposing stops the running one and starts no other.

    >>> from reactivex import operators as ops
    >>> from rxllm import Chunk, Content, Part
    >>> from rxllm.agents import InMemoryRunner, LlmAgent
    >>> from rxllm.testing import ScriptedLlm, scripted_turn
    >>> writer = LlmAgent("writer", ScriptedLlm([scripted_turn(Chunk(text_delta="Roses are red."))]))
    >>> reviewer = LlmAgent("reviewer", ScriptedLlm([scripted_turn(Chunk(text_delta="Lovely."))]))
    >>> runner = InMemoryRunner(SequentialAgent("pipeline", sub_agents=[writer, reviewer]))
    >>> _ = runner.session_service.create_session(runner.app_name, "u1", session_id="s1").run()
    >>> events = runner.run_async("u1", "s1", Content(role="user", parts=(Part.from_text("A poem"),))).pipe(
    ...     ops.to_list()).run()
    >>> [(e.author, e.text()) for e in events]
    [('writer', 'Roses are red.'), ('reviewer', 'Lovely.')]
    """

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        def runs() -> Iterator[reactivex.Observable[Event]]:
            for agent in self.sub_agents:
                if ctx.is_cancelled:
                    return
                yield agent.run_async(ctx)

        return concat_now(runs())


class LoopAgent(BaseAgent):
    """Runs its sub-agents in order, again and again (ADK's ``LoopAgent``).

    Args:
        max_iterations: the most rounds; None runs until an event escalates.

    The loop stops at the first event with ``actions.escalate`` (that event is emitted, and the
    sub-agent that produced it is stopped: nothing after it runs), or after ``max_iterations``
    rounds. A tool escalates with ``tool_context.actions.escalate = True``. Cold; disposing stops it.

    >>> from rxllm.agents import LlmAgent
    >>> from rxllm.testing import ScriptedLlm
    >>> LoopAgent("refine", sub_agents=[LlmAgent("critic", ScriptedLlm([]))], max_iterations=3).max_iterations
    3
    """

    def __init__(
        self,
        name: str,
        *,
        sub_agents: Sequence[BaseAgent] = (),
        max_iterations: int | None = None,
        description: str = "",
        before_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
        after_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
    ) -> None:
        if max_iterations is not None and (not isinstance(max_iterations, int) or max_iterations < 0):
            raise ConfigurationError(f"LoopAgent {name!r}: max_iterations must be None or >= 0, got {max_iterations!r}")
        super().__init__(
            name,
            description=description,
            sub_agents=sub_agents,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
        self._max_iterations = max_iterations

    @property
    def max_iterations(self) -> int | None:
        """The most rounds, or None for no limit."""
        return self._max_iterations

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        if not self.sub_agents:
            return nothing_now()
        escalated = threading.Event()

        def note(event: Event) -> None:
            if _escalates(event):
                escalated.set()

        def runs() -> Iterator[reactivex.Observable[Event]]:
            rounds = 0
            while self._max_iterations is None or rounds < self._max_iterations:
                rounds += 1
                for agent in self.sub_agents:
                    if ctx.is_cancelled or escalated.is_set():
                        return
                    yield agent.run_async(ctx)

        def start(_: object) -> reactivex.Observable[Event]:
            return concat_now(runs()).pipe(
                ops.do_action(on_next=note), ops.take_while(_not_escalated, inclusive=True)
            )

        return reactivex.defer(start)


class ParallelAgent(BaseAgent):
    """Runs its sub-agents at the same time, each in its own branch (ADK's ``ParallelAgent``).

    Args:
        scheduler: where each branch is subscribed (ADK Java's ``ParallelAgent.Builder.scheduler``,
            ``Schedulers.io()`` there); by default rxllm's parallel pool (``rxllm-parallel_N``
            threads, :data:`PARALLEL_WORKERS` of them).

    Each sub-agent runs in the branch ``<branch>.<sub-agent>`` (``parallel_name.sub_agent`` at the
    root), so its model calls see the shared history before the fork and its own events, never its
    siblings'. Every branch is subscribed on a thread of ``scheduler`` (Java's ``subscribeOn``),
    so the branches run concurrently whatever their models' threading: a model that emits, or
    blocks, inside ``subscribe`` holds its own branch's thread only. Their events are emitted as
    they happen, interleaved (serialized: one ``on_next`` at a time), on the branches' threads.

    It completes when every branch completed; the first branch error fails it and disposes the
    others. An escalating event is emitted and stops every branch (ADK's ``takeUntil``). Disposing
    disposes every branch, on the disposing thread: each branch's model call is cancelled (its
    connection closed); a branch not subscribed yet never starts.

    >>> from rxllm.agents import LlmAgent
    >>> from rxllm.testing import ScriptedLlm
    >>> fan = ParallelAgent("fan", sub_agents=[LlmAgent("a", ScriptedLlm([])), LlmAgent("b", ScriptedLlm([]))])
    >>> [agent.name for agent in fan.sub_agents]
    ['a', 'b']
    """

    def __init__(
        self,
        name: str,
        *,
        sub_agents: Sequence[BaseAgent] = (),
        description: str = "",
        before_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
        after_agent_callback: AgentCallback | Sequence[AgentCallback] | None = None,
        scheduler: rx_abc.SchedulerBase | None = None,
    ) -> None:
        super().__init__(
            name,
            description=description,
            sub_agents=sub_agents,
            before_agent_callback=before_agent_callback,
            after_agent_callback=after_agent_callback,
        )
        self._scheduler = scheduler

    @property
    def scheduler(self) -> rx_abc.SchedulerBase:
        """Where the branches are subscribed."""
        return self._scheduler if self._scheduler is not None else _parallel_scheduler()

    def _run_async_impl(self, ctx: InvocationContext) -> reactivex.Observable[Event]:
        if not self.sub_agents:
            return nothing_now()
        branch = f"{ctx.branch}.{self.name}" if ctx.branch else self.name
        forked = ctx.for_agent(self, branch=branch)
        sources = [agent.run_async(forked) for agent in self.sub_agents]
        return _merge_on(sources, self.scheduler).pipe(ops.take_while(_not_escalated, inclusive=True))


PARALLEL_WORKERS = 64
"""The threads of the default pool ``ParallelAgent`` subscribes its branches on; more branches
than this that block inside ``subscribe`` at once wait for a thread."""

_pool_lock = threading.Lock()
_pool: list[rx_abc.SchedulerBase] = []


def _parallel_scheduler() -> rx_abc.SchedulerBase:
    with _pool_lock:
        if not _pool:
            _pool.append(thread_pool_scheduler(PARALLEL_WORKERS, "rxllm-parallel"))
        return _pool[0]


def _merge_on(
    sources: Sequence[reactivex.Observable[Event]], on: rx_abc.SchedulerBase
) -> reactivex.Observable[Event]:
    """Subscribe every source on a thread of ``on`` (ADK Java's ``subscribeOn`` per branch),
    serialize their items, complete when all completed, fail (disposing the rest) on the first error.

    Not ``ops.subscribe_on``: that disposes through the scheduler too, so a branch blocked in
    ``subscribe`` would keep its connection until it returned. Here disposing acts on the disposing
    thread: a scheduled subscription that has not run is cancelled, a running one is disposed as
    soon as it is assigned."""

    def subscribe(
        observer: rx_abc.ObserverBase[Event], scheduler: rx_abc.SchedulerBase | None = None
    ) -> rx_abc.DisposableBase:
        lock = threading.RLock()
        group = CompositeDisposable()
        state = {"running": len(sources), "done": False}

        def on_next(event: Event) -> None:
            with lock:
                if not state["done"]:
                    observer.on_next(event)

        def on_error(error: Exception) -> None:
            with lock:
                if state["done"]:
                    return
                state["done"] = True
            group.dispose()
            observer.on_error(error)

        def on_completed() -> None:
            with lock:
                state["running"] -= 1
                if state["running"] or state["done"]:
                    return
                state["done"] = True
            observer.on_completed()

        def starter(source: reactivex.Observable[Event], slot: SingleAssignmentDisposable) -> ScheduledAction[Any]:
            def start(_: rx_abc.SchedulerBase, __: Any = None) -> None:
                with lock:
                    if state["done"]:
                        return
                try:
                    slot.disposable = source.subscribe(on_next, on_error, on_completed, scheduler=scheduler)
                except Exception as exc:  # a branch whose subscribe raised: the branch failed
                    on_error(exc)

            return start

        for source in sources:
            slot = SingleAssignmentDisposable()
            group.add(slot)
            group.add(on.schedule(starter(source, slot)))

        def dispose() -> None:
            with lock:
                state["done"] = True
            group.dispose()

        return Disposable(dispose)

    return reactivex.create(subscribe)
