"""After a burst of streams the threaded transport's I/O pool shrinks back: idle workers exit.

``ThreadPoolExecutor`` keeps every thread it started (a 1,000-stream burst left ~900 idle threads);
the I/O pool's workers exit after ``idle_thread_timeout`` seconds without a stream, and a later
stream starts a thread again. Every wait is bounded (a join with a timeout), nothing sleeps.
"""

from __future__ import annotations

import threading

from faults_support import REQUEST, TIMEOUT, Recorder
from wire import OPENAI

from rxllm import HttpTransport, RetryPolicy
from rxllm._core.threads import IdleExitPool
from rxllm.testing import Hold, StubResponse, StubServer

BURST = 24


def test_idle_io_threads_exit_after_a_burst() -> None:
    baseline = set(threading.enumerate())
    release = threading.Event()
    held = StubResponse(before_headers=[Hold(release, timeout=TIMEOUT)], body=OPENAI.stream("ok"))
    with StubServer([held] * BURST + [OPENAI.response("again")]) as server:
        transport = HttpTransport(max_concurrent_streams=BURST, read_timeout=TIMEOUT, idle_thread_timeout=0.05)
        try:
            model = OPENAI.model(server.url, transport=transport, retry_policy=RetryPolicy.never())
            pool = transport.scheduler.executor  # type: ignore[attr-defined]
            assert isinstance(pool, IdleExitPool)
            recorders = [Recorder() for _ in range(BURST)]
            for recorder in recorders:
                recorder.subscribe(model.generate_content(REQUEST, stream=True))
            # every stream waits for its headers on a thread of its own
            assert pool.workers == BURST
            burst = [t for t in threading.enumerate() if t not in baseline and t.name.startswith("rxllm-io")]
            assert len(burst) == BURST
            release.set()
            for recorder in recorders:
                recorder.wait("a stream of the burst")
                assert recorder.completed and recorder.items[-1].text() == "ok"
            for thread in burst:  # each exits once it waited idle_thread_timeout for a next stream
                thread.join(TIMEOUT)
                assert not thread.is_alive(), f"{thread.name} is still alive after the burst"
            assert pool.workers == 0
            assert not [t for t in threading.enumerate() if t not in baseline and t.name.startswith("rxllm-io")]

            again = Recorder()  # the shrunk pool starts a thread for the next stream
            again.subscribe(model.generate_content(REQUEST, stream=True))
            again.wait("a stream after the burst")
            assert again.completed and again.items[-1].text() == "again"
        finally:
            release.set()
            transport.close()


def test_the_pool_runs_queued_work_beyond_its_workers_and_reports_failures() -> None:
    pool = IdleExitPool(2, "rxllm-test", idle_timeout=TIMEOUT)
    gate = threading.Event()
    try:
        blocked = [pool.submit(gate.wait, TIMEOUT) for _ in range(2)]
        queued = pool.submit(lambda: "queued")
        assert pool.workers == 2 and not queued.done()  # no third thread: the work waits its turn
        gate.set()
        assert queued.result(TIMEOUT) == "queued" and all(f.result(TIMEOUT) for f in blocked)
        failing = pool.submit(lambda: 1 / 0)
        assert isinstance(failing.exception(TIMEOUT), ZeroDivisionError)
        assert pool.submit(lambda: "after a failure").result(TIMEOUT) == "after a failure"
    finally:
        gate.set()
        pool.shutdown(wait=True)
    assert pool.workers == 0
