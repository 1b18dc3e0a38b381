"""rxllm's own threads keep the process's signals off themselves.

The kernel hands a process-directed signal (Ctrl-C's SIGINT, SIGTERM) to any thread that does not
block it. Python runs its handler on the main thread anyway, but only once the main thread runs
bytecode or its blocking call is interrupted; a signal that landed on one of our background
threads interrupts nothing, so a main thread blocked in C (``input()`` under readline, ``select``)
sleeps on: measured, the chat's Ctrl-C at the prompt was lost about 1 time in 4 on a busy machine
(the connection pruner's thread took it). Every thread rxllm starts blocks those signals first, so
they always reach the main thread.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import thread as _pool_internals
from typing import Any, TypeVar

from reactivex import abc as rx_abc
from reactivex.scheduler import ThreadPoolScheduler

__all__ = [
    "IdleExitPool",
    "LeanThreadPool",
    "block_process_signals",
    "daemon_thread",
    "schedule_cancellable",
    "thread_pool",
    "thread_pool_scheduler",
]

_T = TypeVar("_T")

# What LeanThreadPool.run_soon uses of ThreadPoolExecutor's own (CPython 3.11 to 3.14): without
# it, run_soon is submit.
_LEAN = all(hasattr(_pool_internals, name) for name in ("_global_shutdown_lock", "_shutdown", "BrokenThreadPool")) and (
    hasattr(ThreadPoolExecutor, "_adjust_thread_count")
)

_PROCESS_SIGNALS = frozenset(
    s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s is not None
)


def block_process_signals() -> None:
    """Keep SIGINT and SIGTERM off the calling thread (they go to the main thread); a no-op where
    threads have no signal mask (Windows)."""
    if hasattr(signal, "pthread_sigmask"):
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_sigmask(signal.SIG_BLOCK, _PROCESS_SIGNALS)


def daemon_thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A started daemon thread running ``target`` with the process's signals blocked."""

    def run() -> None:
        block_process_signals()
        target()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def thread_pool(max_workers: int, name: str) -> ThreadPoolExecutor:
    """A ``ThreadPoolExecutor`` whose threads (``name_0``...) block the process's signals (a
    :class:`LeanThreadPool`: :func:`schedule_cancellable` hands it work without a ``Future``)."""
    return LeanThreadPool(max_workers=max_workers, thread_name_prefix=name, initializer=block_process_signals)


class _Soon:
    """One :meth:`LeanThreadPool.run_soon` call: a work item of the executor's queue without a
    ``Future``. Whoever takes its gate first, the worker (:meth:`run`) or the caller (:meth:`cancel`),
    decides: it runs, or it never will (a ``Future``'s ``set_running_or_notify_cancel`` / ``cancel``)."""

    __slots__ = ("_args", "_cancelled", "_fn", "_gate")

    def __init__(self, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        self._fn: Callable[..., object] | None = fn
        self._args = args
        self._gate = threading.Lock()
        self._cancelled = False

    @property
    def future(self) -> _Soon:
        """What ``ThreadPoolExecutor.shutdown(cancel_futures=True)`` (and a pool whose initializer
        failed) calls ``cancel()`` (``set_exception``) on for each item still queued: the item itself."""
        return self

    def run(self, *_: Any) -> None:
        """The worker's call (the executor's ``_WorkItem.run``): an error is dropped, as the
        ``Future`` nobody reads would hold it."""
        if not self._gate.acquire(False):  # cancelled before it started
            return
        fn, args = self._fn, self._args
        self._fn, self._args = None, ()  # (no reference to the work once it runs, as a Future keeps none)
        with contextlib.suppress(BaseException):  # (ThreadPoolExecutor's worker: the future would hold it)
            fn(*args)  # type: ignore[misc]
        del fn, args

    def cancel(self) -> bool:
        """Cancel it if it has not started (``Future.cancel``): True when it never will."""
        if self._gate.acquire(False):
            self._fn, self._args = None, ()
            self._cancelled = True
            return True
        return self._cancelled  # (running or done: False; cancelled before: True)

    def set_exception(self, _: BaseException) -> None:
        """A pool whose thread initializer failed: the item never runs (its ``Future`` would fail)."""
        self.cancel()


class LeanThreadPool(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` (the same threads, names, initializer, queue, shutdown and exit join)
    with :meth:`run_soon`: ``submit`` without the ``Future`` (its condition, and the locking of
    setting it running and done) that nobody waits on when the work reports its own outcome."""

    def run_soon(self, fn: Callable[..., object], *args: Any) -> Callable[[], object]:
        """Queue ``fn(*args)`` as ``submit`` does (the same errors after shutdown); returns what
        cancels it if it has not started. An exception ``fn`` raises is dropped (a submitted call's
        ``Future`` would keep it, unread)."""
        if not _LEAN:
            return self.submit(fn, *args).cancel
        item = _Soon(fn, args)
        with self._shutdown_lock, _pool_internals._global_shutdown_lock:
            if self._broken:
                raise _pool_internals.BrokenThreadPool(self._broken)
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if _pool_internals._shutdown:
                raise RuntimeError("cannot schedule new futures after interpreter shutdown")
            self._work_queue.put(item)  # type: ignore[arg-type]  # (a work item without a Future)
            self._adjust_thread_count()
        return item.cancel


def thread_pool_scheduler(max_workers: int, name: str, *, idle_timeout: float | None = None) -> ThreadPoolScheduler:
    """A plain ``ThreadPoolScheduler`` running on :func:`thread_pool`, or on an :class:`IdleExitPool`
    whose idle workers exit after ``idle_timeout`` seconds."""
    scheduler = ThreadPoolScheduler(max_workers)
    if idle_timeout is None:
        scheduler.executor = thread_pool(max_workers, name)
    else:
        # reactivex types the attribute as ThreadPoolExecutor but only calls submit and shutdown
        scheduler.executor = IdleExitPool(max_workers, name, idle_timeout=idle_timeout)  # type: ignore[assignment]
    return scheduler


def schedule_cancellable(
    scheduler: rx_abc.SchedulerBase, action: Callable[[rx_abc.SchedulerBase, Any], None]
) -> Callable[[], object]:
    """Schedule ``action(scheduler, None)`` on ``scheduler`` now; returns what cancels it if it has not started.

    reactivex's ``ThreadPoolScheduler.schedule`` builds an ``EventLoopScheduler`` (a condition, a
    queue, a scheduled item, datetime arithmetic) around every action it hands to its executor; a
    plain ``ThreadPoolScheduler``'s action goes to the executor directly: the same thread, and the
    same cancellation of an action not started yet (the action is given the scheduler itself, so it
    must not rely on the scheduler argument for recursive scheduling). Any other scheduler
    schedules as it does.
    """
    if type(scheduler) is ThreadPoolScheduler:
        executor = scheduler.executor
        if type(executor) is LeanThreadPool:  # (rxllm's own pools) no Future per action
            return executor.run_soon(action, scheduler, None)
        return executor.submit(action, scheduler, None).cancel
    return scheduler.schedule(action).dispose


class IdleExitPool(Executor):
    """A thread pool of at most ``max_workers`` daemon threads (the process's signals blocked) whose
    workers exit after ``idle_timeout`` seconds without work.

    ``ThreadPoolExecutor`` keeps every thread it ever started: after a burst of 1,000 streams the
    process kept ~900 idle threads (their stacks and a scheduler entry each) for good. Here a worker
    that waited ``idle_timeout`` for work ends, and a submission that finds no idle worker starts a
    new one (up to ``max_workers``; beyond, it queues). Workers are daemon threads: an interpreter
    that exits does not wait for an open stream (nor for an idle worker's timeout).
    """

    def __init__(self, max_workers: int, name: str, *, idle_timeout: float) -> None:
        if max_workers < 1 or not idle_timeout > 0:
            raise ValueError("max_workers must be at least 1 and idle_timeout positive")
        self._max_workers = max_workers
        self._name = name
        self._idle_timeout = idle_timeout
        self._ready = threading.Condition(threading.Lock())
        self._work: collections.deque[tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]]
        self._work = collections.deque()
        self._idle = 0  # workers waiting for work that have not taken any yet
        self._workers = 0
        self._threads: set[threading.Thread] = set()
        self._shutdown = False
        self._numbers = itertools.count()

    @property
    def workers(self) -> int:
        """How many worker threads are alive now (busy or idle)."""
        with self._ready:
            return self._workers

    def submit(self, fn: Callable[..., _T], /, *args: Any, **kwargs: Any) -> Future[_T]:
        future: Future[_T] = Future()
        with self._ready:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._work.append((future, fn, args, kwargs))
            start = len(self._work) > self._idle and self._workers < self._max_workers
            if start:
                self._workers += 1
            else:
                self._ready.notify()
        if start:
            thread = threading.Thread(target=self._run, name=f"{self._name}_{next(self._numbers)}", daemon=True)
            with self._ready:
                self._threads.add(thread)
            thread.start()
        return future

    def _run(self) -> None:
        block_process_signals()
        ready = self._ready
        work = self._work
        while True:
            with ready:
                until = time.monotonic() + self._idle_timeout
                self._idle += 1
                while not work and not self._shutdown:
                    left = until - time.monotonic()
                    if left <= 0:
                        break
                    ready.wait(left)
                self._idle -= 1
                if not work:  # idle too long, or shut down with nothing left to do: leave, in
                    self._workers -= 1  # the same critical section (a submission now starts a new one)
                    self._threads.discard(threading.current_thread())
                    return
                future, fn, args, kwargs = work.popleft()
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # as ThreadPoolExecutor's worker: the future holds it
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs  # no reference to the last work item while idle

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._shutdown = True
            if cancel_futures:
                while self._work:
                    self._work.popleft()[0].cancel()
            self._ready.notify_all()
            threads = list(self._threads)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
