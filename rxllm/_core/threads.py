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

import contextlib
import signal
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from reactivex.scheduler import ThreadPoolScheduler

__all__ = ["block_process_signals", "daemon_thread", "thread_pool", "thread_pool_scheduler"]

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


def thread_pool_scheduler(max_workers: int, name: str) -> ThreadPoolScheduler:
    """A plain ``ThreadPoolScheduler`` running on :func:`thread_pool`."""
    scheduler = ThreadPoolScheduler(max_workers)
    scheduler.executor = thread_pool(max_workers, name)
    return scheduler
