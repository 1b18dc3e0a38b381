"""Where toolsets keep what they open for a run: one scope per runner and one per invocation.

A toolset that holds a connection (an MCP session) keeps it in a :class:`ResourceScope`: the
runner's (open until ``Runner.close()``) or the invocation's (closed when the invocation
terminates or is disposed), as the toolset is configured. The runner builds both and hands them
to every context of the run (:class:`ToolsetScopes`); a context without them (a tool called
standalone) leaves the toolset to hold its own.

A resource is anything with an ``async def aclose()`` that runs on rxllm's tool loop
(:func:`~rxllm._tools.tool_loop`); the scope closes its resources there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import reactivex
from reactivex import abc as rx_abc

from .._rx.direct import Direct, DisposeAction, nothing_now
from ._loops import coroutine_observable, tool_loop

__all__ = ["ResourceScope", "ScopedResource", "ToolsetScopes", "closing_after"]

_log = logging.getLogger("rxllm.agents")

R = TypeVar("R", bound="ScopedResource")
T = TypeVar("T")

CLOSE_WAIT = 20.0
"""Seconds a blocking :meth:`ResourceScope.close` waits for the resources to close."""


class ScopedResource(Protocol):
    """What a scope holds: closed on rxllm's tool loop."""

    async def aclose(self) -> None: ...


class ResourceScope:
    """Resources opened for one owner (a runner, an invocation), closed together.

    Args:
        label: what owns the scope, for log lines.
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._lock = threading.Lock()
        self._resources: dict[object, ScopedResource] = {}

    def __repr__(self) -> str:
        return f"ResourceScope({self._label!r}, {len(self._resources)} open)"

    @property
    def is_empty(self) -> bool:
        """Whether nothing is open in the scope."""
        return not self._resources

    def resource(self, key: object, factory: Callable[[], R]) -> R:
        """The resource kept under ``key``, made by ``factory()`` on first use."""
        with self._lock:
            found = self._resources.get(key)
            if found is None:
                found = factory()
                self._resources[key] = found
            return found  # type: ignore[return-value]

    def discard(self, key: object) -> None:
        """Forget ``key`` (its owner closed it)."""
        with self._lock:
            self._resources.pop(key, None)

    def _take(self) -> list[ScopedResource]:
        with self._lock:
            taken = list(self._resources.values())
            self._resources.clear()
            return taken

    async def _close_on_loop(self, resources: list[ScopedResource]) -> None:
        for resource in resources:
            try:
                await resource.aclose()
            except Exception as exc:  # one resource that fails to close does not keep the others open
                _log.warning("%s: closing %r failed: %s", self._label, resource, exc)

    def closing(self) -> reactivex.Observable[Any]:
        """A cold Observable that closes every resource (on the tool loop), then completes.

        Completes during subscribe when the scope is empty.
        """

        def subscribe(observer: rx_abc.ObserverBase[Any], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
            resources = self._take()
            if not resources:
                return nothing_now().subscribe(observer, scheduler=scheduler)
            return coroutine_observable(self._close_on_loop(resources), tool_loop()).subscribe(
                observer, scheduler=scheduler
            )

        return Direct(subscribe)

    def close_then(self, terminal: Callable[[], None]) -> None:
        """Close every resource, then call ``terminal`` (at once, on this thread, when the scope is
        empty; a failure to close is logged, and ``terminal`` called all the same)."""
        if self.is_empty:
            terminal()
            return

        def on_error(error: Exception) -> None:
            _log.warning("closing %r failed: %s", self, error)
            terminal()

        self.closing().subscribe(on_error=on_error, on_completed=terminal)

    def close_soon(self) -> None:
        """Start closing every resource without waiting (from a dispose)."""
        resources = self._take()
        if resources:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the exit hook reaps
                asyncio.run_coroutine_threadsafe(self._close_on_loop(resources), tool_loop())

    def close(self) -> None:
        """Close every resource and wait for it (not on the tool loop's own thread: there it only starts)."""
        resources = self._take()
        if not resources:
            return
        loop = tool_loop()
        future = asyncio.run_coroutine_threadsafe(self._close_on_loop(resources), loop)
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if not on_loop:
            with contextlib.suppress(Exception):
                future.result(timeout=CLOSE_WAIT)

    async def aclose(self) -> None:
        """Close every resource, awaited from any event loop."""
        resources = self._take()
        if not resources:
            return
        loop = tool_loop()
        coroutine = self._close_on_loop(resources)
        if asyncio.get_running_loop() is loop:
            await coroutine
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, loop))


@dataclass(frozen=True)
class ToolsetScopes:
    """The two scopes a run's contexts carry: the runner's and the invocation's."""

    runner: ResourceScope
    invocation: ResourceScope


def closing_after(source: reactivex.Observable[T], scope: ResourceScope) -> reactivex.Observable[T]:
    """``source``, then ``scope`` closed before its completion or error is passed on.

    Disposing disposes ``source`` and starts closing the scope (without waiting). With an empty
    scope the terminal event passes at once, on the thread that delivered it.
    """

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Any:
        state = {"done": False}

        def finish(terminal: Callable[[], None]) -> None:
            state["done"] = True
            scope.close_then(terminal)

        def on_error(error: Exception) -> None:
            finish(lambda: observer.on_error(error))

        def on_completed() -> None:
            finish(observer.on_completed)

        subscription = source.subscribe(observer.on_next, on_error, on_completed, scheduler=scheduler)

        def dispose() -> None:
            subscription.dispose()
            if not state["done"]:
                scope.close_soon()

        return DisposeAction(dispose)

    return Direct(subscribe)
