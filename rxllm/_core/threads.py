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
from typing import Any, TypeVar

from reactivex import abc as rx_abc
from reactivex.scheduler import ThreadPoolScheduler

__all__ = [
    "IdleExitPool",
    "block_process_signals",
    "daemon_thread",
    "schedule_cancellable",
    "thread_pool",
    "thread_pool_scheduler",
]

_T = TypeVar("_T")

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
    """A ``ThreadPoolExecutor`` whose threads (``name_0``...) block the process's signals."""
    return ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name, initializer=block_process_signals)


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
        return scheduler.executor.submit(action, scheduler, None).cancel
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
