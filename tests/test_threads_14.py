"""``LeanThreadPool.run_soon``: ``submit`` without the ``Future``, and everything else of it the same.

rxllm's pools (``thread_pool``, hence ``thread_pool_scheduler``: the tool pool, the I/O pool) are
``LeanThreadPool``s; :func:`schedule_cancellable` hands them an action with ``run_soon``. Each
promise ``submit`` keeps is checked here for ``run_soon``: the thread it runs on (and its name and
signal mask), cancelling one not started, an error that does not stop the worker, the errors after
shutdown, ``shutdown(cancel_futures=True)``.
"""

from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from reactivex.scheduler import ThreadPoolScheduler

from rxllm._core.threads import LeanThreadPool, schedule_cancellable, thread_pool, thread_pool_scheduler
from rxllm._tools._loops import default_tool_scheduler

TIMEOUT = 10.0


def _blocked_now() -> int:
    status = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("SigBlk:")]
    return int(line.split()[1], 16)


def test_rxllms_pools_are_lean_thread_pool_executors() -> None:
    with thread_pool(2, "rxllm-test") as pool:
        assert type(pool) is LeanThreadPool and isinstance(pool, ThreadPoolExecutor)
    assert type(default_tool_scheduler().executor) is LeanThreadPool
    scheduler = thread_pool_scheduler(1, "rxllm-test-s")
    try:
        assert type(scheduler) is ThreadPoolScheduler and type(scheduler.executor) is LeanThreadPool
    finally:
        scheduler.executor.shutdown(wait=True)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads signal masks from /proc")
def test_run_soon_runs_on_the_pools_named_thread_with_the_signals_blocked() -> None:
    with thread_pool(1, "rxllm-test-lean") as pool:
        seen: list[tuple[str, int, tuple[Any, ...]]] = []
        done = threading.Event()

        def action(*args: Any) -> None:
            seen.append((threading.current_thread().name, _blocked_now(), args))
            done.set()

        pool.run_soon(action, "a", 1)
        assert done.wait(TIMEOUT)
    ((name, mask, args),) = seen
    assert name == "rxllm-test-lean_0" and args == ("a", 1)
    sigint, sigterm = 1 << (signal.SIGINT - 1), 1 << (signal.SIGTERM - 1)
    assert mask & sigint and mask & sigterm


def test_cancelling_one_not_started_means_it_never_runs_and_an_error_does_not_stop_the_worker() -> None:
    with thread_pool(1, "rxllm-test-lean") as pool:
        entered, gate = threading.Event(), threading.Event()
        ran: list[str] = []

        def blocker() -> None:
            entered.set()
            gate.wait(TIMEOUT)
            raise ValueError("dropped, as an unread Future would keep it")

        cancel_running = pool.run_soon(blocker)
        assert entered.wait(TIMEOUT)
        cancel = pool.run_soon(lambda: ran.append("cancelled one"))
        assert cancel() is True and cancel() is True  # (Future.cancel: True again once cancelled)
        assert cancel_running() is False  # running: not cancelled (Future.cancel)
        gate.set()
        done = threading.Event()
        pool.run_soon(lambda: (ran.append("after"), done.set()))
        assert done.wait(TIMEOUT)
        assert ran == ["after"]
        assert cancel_running() is False  # done: not cancelled


def test_run_soon_after_shutdown_raises_what_submit_raises_and_shutdown_cancels_what_is_queued() -> None:
    pool = thread_pool(1, "rxllm-test-lean")
    entered, gate = threading.Event(), threading.Event()
    ran: list[str] = []
    pool.run_soon(lambda: (entered.set(), gate.wait(TIMEOUT)))
    assert entered.wait(TIMEOUT)
    pool.run_soon(lambda: ran.append("queued"))
    submitted = pool.submit(lambda: ran.append("submitted"))
    pool.shutdown(wait=False, cancel_futures=True)  # (the queue is drained while the blocker holds the worker)
    gate.set()
    for thread in list(pool._threads):
        thread.join(TIMEOUT)
    assert ran == [] and submitted.cancelled()
    with pytest.raises(RuntimeError) as lean:
        pool.run_soon(lambda: None)
    with pytest.raises(RuntimeError) as plain:
        pool.submit(lambda: None)
    assert str(lean.value) == str(plain.value) == "cannot schedule new futures after shutdown"


def test_schedule_cancellable_hands_a_lean_pool_its_action_without_a_future(monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler = thread_pool_scheduler(1, "rxllm-test-lean")
    try:
        submitted: list[object] = []
        real_submit = LeanThreadPool.submit

        def counted(self: LeanThreadPool, *args: Any, **kwargs: Any) -> Any:
            submitted.append(args[0])
            return real_submit(self, *args, **kwargs)

        monkeypatch.setattr(LeanThreadPool, "submit", counted)
        seen: list[tuple[object, object, str]] = []
        done = threading.Event()

        def action(given: object, state: object = "unset") -> None:
            seen.append((given, state, threading.current_thread().name))
            done.set()

        schedule_cancellable(scheduler, action)
        assert done.wait(TIMEOUT)
        assert seen == [(scheduler, None, "rxllm-test-lean_0")] and submitted == []
    finally:
        scheduler.executor.shutdown(wait=True)


def test_schedule_cancellable_on_a_plain_pool_still_submits() -> None:
    scheduler = ThreadPoolScheduler(1)
    try:
        done = threading.Event()
        schedule_cancellable(scheduler, lambda given, _state=None: done.set())
        assert done.wait(TIMEOUT)
        assert type(scheduler.executor) is ThreadPoolExecutor
    finally:
        scheduler.executor.shutdown(wait=True)
