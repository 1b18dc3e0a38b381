"""rxllm's own threads block SIGINT and SIGTERM, so a Ctrl-C always reaches the main thread.

A process-directed signal goes to any thread that does not block it; one that lands on a
background thread interrupts none of the main thread's blocking calls (the chat's ``input()``
under readline slept on). Each kind of thread rxllm starts is started here, for real, and its
signal mask read from the kernel (``/proc/self/task/<tid>/status``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from pathlib import Path

import pytest
from faults.faults_support import REQUEST, TIMEOUT, Recorder
from wire import OPENAI

from rxllm import AsyncHttpTransport, HttpTransport, RetryPolicy
from rxllm._core.threads import daemon_thread, thread_pool
from rxllm._tools._loops import default_tool_scheduler, tool_loop
from rxllm.testing import StubServer

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads signal masks from /proc")

_SIGINT, _SIGTERM = 1 << (signal.SIGINT - 1), 1 << (signal.SIGTERM - 1)


def _blocked(thread: threading.Thread) -> int:
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("SigBlk:")]
    return int(line.split()[1], 16)


def _rxllm_threads() -> dict[str, threading.Thread]:
    return {t.name: t for t in threading.enumerate() if t.name.startswith("rxllm-") and "stub" not in t.name}


def test_every_thread_rxllm_starts_blocks_sigint_and_sigterm() -> None:
    threaded, on_asyncio = HttpTransport(), AsyncHttpTransport()
    try:
        with StubServer([OPENAI.response("a"), OPENAI.response("b")]) as server:
            for transport in (threaded, on_asyncio):
                model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
                recorder = Recorder()
                recorder.subscribe(model.generate_content(REQUEST, stream=True))
                recorder.wait("a stream")
                assert recorder.errors == []
        ran = threading.Event()
        default_tool_scheduler().schedule(lambda *_: ran.set())
        assert ran.wait(TIMEOUT)
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), tool_loop()).result(TIMEOUT)
        threads = _rxllm_threads()
        kinds = {name.rstrip("_0123456789") for name in threads}
        assert {"rxllm-pruner", "rxllm-io", "rxllm-asyncio", "rxllm-tool", "rxllm-tool-loop"} <= kinds, kinds
        unmasked = {name: hex(_blocked(t)) for name, t in threads.items() if ~_blocked(t) & (_SIGINT | _SIGTERM)}
        assert unmasked == {}
    finally:
        threaded.close()
        on_asyncio.close()
    assert not _blocked(threading.main_thread()) & _SIGINT  # the main thread is left alone


def test_the_helpers_mask_their_threads_and_nothing_else() -> None:
    masks: list[int] = []
    thread = daemon_thread(lambda: masks.append(_blocked(threading.current_thread())), "rxllm-test")
    thread.join(TIMEOUT)
    with thread_pool(1, "rxllm-test-pool") as pool:
        masks.append(pool.submit(lambda: _blocked(threading.current_thread())).result(TIMEOUT))
    plain = threading.Thread(target=lambda: masks.append(_blocked(threading.current_thread())))
    plain.start()
    plain.join(TIMEOUT)
    assert [bool(m & _SIGINT) and bool(m & _SIGTERM) for m in masks] == [True, True, False]


def test_schedule_cancellable_runs_a_plain_pools_action_on_its_executor_and_cancels_one_not_started() -> None:
    from reactivex.scheduler import ThreadPoolScheduler

    from rxllm._core.threads import schedule_cancellable

    scheduler = ThreadPoolScheduler(1)
    try:
        gate, entered = threading.Event(), threading.Event()
        seen: list[tuple[object, object, str]] = []

        def blocker(given: object, state: object = "unset") -> None:
            seen.append((given, state, threading.current_thread().name))
            entered.set()
            gate.wait(TIMEOUT)

        ran_late: list[bool] = []
        schedule_cancellable(scheduler, blocker)
        assert entered.wait(TIMEOUT)
        cancel = schedule_cancellable(scheduler, lambda _s, _st=None: ran_late.append(True))
        cancel()  # queued behind the blocker on the one worker: never runs
        gate.set()
        done = threading.Event()
        schedule_cancellable(scheduler, lambda _s, _st=None: done.set())
        assert done.wait(TIMEOUT)
        assert ran_late == []
        given, state, thread = seen[0]
        assert given is scheduler and state is None  # the scheduler itself, as reactivex's action gets one
        assert thread != threading.current_thread().name
    finally:
        scheduler.executor.shutdown(wait=True)


def test_schedule_cancellable_schedules_on_any_other_scheduler() -> None:
    from reactivex.testing import TestScheduler

    from rxllm._core.threads import schedule_cancellable

    scheduler = TestScheduler()
    ran: list[object] = []
    schedule_cancellable(scheduler, lambda given, _state=None: ran.append(given))
    cancel = schedule_cancellable(scheduler, lambda given, _state=None: ran.append("cancelled one"))
    cancel()
    assert ran == []  # virtual time has not moved: nothing ran yet
    scheduler.start()
    assert len(ran) == 1 and ran[0] is not None and ran[0] != "cancelled one"
