"""Where tool work runs: the worker pool for synchronous tools, the loop for ``async def`` ones.

See :mod:`rxllm._tools._execution` for the rules; this module holds the machinery (no tool types).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, TypeVar

import reactivex
from reactivex import abc as rx_abc
from reactivex.disposable import Disposable
from reactivex.scheduler import ThreadPoolScheduler

from .._core.errors import ConfigurationError, ToolError
from .._core.loop_work import hold
from .._core.threads import daemon_thread, thread_pool_scheduler

__all__ = [
    "DEFAULT_TOOL_WORKERS",
    "check_timeout",
    "coroutine_observable",
    "current_tool_loop",
    "default_tool_scheduler",
    "running_loop",
    "tool_loop",
    "using_loop",
    "wait_for_awaitable",
]

T = TypeVar("T")

DEFAULT_TOOL_WORKERS = 32
"""Threads of the process-wide tool pool (``RXLLM_TOOL_WORKERS`` overrides it when the pool is created)."""

_lock = threading.Lock()
_default_scheduler: ThreadPoolScheduler | None = None
_loop: asyncio.AbstractEventLoop | None = None
_local = threading.local()


def _configured_workers() -> int:
    raw = os.environ.get("RXLLM_TOOL_WORKERS")
    if raw is None:
        return DEFAULT_TOOL_WORKERS
    try:
        workers = int(raw)
    except ValueError:
        workers = 0
    if workers < 1:
        raise ConfigurationError(f"RXLLM_TOOL_WORKERS must be a positive integer, got {raw!r}")
    return workers


def default_tool_scheduler() -> ThreadPoolScheduler:
    """The process-wide pool synchronous tools run on when a runtime is given no ``tool_scheduler``.

    Created on first use with :data:`DEFAULT_TOOL_WORKERS` threads (or ``RXLLM_TOOL_WORKERS``),
    named ``rxllm-tool_N``; never the models' I/O pool, so a slow tool cannot starve the streams.
    """
    global _default_scheduler
    with _lock:
        if _default_scheduler is None:
            _default_scheduler = thread_pool_scheduler(_configured_workers(), "rxllm-tool")
        return _default_scheduler


def tool_loop() -> asyncio.AbstractEventLoop:
    """rxllm's own asyncio loop for ``async def`` tools run with no caller's loop (a daemon thread)."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            daemon_thread(loop.run_forever, "rxllm-tool-loop")
            _loop = loop
        return _loop


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The asyncio loop running on the current thread, if any."""
    return asyncio._get_running_loop()  # (get_running_loop without its RuntimeError to catch when there is none)


def current_tool_loop() -> asyncio.AbstractEventLoop:
    """Where an ``async def`` tool starting now runs.

    The runtime's loop while :func:`execute_tool` runs a tool, else the loop running on this
    thread, else :func:`tool_loop`.
    """
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is not None and not loop.is_closed():
        return loop
    return running_loop() or tool_loop()


async def _contained(coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine``'s value; a ``BaseException`` it raises (``SystemExit``, ``KeyboardInterrupt``)
    comes back as a :class:`~rxllm.ToolError` chaining it. asyncio re-raises those two out of
    the loop's ``run_forever``, which would end the loop's thread and every task on it."""
    try:
        return await coroutine
    except asyncio.CancelledError:
        raise
    except Exception:
        raise
    except BaseException as exc:
        raise ToolError(f"a coroutine raised {type(exc).__name__}: {exc}") from exc


def coroutine_observable(
    coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None
) -> reactivex.Observable[T]:
    """An Observable of ``coroutine``'s value: subscribing schedules it on ``loop`` (default
    :func:`current_tool_loop`, read at subscription); disposing cancels the task.

    The value (or the exception) is emitted on the loop's thread. Subscribe once: a coroutine
    runs once.
    """

    def subscribe(observer: rx_abc.ObserverBase[T], scheduler: rx_abc.SchedulerBase | None = None) -> Disposable:
        target = loop if loop is not None else current_tool_loop()
        release = hold(target)  # a blocking wait on the loop's own thread fails at once
        try:
            future: Future[T] = asyncio.run_coroutine_threadsafe(_contained(coroutine), target)
        except RuntimeError as exc:  # the loop is closed
            release()
            coroutine.close()
            observer.on_error(ToolError(f"cannot run a coroutine: its loop is unusable ({exc})"))
            return Disposable()

        def done(finished: Future[T]) -> None:
            release()
            if finished.cancelled():
                return
            error = finished.exception()
            if error is not None:
                observer.on_error(error if isinstance(error, Exception) else ToolError(repr(error)))
                return
            observer.on_next(finished.result())
            observer.on_completed()

        future.add_done_callback(done)

        def cancel() -> None:
            future.cancel()

        return Disposable(cancel)

    return reactivex.create(subscribe)


def check_timeout(timeout: float | None, name: str) -> None:
    """Refuse a timeout that is not a positive number of seconds (None means no limit)."""
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigurationError(f"{name} must be a positive number of seconds or None, got {timeout!r}")




@contextlib.contextmanager
def using_loop(loop: asyncio.AbstractEventLoop | None) -> Iterator[None]:
    """While active on this thread, :func:`current_tool_loop` answers ``loop`` (when not None)."""
    previous = getattr(_local, "loop", None)
    _local.loop = loop
    try:
        yield
    finally:
        _local.loop = previous


def wait_for_awaitable(
    value: Any, loop: asyncio.AbstractEventLoop | None, on_start: Callable[[Callable[[], None]], None]
) -> Any:
    """``value`` itself, or, when it is awaitable (an ``async def`` callback's coroutine), its result.

    For a worker thread (never a loop's own thread): the awaitable runs on ``loop`` (else
    :func:`tool_loop`) and this thread waits for it. ``on_start`` receives a function that
    cancels the task, to be called when the caller is disposed; a cancelled wait raises
    ``concurrent.futures.CancelledError``.
    """
    if not inspect.isawaitable(value):
        return value

    async def await_it() -> Any:
        return await value

    future = asyncio.run_coroutine_threadsafe(await_it(), loop if loop is not None else tool_loop())

    def cancel() -> None:
        future.cancel()

    on_start(cancel)
    return future.result()
